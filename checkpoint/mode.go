package checkpoint

import (
	"fmt"
	"strconv"
	"strings"
)

// Mode is a job's checkpointing guarantee.
type Mode uint8

const (
	// ExactlyOnce aligns barriers: after barrier n arrives on an input, that
	// input is blocked until barrier n has arrived on all inputs and the
	// snapshot is taken (invariant I3). The default.
	ExactlyOnce Mode = iota
	// AtLeastOnce never blocks: records after barrier n on an input may be
	// processed before the snapshot, so after a restore they are processed
	// again. Only subtasks with several input channels can duplicate.
	AtLeastOnce
	// Unaligned is exactly-once without alignment: a subtask snapshots when
	// the first barrier n reaches it, barriers overtake the records queued
	// in front of them, and those records — on each input, the ones after
	// the snapshot and before that input's barrier n — are persisted with
	// the checkpoint as channel state and replayed first after a restore
	// (invariant I1's exception, I5).
	Unaligned
)

func (m Mode) String() string {
	switch m {
	case ExactlyOnce:
		return "exactly-once"
	case AtLeastOnce:
		return "at-least-once"
	case Unaligned:
		return "unaligned"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode parses a Mode's String form.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(s) {
	case "exactly-once", "exactly_once":
		return ExactlyOnce, nil
	case "at-least-once", "at_least_once":
		return AtLeastOnce, nil
	case "unaligned":
		return Unaligned, nil
	}
	return 0, fmt.Errorf("unknown checkpointing mode %q (want exactly-once, at-least-once or unaligned)", s)
}

// TaskID names a subtask: an operator id and a subtask index.
type TaskID struct {
	Operator string
	Subtask  int
}

func (t TaskID) String() string { return t.Operator + "/" + strconv.Itoa(t.Subtask) }

// Compare orders task ids by operator, then subtask.
func (t TaskID) Compare(o TaskID) int {
	if c := strings.Compare(t.Operator, o.Operator); c != 0 {
		return c
	}
	return t.Subtask - o.Subtask
}
