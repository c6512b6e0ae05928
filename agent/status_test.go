package agent

import "testing"

// TestStatusSaysRestoringWhileStateIsRead: while recovery reads the state
// an incarnation restores, before there is a job, the status says
// "restoring", not "starting".
func TestStatusSaysRestoringWhileStateIsRead(t *testing.T) {
	c := &state{}
	if s := c.status().State; s != "starting" {
		t.Fatalf("state %q, want starting", s)
	}
	c.restoring.Store(true)
	if s := c.status().State; s != "restoring" {
		t.Fatalf("state %q while the state is read, want restoring", s)
	}
}
