package config

import "github.com/cairn-edge/cairn/graph"

// opSum sums each key's values.
var opSum = operatorKind{name: "sum", keyed: true,
	build: func(*Operator, Hooks) (func(int) graph.Operator, error) { return graph.Sum(), nil },
	doc:   "Emits for each record the sum of its key's values so far, as the value."}
