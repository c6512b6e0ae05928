package config

import "github.com/cairn-edge/cairn/graph"

// opUnion passes the records of all its inputs.
var opUnion = operatorKind{name: "union", keepsFields: true,
	inputs: inputCount{min: 2, says: "needs two inputs or more"},
	build:  func(*Operator, Hooks) (func(int) graph.Operator, error) { return graph.Union(), nil },
	doc:    "Passes the records of its inputs, two or more. They carry the payload fields that those of every input carry."}
