module github.com/expr-lang/expr

go 1.18
