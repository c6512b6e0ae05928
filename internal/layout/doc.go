// Package layout holds the test that keeps the package dependencies of
// docs/DESIGN.md section 3: which cairn package may import which.
package layout
