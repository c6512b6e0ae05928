module github.com/cairn-edge/cairn

go 1.26.8

require (
	github.com/cockroachdb/datadriven v1.0.3 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
)
