// Package layout holds the tests that keep the repository's layout: the
// package dependencies of docs/DESIGN.md section 3 (which cairn package,
// and which package's tests, may import which), the table of that section,
// made from the same rules (TestDesignTable, -update to write it), and the
// documentation's relative links and the README's length (docs_test.go).
package layout
