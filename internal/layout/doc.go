// Package layout holds the tests that keep the repository's layout: the
// package dependencies of docs/DESIGN.md section 3 (which cairn package
// may import which), and the documentation's relative links and the
// README's length (docs_test.go).
package layout
