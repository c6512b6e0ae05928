package graph

// The aggregates only a window with many (WindowSpec.Aggregates) makes,
// beside AggCount to AggLast.
const (
	// AggStddev is the population standard deviation of the values.
	AggStddev Aggregate = AggLast + 1 + iota
	// AggQuantile is the NamedAggregate.Quantile of the values, from a
	// sketch whose error is bounded relative to the value
	// (QuantileRelativeAccuracy).
	AggQuantile
)

// QuantileRelativeAccuracy bounds a quantile's error: the value a
// window gives for quantile q is within this fraction of the true
// q-quantile of its values (DDSketch's relative-error guarantee).
const QuantileRelativeAccuracy = 0.01

// NamedAggregate is one of the results of a window with many.
type NamedAggregate struct {
	// Name is the result's name in the WindowRow.
	Name string
	// Func is what is made of the argument's values: AggCount (of the
	// records; Arg is ignored) to AggLast, AggStddev or AggQuantile.
	Func Aggregate
	// Quantile is AggQuantile's q, in [0, 1].
	Quantile float64
	// Arg is the index, in what WindowSpec.Args fills, of the value it
	// aggregates.
	Arg int
}

// WindowRow is the Payload of the output record of a window with many
// aggregates: the record's Key is the window's key, its Time the window's
// last millisecond and its Value 0.
type WindowRow struct {
	Start, End int64 // [Start, End) in milliseconds
	Count      int64 // the records in the window
	// Names are the aggregates' names, in WindowSpec.Aggregates' order
	// (shared by every row of the operator: never modify), and Values
	// their results, in the same order.
	Names  []string
	Values []float64
}
