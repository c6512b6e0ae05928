package mqttio

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A topic that a broker does not take to publish to costs more than one
// message: mosquitto and mochi drop the connection of a client that sends
// one (a protocol error), and paho sends the same publish again after
// every reconnection, so nothing the client publishes after it arrives.
// CheckTopic is the one place that says which topics those are; a sink
// checks every topic it renders before it stages the message, and the
// validator every topic a pipeline file names.

const (
	// MaxTopicBytes is the longest topic MQTT can carry: its length is a
	// 16-bit number. paho cuts a longer one there, even inside a
	// character.
	MaxTopicBytes = 65535
	// MaxTopicLevels is the most levels mosquitto takes in a topic
	// (since 1.6.8 it refuses one with more than 200 "/"; no setting
	// changes that).
	MaxTopicLevels = 201
)

// TopicError says why a topic is none to publish to. At is the byte
// offset in Topic of the character at fault; -1 when no one character is.
type TopicError struct {
	Topic  string
	At     int
	Reason string // "contains the wildcard #", ...
}

func (e *TopicError) Error() string {
	return fmt.Sprintf("topic %s is not a valid MQTT topic: %s", QuoteTopic(e.Topic), e.Reason)
}

// CheckTopic returns a *TopicError if topic is not one a client may
// publish to (MQTT 3.1.1 section 4.7 and what brokers enforce): one
// character or more, 65,535 bytes at most, UTF-8 without NUL, without the
// wildcards + and #, without control characters (U+0001–U+001F,
// U+007F–U+009F) and noncharacters (U+FDD0–U+FDEF, U+xFFFE, U+xFFFF),
// which mosquitto refuses as malformed UTF-8, and MaxTopicLevels levels at
// most. A topic beginning with $ passes: brokers give such topics meanings
// of their own ($aws/..., $iothub/...), and some take publishes to them.
func CheckTopic(topic string) error {
	if at, reason := BadTopicChar(topic); at >= 0 {
		return &TopicError{Topic: topic, At: at, Reason: reason}
	}
	return CheckTopicSize(topic)
}

// CheckTopicSize returns a *TopicError if topic is empty, over
// MaxTopicBytes or over MaxTopicLevels levels: the checks of CheckTopic
// that are not of characters, for a topic or a topic filter whose
// characters are checked apart (BadTopicChar).
func CheckTopicSize(topic string) error {
	return checkSize(topic, len(topic), strings.Count(topic, "/"), false)
}

// CheckTopicTemplate returns a *TopicError if template, a sink's topic in
// which "{key}" stands for a record's key, makes no valid topic whatever
// the key: a character CheckTopic refuses, or too long or too deep even
// for an empty key without "/". Whether the topic of a given key is valid
// is known only once the key is.
func CheckTopicTemplate(template string) error {
	if at, reason := BadTopicChar(template); at >= 0 {
		return &TopicError{Topic: template, At: at, Reason: reason}
	}
	if template == "" {
		return &TopicError{Topic: template, At: -1, Reason: "is empty"}
	}
	keys := strings.Count(template, keyPlaceholder)
	return checkSize(template, len(template)-keys*len(keyPlaceholder), strings.Count(template, "/"), keys > 0)
}

// checkSize checks the size of topic: bytes long, with slashes "/";
// keyed says keys are still to be put in it, which may fill an empty one.
func checkSize(topic string, bytes, slashes int, keyed bool) error {
	switch {
	case bytes == 0 && !keyed:
		return &TopicError{Topic: topic, At: -1, Reason: "is empty"}
	case bytes > MaxTopicBytes:
		return &TopicError{Topic: topic, At: -1, Reason: fmt.Sprintf("is %d bytes, over MQTT's limit of %d", bytes, MaxTopicBytes)}
	case slashes >= MaxTopicLevels:
		return &TopicError{Topic: topic, At: -1, Reason: fmt.Sprintf("has %d levels, over mosquitto's limit of %d", slashes+1, MaxTopicLevels)}
	}
	return nil
}

// BadTopicChar returns the byte offset in s of the first character no
// topic may hold, and why: what CheckTopic refuses of characters (a byte
// that is not UTF-8, the wildcards + and #, NUL, a control character, a
// noncharacter); -1 and "" if there is none. A topic filter, whose
// wildcards are whole levels, is checked a level at a time.
func BadTopicChar(s string) (at int, reason string) {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '+' && c != '#' {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return i, fmt.Sprintf("is not UTF-8 (byte 0x%02X)", c)
		case r == '+' || r == '#':
			return i, "contains the wildcard " + string(r)
		case r == 0:
			return i, "contains NUL (U+0000)"
		case r < 0x20 || r >= 0x7f && r <= 0x9f:
			return i, fmt.Sprintf("contains the control character U+%04X", r)
		case r >= 0xfdd0 && r <= 0xfdef || r&0xfffe == 0xfffe:
			return i, fmt.Sprintf("contains the noncharacter U+%04X", r)
		}
		i += size
	}
	return -1, ""
}

// QuoteTopic quotes topic for a message, cut after 100 bytes.
func QuoteTopic(topic string) string {
	const show = 100
	if len(topic) <= show {
		return strconv.Quote(topic)
	}
	cut := show
	for cut > show-utf8.UTFMax && !utf8.RuneStart(topic[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(topic[:cut]), len(topic))
}

// keyPlaceholder stands for a record's key in a sink's topic.
const keyPlaceholder = "{key}"

// TopicTemplate is a sink's topic, in which "{key}" stands for a
// record's key, split at the placeholders, and what checking the topic
// of a key needs to know of its parts. Made by NewTopicTemplate (the
// zero value is none); safe for concurrent use.
type TopicTemplate struct {
	parts   []string
	bytes   int   // of the parts
	slashes int   // in the parts
	err     error // CheckTopicTemplate's
}

// NewTopicTemplate returns the TopicTemplate of template, valid or not
// (CheckTopicTemplate says which).
func NewTopicTemplate(template string) TopicTemplate {
	return TopicTemplate{parts: strings.Split(template, keyPlaceholder), bytes: len(template) - strings.Count(template, keyPlaceholder)*len(keyPlaceholder),
		slashes: strings.Count(template, "/"), err: CheckTopicTemplate(template)}
}

// render returns the topic of key.
func (t *TopicTemplate) render(key string) string { return strings.Join(t.parts, key) }

// Makes reports whether topic is the topic of some key (any string: of
// any number of levels, or none), without making one; of a template
// without a placeholder, whether topic is the template. The key is the
// text at the first placeholder, as long as the topic's bytes beyond
// the parts' make it, once for each placeholder.
func (t *TopicTemplate) Makes(topic string) bool {
	n := len(t.parts) - 1
	if n == 0 {
		return topic == t.parts[0]
	}
	extra := len(topic) - t.bytes
	if extra < 0 || extra%n != 0 {
		return false
	}
	first := len(t.parts[0])
	key, rest := topic[first:first+extra/n], topic
	for i, part := range t.parts {
		if !strings.HasPrefix(rest, part) {
			return false
		}
		rest = rest[len(part):]
		if i < n {
			if !strings.HasPrefix(rest, key) {
				return false
			}
			rest = rest[len(key):]
		}
	}
	return rest == ""
}

// check is CheckTopic of the topic of key, without making the topic
// unless it is invalid: the parts of a valid template are valid UTF-8
// without a character CheckTopic refuses, so the topic is valid when the
// key has none either and the sizes add up.
func (t *TopicTemplate) check(key string) error {
	if t.err == nil {
		n := len(t.parts) - 1
		if n == 0 {
			return nil
		}
		if at, _ := BadTopicChar(key); at < 0 && checkSize("", t.bytes+n*len(key), t.slashes+n*strings.Count(key, "/"), false) == nil {
			return nil
		}
	}
	return CheckTopic(t.render(key))
}
