package agent

import (
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/agent/config"
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
	const r = "remote:\n  endpoint: s3:9000\n  bucket: b\n  access_key: a\n  secret_key: s\n"
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

// Moving an embedded broker's users in the file is no change; changing
// one is.
func TestReloadComparesBrokerUsers(t *testing.T) {
	parse := func(text string) *config.Config {
		c, errs := config.Parse("p.yaml", []byte(text), func(string) (string, bool) { return "", false })
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return c
	}
	const src = "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"
	const b = "brokers:\n  l:\n    embedded: true\n    users:\n      - {username: d, password: p}\n"
	base := parse(b + src)
	if got := unappliable(base, parse("# moved\n\n"+b+src)); got != "" {
		t.Errorf("users moved: %q", got)
	}
	if got := unappliable(base, parse(strings.Replace(b, "p}", "q}", 1)+src)); got != "brokers" {
		t.Errorf("a password changed: %q, want brokers", got)
	}
}
