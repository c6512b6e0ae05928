package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCompletionsWait checks that a wait for a checkpoint ends when it
// completes (or a later one does), when it is aborted, and when the job
// stops — not only when the caller gives up.
func TestCompletionsWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var c completions
	waited := make(chan error, 1)
	go func() { waited <- c.wait(ctx, 3) }()
	c.completed(2)
	c.abort(3, "declined: disk full")
	if err := <-waited; err == nil || !strings.Contains(err.Error(), "checkpoint 3 was aborted: declined: disk full") {
		t.Fatalf("wait for an aborted checkpoint = %v", err)
	}
	c.completed(4)
	if err := c.wait(ctx, 3); err != nil {
		t.Fatalf("wait after a later checkpoint completed = %v", err)
	}
	go func() { waited <- c.wait(ctx, 5) }()
	failed := errors.New("1 checkpoints failed in a row")
	c.stopped(failed)
	if err := <-waited; !errors.Is(err, failed) {
		t.Fatalf("wait when the job stopped = %v", err)
	}
}
