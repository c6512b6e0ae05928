package mqttio

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCheckTopic(t *testing.T) {
	for _, c := range []struct {
		name, topic string
		at          int    // -2: valid
		reason      string // a part of it
	}{
		{"plain", "out/d1/count", -2, ""},
		{"one character", "a", -2, ""},
		{"empty levels", "/", -2, ""},
		{"a space", "out/a b", -2, ""},
		{"non-ASCII", "out/ünï/€/𝄞", -2, ""},
		{"no-break space", "out/\u00a0", -2, ""},
		{"beside the noncharacters", "\ufdcf\ufdf0\ufffd", -2, ""},
		{"$ first", "$aws/things/t/shadow/update", -2, ""},
		{"65,535 bytes", strings.Repeat("a", 65535), -2, ""},
		{"201 levels", strings.Repeat("/", 200), -2, ""},
		{"201 named levels", strings.Repeat("l/", 200) + "l", -2, ""},

		{"empty", "", -1, "is empty"},
		{"#", "out/a#b/count", 5, "contains the wildcard #"},
		{"# level", "out/#", 4, "contains the wildcard #"},
		{"+", "out/+/count", 4, "contains the wildcard +"},
		{"a number in exponent form", "out/1e+21/count", 6, "contains the wildcard +"},
		{"NUL", "out/a\x00b", 5, "contains NUL (U+0000)"},
		{"tab", "out/a\tb", 5, "contains the control character U+0009"},
		{"U+001F", "\x1f", 0, "control character U+001F"},
		{"DEL", "out/\x7f", 4, "control character U+007F"},
		{"U+0080", "out/\u0080", 4, "control character U+0080"},
		{"U+009F", "out/é\u009f", 6, "control character U+009F"},
		{"U+FDD0", "out/\ufdd0", 4, "noncharacter U+FDD0"},
		{"U+FDEF", "out/\ufdef", 4, "noncharacter U+FDEF"},
		{"U+FFFE", "out/\ufffe", 4, "noncharacter U+FFFE"},
		{"U+FFFF", "out/\uffff", 4, "noncharacter U+FFFF"},
		{"U+1FFFE", "out/\U0001fffe", 4, "noncharacter U+1FFFE"},
		{"U+10FFFF", "out/\U0010ffff", 4, "noncharacter U+10FFFF"},
		{"not UTF-8", "out/a\xffb", 5, "is not UTF-8 (byte 0xFF)"},
		{"a surrogate", "out/\xed\xa0\x80", 4, "is not UTF-8"},
		{"overlong", "out/\xc0\x80", 4, "is not UTF-8"},
		{"a character cut", "out/\xe2\x82", 4, "is not UTF-8"},
		{"65,536 bytes", strings.Repeat("a", 65536), -1, "is 65536 bytes, over MQTT's limit of 65535"},
		// paho would cut it after 65,535 bytes, in the middle of the €.
		{"a 3-byte character across the limit", strings.Repeat("a", 65534) + "€", -1, "is 65537 bytes"},
		{"202 levels", strings.Repeat("/", 201), -1, "has 202 levels, over mosquitto's limit of 201"},
	} {
		err := CheckTopic(c.topic)
		if c.at == -2 {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var te *TopicError
		if !errors.As(err, &te) || te.At != c.at || !strings.Contains(te.Reason, c.reason) || te.Topic != c.topic {
			t.Errorf("%s: %v (%#v); want an error at %d: %s", c.name, err, te, c.at, c.reason)
		}
	}
	if got, want := CheckTopic("out/a#b/count").Error(), `topic "out/a#b/count" is not a valid MQTT topic: contains the wildcard #`; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
	long := strings.Repeat("€", 30000)
	if got, want := CheckTopic(long).Error(), `topic "`+strings.Repeat("€", 33)+`"... (90000 bytes) is not a valid MQTT topic: is 90000 bytes, over MQTT's limit of 65535`; got != want {
		t.Errorf("error %q, want %q: the topic cut between characters", got, want)
	}
}

func TestCheckTopicTemplate(t *testing.T) {
	for _, c := range []struct {
		template string
		at       int // -2: valid
	}{
		{"out/{key}/count", -2},
		{"{key}", -2},
		{"{key}/{key}", -2},
		{"fixed", -2},
		{"out/{device}", -2}, // not a placeholder: braces are characters
		{strings.Repeat("a", 65530) + "{key}", -2},
		{strings.Repeat("/", 200) + "{key}", -2},
		{"", -1},
		{"out/#/{key}", 4},
		{"out/{key}+", 9},
		{"out/\x00/{key}", 4},
		{strings.Repeat("a", 65536) + "{key}", -1},
		{strings.Repeat("/", 201) + "{key}", -1},
	} {
		err := CheckTopicTemplate(c.template)
		var te *TopicError
		switch {
		case c.at == -2 && err != nil:
			t.Errorf("%.40q: %v", c.template, err)
		case c.at != -2 && (!errors.As(err, &te) || te.At != c.at):
			t.Errorf("%.40q: %v; want an error at %d", c.template, err, c.at)
		}
	}
}

// TestTopicTemplateCheck: the sink's check of a key's topic, which makes
// no topic when it needs not, agrees with CheckTopic of the topic.
func TestTopicTemplateCheck(t *testing.T) {
	pieces := []string{"a", "/", "é", "€", "#", "+", "\x00", "\x01", "\u0085", "\ufffe", "\xff", "\xe2\x82", "{key}", "$"}
	templates := []string{"out/{key}/count", "{key}", "{key}/{key}", "fixed", "a/{key}", "out/#/{key}", "", "\xe2{key}"}
	rng := rand.New(rand.NewPCG(7, 11))
	for range 20000 {
		var key strings.Builder
		for range rng.IntN(6) {
			key.WriteString(pieces[rng.IntN(len(pieces))])
		}
		switch rng.IntN(10) { // near the limits
		case 0:
			key.WriteString(strings.Repeat("a", 65535-15+rng.IntN(20)))
		case 1:
			key.WriteString(strings.Repeat("/", 195+rng.IntN(10)))
		}
		tmpl := templates[rng.IntN(len(templates))]
		tt := NewTopicTemplate(tmpl)
		topic := strings.ReplaceAll(tmpl, "{key}", key.String())
		got, want := tt.check(key.String()), CheckTopic(topic)
		if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
			t.Fatalf("template %.40q, key %.40q: check says %v, CheckTopic %v", tmpl, key.String(), got, want)
		}
	}
}

// TestTopicTemplateMakes checks Makes against every key a topic could
// hold, for generated templates and topics.
func TestTopicTemplateMakes(t *testing.T) {
	pieces := []string{"{key}", "a", "/", "b/", "{key}/", "x{key}"}
	alphabet := []string{"a", "b", "/", "x", "ab/"}
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 3))
		var tmpl, topic strings.Builder
		for range 1 + rng.IntN(4) {
			tmpl.WriteString(pieces[rng.IntN(len(pieces))])
		}
		tt := NewTopicTemplate(tmpl.String())
		if rng.IntN(2) == 0 {
			var key strings.Builder
			for range rng.IntN(4) {
				key.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			topic.WriteString(tt.render(key.String()))
		} else {
			for range rng.IntN(8) {
				topic.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
		}
		s := topic.String()
		want := false
		for i := 0; i <= len(s) && !want; i++ {
			for j := i; j <= len(s) && !want; j++ {
				want = tt.render(s[i:j]) == s
			}
		}
		if got := tt.Makes(s); got != want {
			t.Fatalf("seed %d: template %q makes %q: %v, want %v", seed, tmpl.String(), s, got, want)
		}
	}
}
