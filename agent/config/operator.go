package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/graph/exprop"
	"github.com/cairn-edge/cairn/mqttio"
)

// Operator is a step of the graph, reading named inputs. What it does is
// its kind, which its Type names (operatorKinds); the settings of the
// kinds that take some are declared with them, in their files (op_*.go),
// and embedded here, where the file gives them as the operator's own:
// docs/config.md lists the fields in this order.
type Operator struct {
	Pos
	// The operator's name: 1 to 64 letters, digits, `_`, `-` and `.`,
	// unique among the sources, operators and sinks.
	ID string `yaml:"id,required"`
	// What the operator does: see [Operator types](#operator-types).
	Type string `yaml:"type,required"`
	// The sources and operators, listed above this one, whose records it
	// reads.
	Inputs []string `yaml:"inputs,required"`
	// What the inputs are hash-partitioned by, and a keyed type keeps its
	// state by: an [expr](https://expr-lang.org) expression over the
	// records read, as a map's `expr`, that gives a string, a number or
	// true or false — a payload field (`device`), `key` for the record's
	// key, or any expression (`site + "-" + line`) — or a list of them,
	// a composite key whose parts are joined by `/`, each part's `%` and
	// `/` written `%25` and `%2F` (`[site, line, device]` makes
	// `north/line-2/dev-7`). A record that lacks a field named alone,
	// or for which an expression fails, has the key `(missing)`.
	KeyBy Strings `yaml:"key_by"`
	// How many subtasks run the operator, 1 to 128.
	Parallelism int `yaml:"parallelism" default:"1"`
	ExprSettings
	MapSettings
	WindowSettings
	DedupeSettings
	ThresholdSettings
	JoinSettings
	// What becomes of a record the operator rejects (an expression that
	// fails on it or gives the wrong type, a total it would make
	// infinite): `dead-letter` stores it, with the reason, as a dead
	// letter of the operator and goes on, `drop` counts it and goes on,
	// `fail` stops the pipeline.
	OnError string `yaml:"on_error" default:"dead-letter"`
	// PayloadFields are the payload fields of the records the operator
	// reads, as the validation found them (nil: not known): what its
	// expressions (key_by's, a filter's or map's expr and fields, a
	// window's aggregates) are compiled with.
	PayloadFields exprop.Fields `yaml:"-"`
}

// What an operator does with a record it rejects (Operator.OnError).
const (
	OnErrorDeadLetter = "dead-letter"
	OnErrorDrop       = "drop"
	OnErrorFail       = "fail"
)

// An operatorKind is a kind of operator, which a file names in an
// operator's type: all that the validator, docs/config.md and
// Operator.Build know of it. Each is defined in a file of its own
// (op_*.go, where kinds that share their settings share a file) and
// listed in operatorKinds.
type operatorKind struct {
	name string
	// doc says what it does, for docs/config.md.
	doc string
	// needs are the settings, by their names in the file, that the kind
	// needs besides id, type and inputs (and key_by if it is keyed); the
	// other kinds ignore them. The validation refuses an operator
	// without one of them (TestOperatorKinds), unless its doc names
	// another setting that takes its place (a map's fields, its expr's).
	needs []string
	// inputs bounds how many inputs the kind reads, if it does.
	inputs inputCount
	// keyed is set if the kind keeps its state by key: the validation
	// refuses an operator of it without key_by.
	keyed bool
	// keepsFields is set if the kind's records carry the payload fields
	// of those it reads; the others' carry none, but those their
	// validate notes in validator.fields (a window's aggregates).
	keepsFields bool
	// validate, if set, reports what else is wrong with o, an operator
	// of the kind that reads records carrying the payload fields in (nil:
	// not known). It runs after the checks that every operator, and its
	// inputs and key_by, have had.
	validate func(v *validator, o *Operator, in exprop.Fields)
	// build makes o, an operator of the kind that the validation
	// accepted, with the hooks h: what makes each of its subtasks.
	build func(o *Operator, h Hooks) (func(subtask int) graph.Operator, error)
}

// Hooks are what Operator.Build takes from the agent besides the
// operator's settings.
type Hooks struct {
	// Late, if set, is called once by a kind whose operators drop the
	// records that come after their window closed (window, join) or that
	// nothing can join any more (interval_join), and returns what each
	// such record is handed to.
	Late func() func(*graph.Record)
	// Unmatched, if set, is called once by a kind whose operators drop
	// the records that have nothing to join yet (lookup_join), and
	// returns what each such record is handed to.
	Unmatched func() func(*graph.Record)
}

// Build makes operator o of a config that Parse accepted, as its kind
// does: what makes each of its subtasks.
func (o *Operator) Build(h Hooks) (func(subtask int) graph.Operator, error) {
	k := kindNamed(o.Type)
	if k == nil {
		return nil, fmt.Errorf("unknown operator type %q", o.Type)
	}
	return k.build(o, h)
}

// An inputCount bounds how many inputs an operator reads.
type inputCount struct {
	min, max int // 0: no bound
	// says what an error says of the kind when an operator reads too few
	// or too many, after its name: "has exactly two inputs".
	says string
}

// operatorKinds are the kinds of operators, in the order errors and
// docs/config.md list them.
var operatorKinds = []*operatorKind{&opFilter, &opMap, &opUnion, &opCount, &opSum, &opWindow, &opJoin, &opIntervalJoin, &opLookupJoin, &opDedupe, &opThreshold}

// OperatorKinds are the names of the kinds of operators, which a file
// gives in an operator's type, in the order docs/config.md lists them.
func OperatorKinds() []string {
	names := make([]string, len(operatorKinds))
	for i, k := range operatorKinds {
		names[i] = k.name
	}
	return names
}

// kindNamed returns the kind named name, nil if there is none.
func kindNamed(name string) *operatorKind {
	if i := slices.IndexFunc(operatorKinds, func(k *operatorKind) bool { return k.name == name }); i >= 0 {
		return operatorKinds[i]
	}
	return nil
}

// operator checks operator o, and notes it as defined, with the payload
// fields of its records: what every operator needs here, what its kind
// needs of its inputs and key_by, and then the kind's own checks.
func (v *validator) operator(o *Operator) {
	c := v.c
	v.id(o.Pos, &o.ID)
	v.parallelism(o.Pos, &o.Parallelism)
	name := c.show(&o.ID)
	if len(o.Inputs) == 0 {
		v.errorf(o.Pos, "operator %s: no inputs", name)
	}
	for i, in := range o.Inputs {
		if !v.defined[in] {
			v.errorf(c.at(entry{&o.Inputs, i}, o.Pos), "operator %s: input %s is not a source or an operator defined above", name, c.show(entry{&o.Inputs, i}))
		}
	}
	for _, in := range o.Inputs {
		if v.timeless[o.ID] == "" {
			v.timeless[o.ID] = v.timeless[in]
		}
	}
	k := kindNamed(o.Type)
	in := merge(o.Inputs, v.fields)
	o.PayloadFields = in
	v.defined[o.ID] = true
	if k != nil {
		// Its records carry the payload fields of those it reads,
		// or are its own, without a payload or with one that is no
		// JSON object (graph.WindowResult, say), unless its validate
		// notes others (a window's graph.WindowRow).
		v.fields[o.ID] = exprop.Fields{}
		if k.keepsFields {
			v.fields[o.ID] = in
		}
	}
	if !slices.Contains(onErrors, o.OnError) {
		v.errorf(c.at(&o.OnError, o.Pos), "operator %s: on_error %s is none of %s", name, c.show(&o.OnError), strings.Join(onErrors, ", "))
	}
	if k == nil {
		known := make([]string, len(operatorKinds))
		for i, k := range operatorKinds {
			known[i] = k.name
		}
		v.errorf(c.at(&o.Type, o.Pos), "operator %s: unknown type %s (known: %s)", name, c.show(&o.Type), strings.Join(known, ", "))
		return
	}
	if n := len(o.Inputs); n < k.inputs.min || k.inputs.max > 0 && n > k.inputs.max {
		v.errorf(c.at(&o.Inputs, o.Pos), "operator %s: %s %s", name, k.name, k.inputs.says)
	}
	if k.keyed && o.KeyBy == nil && c.at(&o.KeyBy, Pos{}) == (Pos{}) { // not one that did not decode
		v.errorf(o.Pos, "operator %s: %s is keyed: set key_by", name, k.name)
	}
	v.keyBy(o, in)
	if k.validate != nil {
		k.validate(v, o, in)
	}
}

// merge returns the payload fields of the records of all of inputs: those
// every input has, with their type if all agree (else any); nil if the
// fields of an input are not known.
func merge(inputs []string, fields map[string]exprop.Fields) exprop.Fields {
	var out exprop.Fields
	for i, in := range inputs {
		f := fields[in]
		if f == nil {
			return nil
		}
		if i == 0 {
			out = maps.Clone(f)
			continue
		}
		for name, t := range out {
			switch u, ok := f[name]; {
			case !ok:
				delete(out, name)
			case u != t:
				out[name] = exprop.Any
			}
		}
	}
	return out
}

// MissingKey is the key of records that lack a field key_by names alone,
// or for which a key_by expression fails: they are grouped together
// rather than failing the job.
const MissingKey = "(missing)"

// Key returns the key of a record by operator o's key_by, which the
// validation accepted (exprop.KeyBy): each part written as a source
// writes the value of its key field (mqttio.FormatKey), MissingKey if one
// fails.
func (o *Operator) Key() (func(*graph.Record) string, error) {
	return exprop.KeyBy(o.KeyBy, o.PayloadFields, mqttio.FormatKey, MissingKey)
}

// keyBy checks the key_by of operator o, which reads records that carry
// the payload fields in: each expression compiles as the agent's
// partitioner compiles it (exprop.CompileKey).
func (v *validator) keyBy(o *Operator, in exprop.Fields) {
	if o.KeyBy == nil {
		return
	}
	c, name := v.c, v.c.show(&o.ID)
	if len(o.KeyBy) == 0 {
		v.errorf(c.at(&o.KeyBy, o.Pos), "operator %s: key_by is empty: name a field, or list the parts of a composite key", name)
	}
	for i, src := range o.KeyBy {
		at := entry{&o.KeyBy, i}
		if strings.TrimSpace(src) == "" {
			v.errorf(c.at(at, o.Pos), "operator %s: key_by %s is empty: name a field, such as device, or write an expression", name, c.show(at))
			continue
		}
		if _, err := exprop.CompileKey(src, in); err != nil {
			v.exprError(o, at, "key_by", in, err, func(shown, got, want string) string {
				return fmt.Sprintf("key_by %s gives %s: a key is %s", shown, got, want)
			})
		}
	}
}

// needEventTime reports, for operator o, which works in event time and
// so waits for watermarks (what would does with them, "its windows would
// never close"), a source upstream that has none: one without time sends
// no watermarks, so o's event time, the least of its inputs', would stay
// where it is for good.
func (v *validator) needEventTime(o *Operator, would string) {
	if src := v.timeless[o.ID]; src != "" {
		v.errorf(o.Pos, "operator %s works in event time, but source %s, whose records it reads, has no time: its event time would never move, and %s; give the source a time (the payload field of each reading's time)",
			v.c.show(&o.ID), src, would)
	}
}
