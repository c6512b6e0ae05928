package loopback

import "testing"

// FreePort never returns a port twice in a process, though the kernel
// often hands the port of a closed listener out again.
func TestFreePortIsNeverRepeated(t *testing.T) {
	seen := make(map[int]bool)
	for range 2000 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d returned twice", port)
		}
		seen[port] = true
	}
}
