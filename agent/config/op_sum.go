package config

// opSum sums each key's values.
var opSum = operatorKind{name: "sum", keyed: true,
	doc: "Emits for each record the sum of its key's values so far, as the value."}
