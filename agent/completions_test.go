package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
)

// TestCompletionsWait checks that a wait for a checkpoint ends when it
// completes (or a later one does), with the newest completed checkpoint,
// which a savepoint writes (the job's Status may not show it yet); when
// it is aborted; and when the job stops — not only when the caller gives
// up.
func TestCompletionsWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var c completions
	type result struct {
		m   *checkpoint.Manifest
		err error
	}
	waited := make(chan result, 1)
	wait := func(id uint64) {
		go func() {
			m, err := c.wait(ctx, id)
			waited <- result{m, err}
		}()
	}
	wait(3)
	c.completed(&checkpoint.Manifest{ID: 2})
	c.abort(3, "declined: disk full")
	if r := <-waited; r.err == nil || !strings.Contains(r.err.Error(), "checkpoint 3 was aborted: declined: disk full") {
		t.Fatalf("wait for an aborted checkpoint = %v, %v", r.m, r.err)
	}
	wait(5)
	c.completed(&checkpoint.Manifest{ID: 5})
	if r := <-waited; r.err != nil || r.m == nil || r.m.ID != 5 {
		t.Fatalf("wait for checkpoint 5 as it completed = %v, %v", r.m, r.err)
	}
	c.completed(&checkpoint.Manifest{ID: 6})
	if m, err := c.wait(ctx, 3); err != nil || m == nil || m.ID != 6 {
		t.Fatalf("wait after a later checkpoint completed = %v, %v; want the newest, 6", m, err)
	}
	wait(7)
	failed := errors.New("1 checkpoints failed in a row")
	c.stopped(failed)
	if r := <-waited; !errors.Is(r.err, failed) {
		t.Fatalf("wait when the job stopped = %v, %v", r.m, r.err)
	}
}
