package config

import (
	"strings"
	"testing"
	"time"
)

// TestCheckpointModes checks the unaligned mode and the alignment timeout:
// accepted where they make sense, refused with a position where not.
func TestCheckpointModes(t *testing.T) {
	const pipeline = "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\ncheckpoints:\n  %s\n"
	for _, tc := range []struct {
		checkpoints string
		err         string
	}{
		{"mode: unaligned", ""},
		{"{mode: exactly-once, alignment_timeout: 2s}", ""},
		{"{mode: unaligned, alignment_timeout: 2s}", "test.yaml:5:40: alignment_timeout must be positive and needs mode exactly-once (unaligned checkpoints do not align)"},
		{"{mode: at-least-once, alignment_timeout: 2s}", "needs mode exactly-once (at-least-once checkpoints do not align)"},
		{"{alignment_timeout: -1s}", `test.yaml:5:23: want a duration such as 500ms or 10s, not "-1s"`},
		{"mode: sideways", "want exactly-once, at-least-once or unaligned"},
	} {
		src := strings.Replace(pipeline, "%s", tc.checkpoints, 1)
		c, errs := Parse("test.yaml", []byte(src), env(nil))
		switch {
		case tc.err == "" && errs != nil:
			t.Errorf("%s: %v", tc.checkpoints, errs)
		case tc.err != "" && (errs == nil || !strings.Contains(errs.Error(), tc.err)):
			t.Errorf("%s: errors %v, want %q", tc.checkpoints, errs, tc.err)
		case tc.err == "" && strings.Contains(tc.checkpoints, "alignment_timeout") && c.Checkpoints.AlignmentTimeout != 2*time.Second:
			t.Errorf("%s: alignment timeout %v", tc.checkpoints, c.Checkpoints.AlignmentTimeout)
		}
	}
}
