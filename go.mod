module github.com/cairn-edge/cairn

go 1.26.8

require (
	github.com/cockroachdb/datadriven v1.0.3
	go.etcd.io/bbolt v1.5.0
)

require (
	github.com/pmezard/go-difflib v1.0.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
)
