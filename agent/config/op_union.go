package config

// opUnion passes the records of all its inputs.
var opUnion = operatorKind{name: "union", keepsFields: true,
	inputs: inputCount{min: 2, says: "needs two inputs or more"},
	doc:    "Passes the records of its inputs, two or more. They carry the payload fields that those of every input carry."}
