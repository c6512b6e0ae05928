//go:build !unix

package mqttio

// lockDir does not lock where there is no flock.
func lockDir(string) (func() error, error) { return func() error { return nil }, nil }
