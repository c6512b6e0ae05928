package exprop

import (
	"errors"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/graph"
)

type collect struct{ got []graph.Record }

func (c *collect) Emit(r *graph.Record) { c.got = append(c.got, *r) }

func run(t *testing.T, newOp func(int) graph.Operator, recs ...graph.Record) ([]graph.Record, error) {
	t.Helper()
	out := &collect{}
	s := graph.NewTaskState(graph.TaskInfo{Operator: "x", Parallelism: 1}, out)
	op := newOp(0)
	if err := op.Open(s.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if err := op.ProcessRecord(0, &recs[i]); err != nil {
			return out.got, err
		}
	}
	return out.got, nil
}

func TestFilterAndMap(t *testing.T) {
	f, err := Filter(`value > 30 && site == "north"`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := run(t, f,
		graph.Record{Key: "a", Value: 31, Payload: map[string]any{"site": "north"}},
		graph.Record{Key: "b", Value: 31, Payload: map[string]any{"site": "south"}},
		graph.Record{Key: "c", Value: 29, Payload: map[string]any{"site": "north"}})
	if err != nil || len(got) != 1 || got[0].Key != "a" {
		t.Fatalf("filter kept %v (%v)", got, err)
	}
	m, err := Map(`(value - 32) * 5 / 9`)
	if err != nil {
		t.Fatal(err)
	}
	got, err = run(t, m, graph.Record{Key: "a", Value: 212})
	if err != nil || got[0].Value != 100 {
		t.Fatalf("map gave %v (%v)", got, err)
	}
}

func TestExpressionErrors(t *testing.T) {
	if _, err := Filter("value >"); err == nil {
		t.Fatal("a broken expression compiled")
	}
	// A reading without the field, or with one of another type, is
	// rejected alone: the operator goes on with the next.
	f, _ := Filter("humidity > 50")
	var rejected *graph.RecordError
	for _, payload := range []map[string]any{{}, {"humidity": "wet"}} {
		_, err := run(t, f, graph.Record{Value: 1, Payload: payload})
		if !errors.As(err, &rejected) || !strings.HasPrefix(err.Error(), `filter "humidity > 50": invalid operation:`) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("a filter on %v: %v, want a one-line graph.RecordError", payload, err)
		}
	}
	if got, err := run(t, f, graph.Record{Key: "k", Payload: map[string]any{"humidity": 60.0}}); err != nil || len(got) != 1 {
		t.Fatalf("the filter after a rejected record kept %v (%v)", got, err)
	}
	f, _ = Filter("value + 1")
	if _, err := run(t, f, graph.Record{Value: 1}); !errors.As(err, &rejected) || !strings.Contains(err.Error(), "want true or false") {
		t.Fatalf("a filter giving a number: %v", err)
	}
	m, _ := Map(`"text"`)
	if _, err := run(t, m, graph.Record{Value: 1}); !errors.As(err, &rejected) || !strings.Contains(err.Error(), "want a number") {
		t.Fatalf("a map giving a string: %v", err)
	}
}
