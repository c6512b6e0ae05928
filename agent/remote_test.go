package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/checkpoint"
)

// A change of the remote section, even of one field, cannot be applied by
// a reload; its move in the file alone is no change.
func TestReloadRefusesRemoteChanges(t *testing.T) {
	parse := func(remote string) *config.Config {
		src := "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n" + remote
		c, errs := config.Parse("p.yaml", []byte(src), func(string) (string, bool) { return "", false })
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return c
	}
	const r = "remote:\n  endpoint: s3:9000\n  bucket: bkt\n  access_key: a\n  secret_key: s\n"
	base := parse(r)
	for next, want := range map[string]string{
		r:                    "",
		"# moved\n\n" + r:    "",
		"":                   "remote",
		r + "  prefix: x\n":  "remote",
		r + "  tls: true\n":  "", // the default, said
		r + "  tls: false\n": "remote",
	} {
		if got := unappliable(base, parse(next)); got != want {
			t.Errorf("from\n%s\nto\n%s\nunappliable = %q, want %q", r, next, got, want)
		}
	}
	if got := unappliable(parse(""), parse("")); got != "" {
		t.Errorf("no remote section either time: %q", got)
	}
}

// Moving an embedded broker's users and anonymous grants in the file is
// no change; changing one is.
func TestReloadComparesBrokerUsers(t *testing.T) {
	parse := func(text string) *config.Config {
		c, errs := config.Parse("p.yaml", []byte(text), func(string) (string, bool) { return "", false })
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return c
	}
	const src = "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"
	const b = "brokers:\n  l:\n    embedded: true\n    allow_anonymous: true\n    anonymous: {subscribe: [a/#]}\n    users:\n      - {username: d, password: p}\n"
	base := parse(b + src)
	if got := unappliable(base, parse("# moved\n\n"+b+src)); got != "" {
		t.Errorf("users moved: %q", got)
	}
	if got := unappliable(base, parse(strings.Replace(b, "p}", "q}", 1)+src)); got != "brokers" {
		t.Errorf("a password changed: %q, want brokers", got)
	}
	if got := unappliable(base, parse(strings.Replace(b, "a/#", "b/#", 1)+src)); got != "brokers" {
		t.Errorf("an anonymous grant changed: %q, want brokers", got)
	}
}

// TestDamageNamesTheBlob: a checkpoint whose every blob verifies shows no
// damage; one that references a blob with another checksum, or one the
// store lacks, shows why (cairn checkpoints --verify).
func TestDamageNamesTheBlob(t *testing.T) {
	store := checkpoint.NewMemStore(0)
	task := checkpoint.TaskID{Operator: "counts", Subtask: 0}
	h, err := store.PutState(1, task, slices.Values([][]byte{[]byte("state")}))
	if err != nil {
		t.Fatal(err)
	}
	whole := &checkpoint.Manifest{ID: 1, Subtasks: []checkpoint.Ack{{Task: task, ID: 1, State: h}}}
	if d := damage(store, whole); d != "" {
		t.Fatalf("a whole checkpoint: damage %q", d)
	}
	flipped := h
	flipped.CRC32C ^= 1
	missing := checkpoint.StateHandle{Key: "gone", Size: 3}
	for _, bad := range []checkpoint.StateHandle{flipped, missing} {
		m := &checkpoint.Manifest{ID: 2, Subtasks: []checkpoint.Ack{{Task: task, ID: 2, State: bad}}}
		if d := damage(store, m); d == "" {
			t.Fatalf("a checkpoint referencing %+v: no damage", bad)
		}
	}
}
