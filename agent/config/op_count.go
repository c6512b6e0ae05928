package config

import "github.com/cairn-edge/cairn/graph"

// opCount counts each key's records.
var opCount = operatorKind{name: "count", keyed: true,
	build: func(*Operator, Hooks) (func(int) graph.Operator, error) { return graph.Count(), nil },
	doc:   "Emits for each record the number of its key's records so far, as the value."}
