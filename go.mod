module github.com/cairn-edge/cairn

go 1.26.8
