package config

// opCount counts each key's records.
var opCount = operatorKind{name: "count", keyed: true,
	doc: "Emits for each record the number of its key's records so far, as the value."}
