package config

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dustin/go-humanize"
)

// TestLimitsProperty loads generated pipeline files, each near one of the
// bounds on a file (limits.go): a string (of a field, a list, a mapping's
// key, or from the environment), a list's or mapping's entries, the
// file's size. At or below the bound the file is valid; above it, Load
// refuses it with the bound's problem at the very line and column that
// crosses it, and with no other. The seed is printed; CAIRN_SEED replays
// one.
func TestLimitsProperty(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CAIRN_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("CAIRN_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	near := func(limit int) int {
		if rng.IntN(2) == 0 {
			return limit - 2 + rng.IntN(5) // at the edge
		}
		return 1 + rng.IntN(limit+limit/10)
	}
	const head = "brokers:\n  b:\n    url: tcp://b:1883\n"
	dir := t.TempDir()
	for i := range 60 {
		var text, want string
		var at Pos
		switch kind := rng.IntN(6); kind {
		case 0, 1, 2: // a string, as a field, a list item or a key
			n := near(maxStringBytes)
			long := strings.Repeat("a", n)
			var before string
			switch kind {
			case 0:
				before = head + "    client_id: "
				text = before + long + "\nsources:\n  - {id: s, broker: b, topics: [x]}\n"
			case 1:
				before = head + "sources:\n  - id: s\n    broker: b\n    topics:\n      - x\n      - "
				text = before + long + "\n"
			case 2:
				// YAML takes a key of over 1,024 characters only so.
				before = "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n    fields:\n      ? "
				text = before + long + "\n      : number\n"
			}
			at = Pos{strings.Count(before, "\n") + 1, len(before) - strings.LastIndex(before, "\n")}
			if n > maxStringBytes {
				want = fmt.Sprintf("a string of %s bytes, more than 65,535", humanize.Comma(int64(n)))
			}
		case 3: // a string from the environment
			n := near(maxStringBytes)
			t.Setenv("CAIRN_LONG", strings.Repeat("p", n))
			text = head + "    username: u\n    password: ${CAIRN_LONG}\nsources:\n  - {id: s, broker: b, topics: [x]}\n"
			at = Pos{5, 15}
			if n > maxStringBytes {
				want = fmt.Sprintf("a string of %s bytes, more than 65,535", humanize.Comma(int64(n)))
			}
		case 4: // a list's entries
			n := near(maxEntries)
			var b strings.Builder
			b.WriteString(head + "sources:\n  - id: s\n    broker: b\n    topics:\n")
			for j := range n {
				fmt.Fprintf(&b, "      - t/%d\n", j)
			}
			text = b.String()
			at = Pos{7 + maxEntries + 1, 9}
			if n > maxEntries {
				want = fmt.Sprintf("a list of %s entries, more than 10,000", humanize.Comma(int64(n)))
			}
		case 5: // the file's size
			n := near(MaxFileBytes)
			const valid = "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"
			pad := max(n-len(valid), 0)
			lines := strings.Repeat("#"+strings.Repeat("x", 99)+"\n", pad/101)
			text = valid + lines + "#" + strings.Repeat("x", max(pad%101-1, 0))
			if len(text) > MaxFileBytes {
				before := text[:MaxFileBytes]
				at = Pos{strings.Count(before, "\n") + 1, MaxFileBytes - strings.LastIndex(before, "\n")}
				want = "the file goes on beyond 262,144 bytes (256 KiB)"
			}
		}
		file := filepath.Join(dir, fmt.Sprintf("p%d.yaml", i))
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(file)
		switch {
		case want == "" && err != nil:
			t.Fatalf("file %d (%d bytes) is within the bounds, yet: %.500v", i, len(text), err)
		case want == "":
		case err == nil:
			t.Fatalf("file %d: valid, want %q at %d:%d", i, want, at.Line, at.Col)
		default:
			es, ok := err.(Errors)
			if !ok || len(es) != 1 || es[0].Pos != at || !strings.HasPrefix(es[0].Msg, want) {
				t.Fatalf("file %d: %.1000v\nwant only %q at %d:%d", i, err, want, at.Line, at.Col)
			}
		}
	}
}

// TestAliasesBounded: aliases that repeat a list many times (10,000
// sources, each an alias of one whose topics are an alias of 10,000: 10^8
// values in 50 KB) stop at maxValues, with one problem at the alias that
// crossed it, in about the time that reading as many values written
// out takes (ten lists of 10,000, 200 KB), where reading every value
// would take a thousand times longer; so do ${VAR}s that repeat a long
// value, at maxScalarBytes.
func TestAliasesBounded(t *testing.T) {
	var b, plain strings.Builder
	list := "[" + strings.Repeat("a,", 9_999) + "a]"
	b.WriteString("brokers:\n  b: {url: 'tcp://b:1883'}\nx: &t " + list + "\n")
	plain.WriteString(b.String())
	b.WriteString("sources:\n  - &s {id: s, broker: b, topics: *t}\n" + strings.Repeat("  - *s\n", 9_999))
	plain.WriteString("sources:\n" + strings.Repeat("  - {id: s, broker: b, topics: "+list+"}\n", 9))
	if plain.Len() > MaxFileBytes {
		t.Fatalf("the file without aliases holds %d bytes", plain.Len())
	}
	start := time.Now()
	Parse("x.yaml", []byte(plain.String()), env(nil))
	without := time.Since(start)
	start = time.Now()
	_, errs := Parse("x.yaml", []byte(b.String()), env(nil))
	with := time.Since(start)
	if !strings.Contains(errs.Error(), "the file holds more than 100,000 values (each alias, *name, counted as what it repeats)") {
		t.Fatalf("aliases of 10^8 values: %.2000v", errs)
	}
	if with > 20*without+time.Second {
		t.Fatalf("aliases of 10^8 values took %v, the file without aliases %v: more than 20 times as long", with, without)
	}
	t.Logf("aliases of 10^8 values: %v; the file without aliases: %v", with, without)
	var many strings.Builder
	many.WriteString("agent:\n  log_level: debug\nsources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n    fields:\n")
	for i := range 40 {
		fmt.Fprintf(&many, "      f%d: \"${V}\"\n", i)
	}
	_, errs = Parse("x.yaml", []byte(many.String()), env(map[string]string{"V": strings.Repeat("v", 60_000)}))
	if want := "the file's values hold more than 1,048,576 bytes (1.0 MiB) with each alias (*name) counted as what it repeats and each ${VAR} substituted"; !strings.Contains(errs.Error(), want) {
		t.Fatalf("40 values of 60,000 bytes from the environment: %.2000v\nwant %q", errs, want)
	}
}

// TestReadSecret: the agent reads a secret file only its owner may read,
// of 64 KiB at most, and says which file and why it refuses one, without
// what it holds.
func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pw")
	for _, c := range []struct {
		mode os.FileMode
		size int
		want string
	}{
		{0o600, 20, ""},
		{0o400, maxSecretBytes, ""},
		{0o640, 20, path + " may be read by its group or by other users (mode -rw-r-----): chmod go-r it"},
		{0o604, 20, path + " may be read by its group or by other users (mode -rw----r--): chmod go-r it"},
		{0o600, maxSecretBytes + 1, path + " holds more than 64 KiB, more than any secret"},
	} {
		os.Remove(path)
		secret := strings.Repeat("s", c.size)
		if err := os.WriteFile(path, []byte(secret), c.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(path, c.mode)
		b, err := ReadSecret(path)
		switch {
		case c.want == "" && (err != nil || string(b) != secret):
			t.Errorf("mode %v, %d bytes: %v", c.mode, c.size, err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("mode %v, %d bytes: %v, want %q", c.mode, c.size, err, c.want)
		}
	}
}
