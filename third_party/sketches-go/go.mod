module github.com/DataDog/sketches-go

go 1.23
