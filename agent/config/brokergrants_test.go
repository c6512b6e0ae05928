package config

import (
	"strings"
	"testing"
)

// TestBrokerGrants checks the grants of an embedded broker's users and
// anonymous clients: filters with %u and %c are taken, and each refusal
// is at the character it is about; anonymous clients are not let in by
// default once users are listed.
func TestBrokerGrants(t *testing.T) {
	const pipeline = "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"
	const users = "brokers:\n  l:\n    embedded: true\n    users:\n      - username: dev-a\n        password: pw\n"
	good := map[string]bool{ // the file, and whether it lets in anonymous clients
		users + "        publish: ['sensors/%u/#', '+/%c']\n        subscribe: []\n":              false,
		users + "    allow_anonymous: true\n    anonymous: {subscribe: ['public/#', 'cmd/%c']}\n": true,
		"brokers:\n  l:\n    embedded: true\n    anonymous: {publish: ['$SYS/x']}\n":              true,
	}
	for src, anonymous := range good {
		c, errs := Parse("a.yaml", []byte(src+pipeline), env(nil))
		if len(errs) > 0 {
			t.Errorf("%s: %v", src, errs)
			continue
		}
		if got := c.Brokers["l"].AnonymousAllowed(); got != anonymous {
			t.Errorf("%s: anonymous clients let in: %v", src, got)
		}
	}
	c, _ := Parse("a.yaml", []byte(users+"        publish: []\n"+pipeline), env(nil))
	if g := c.Brokers["l"].Users[0].MQTT(); g.Publish == nil || g.Subscribe != nil {
		t.Errorf("publish: [] and no subscribe made %#v: want none and all", g)
	}
	for src, want := range map[string]string{
		users + "        publish: ['sensors/dev-%u/#']\n":                       `a.yaml:7:32: broker "l": user "dev-a": publish "sensors/dev-%u/#" is no topic filter to grant: %u and %c stand for a whole level only`,
		users + "        subscribe: [a/b, 'a/#/b']\n":                           `a.yaml:7:29: broker "l": user "dev-a": subscribe "a/#/b" is no topic filter to grant: # must be the last level`,
		users + "        subscribe:\n          - x+/y\n":                        `a.yaml:8:14: broker "l": user "dev-a": subscribe "x+/y" is no topic filter to grant: a wildcard must be a whole level`,
		users + "        publish: ['']\n":                                       `a.yaml:7:19: broker "l": user "dev-a": publish "" is no topic filter to grant: is empty`,
		users + "    allow_anonymous: true\n    anonymous: {publish: [s/%u]}\n": `a.yaml:8:27: broker "l": anonymous: publish "s/%u" holds %u, and anonymous clients have no user name`,
		users + "    anonymous: {publish: [s/x]}\n":                             `a.yaml:7:16: broker "l": anonymous: grants for clients it does not let in: say allow_anonymous: true`,
	} {
		_, errs := Parse("a.yaml", []byte(src+pipeline), env(nil))
		if !strings.Contains(errs.Error(), want) {
			t.Errorf("%s\ngave %v\nwant %s", src, errs, want)
		}
	}
}
