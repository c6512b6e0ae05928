package broker

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/cairn-edge/cairn/internal/testing/mqttraw"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/mqttio"
)

// modelMatch is MQTT 3.1.1's matching of a topic by a filter (section
// 4.7), as plainly as it is written: + is any one level, # any levels
// below and the parent, and a topic that begins with $ is matched by no
// filter that begins with a wildcard.
func modelMatch(filter, topic string) bool {
	f, t := strings.Split(filter, "/"), strings.Split(topic, "/")
	if strings.HasPrefix(topic, "$") && (f[0] == "+" || f[0] == "#") {
		return false
	}
	var match func(f, t []string) bool
	match = func(f, t []string) bool {
		switch {
		case len(f) == 0:
			return len(t) == 0
		case f[0] == "#":
			return true
		case len(t) == 0:
			return false
		case f[0] == "+" || f[0] == t[0]:
			return match(f[1:], t[1:])
		}
		return false
	}
	return match(f, t)
}

// modelSubstitute is grant with %u and %c put in as mosquitto does, or
// false if the user name or client id would widen it (or there is none).
func modelSubstitute(grant, user, client string) (string, bool) {
	levels := strings.Split(grant, "/")
	for i, l := range levels {
		v := map[string]string{"%u": user, "%c": client}[l]
		if l != "%u" && l != "%c" {
			continue
		}
		if v == "" || strings.ContainsAny(v, "+#/") {
			return "", false
		}
		levels[i] = v
	}
	return strings.Join(levels, "/"), true
}

// modelCovers reports whether grant, substituted, matches every topic
// filter matches among all the topics of up to depth levels made of
// words: filter and grant have fewer levels than depth, and words hold
// every literal level of either and one more, so a topic that tells
// them apart is among them.
func modelCovers(grant, filter string, words []string, depth int) bool {
	var topics func(prefix string, n int) bool
	topics = func(prefix string, n int) bool {
		if n > 0 && modelMatch(filter, prefix) && !modelMatch(grant, prefix) {
			return false
		}
		if n == depth {
			return true
		}
		for _, w := range words {
			next := w
			if n > 0 {
				next = prefix + "/" + w
			}
			if !topics(next, n+1) {
				return false
			}
		}
		return true
	}
	return topics("", 0)
}

// TestGrantsFollowTheModel checks brokerACL's matching of generated
// filters (to subscribe to) and topic names (to publish to, and to read)
// by generated grants, of users and client ids that may hold wildcards
// and slashes, against modelMatch over every topic that could tell them
// apart.
func TestGrantsFollowTheModel(t *testing.T) {
	grantLevels := []string{"a", "b", "$s", "", "+", "+", "#", "%u", "%c"}
	filterLevels := []string{"a", "b", "$s", "", "+", "#", "dev", "gw1"}
	names := []string{"dev", "gw1", "a", "$s", "d+", "d#", "d/e", ""}
	randomFilter := func(rng *rand.Rand, levels []string, wild bool) string {
		n := 1 + rng.IntN(3)
		var out []string
		for i := range n {
			l := levels[rng.IntN(len(levels))]
			for !wild && (l == "+" || l == "#") || l == "#" && i < n-1 {
				l = levels[rng.IntN(len(levels))]
			}
			out = append(out, l)
		}
		if f := strings.Join(out, "/"); f != "" { // no filter
			return f
		}
		return "a"
	}
	for seed := range uint64(3000) {
		rng := rand.New(rand.NewPCG(seed, 38))
		grants := []string{} // none granted, not all
		for range rng.IntN(3) {
			grants = append(grants, randomFilter(rng, grantLevels, true))
		}
		user, client := names[rng.IntN(len(names))], names[1+rng.IntN(len(names)-2)]
		for _, g := range grants {
			if err := CheckGrant(g); err != nil {
				t.Fatalf("seed %d: grant %q refused: %v", seed, g, err)
			}
		}
		acl := newBrokerACL(Config{Grants: map[string]Grants{user: {Publish: grants, Subscribe: grants}}})
		ac := acl.of([]byte(user))
		if user == "" {
			acl = newBrokerACL(Config{AnonymousGrants: Grants{Publish: grants, Subscribe: grants}})
			ac = acl.anonymous
		}
		filter := randomFilter(rng, filterLevels, rng.IntN(3) > 0)
		words := []string{"zz", "$zz"}
		for _, s := range append(strings.Split(filter, "/"), strings.Split(strings.Join(grants, "/"), "/")...) {
			if !slices.Contains(words, s) && s != "+" && s != "#" && s != "%u" && s != "%c" {
				words = append(words, s)
			}
		}
		words = append(words, user, client)
		want := false
		for _, g := range grants {
			if sub, ok := modelSubstitute(g, user, client); ok && modelCovers(sub, filter, words, 4) {
				want = true
			}
		}
		if got := acl.maySubscribe(ac, client, filter); got != want {
			t.Fatalf("seed %d: user %q client %q grants %q: filter %q granted %v, the model says %v", seed, user, client, grants, filter, got, want)
		}
		if strings.ContainsAny(filter, "+#") {
			continue
		}
		// A topic name: what matches it.
		want = false
		for _, g := range grants {
			if sub, ok := modelSubstitute(g, user, client); ok && modelMatch(sub, filter) {
				want = true
			}
		}
		if got, agents := acl.mayPublish(ac, client, filter); got != want || agents {
			t.Fatalf("seed %d: user %q client %q grants %q: publish to %q granted %v, the model says %v", seed, user, client, grants, filter, got, want)
		}
	}
}

// TestGrantsOfWhom checks whose grants apply: a user's own, the
// anonymous clients', or every topic for a user without; and that only
// the agent's clients publish to its topics, whatever is granted.
func TestGrantsOfWhom(t *testing.T) {
	acl := newBrokerACL(Config{
		Grants:          map[string]Grants{"dev-a": {Publish: []string{"sensors/%u/#"}, Subscribe: []string{"setpoints/%u/#", "cmd/%c"}}, "dash": {Publish: []string{}}},
		AnonymousGrants: Grants{Subscribe: []string{"public/#"}},
		AgentTopics:     []string{"out/cnt/{key}", "gw/status", "gw/status/json"},
	})
	for _, c := range []struct {
		user, client, topic string
		publish, subscribe  bool
	}{
		{"dev-a", "c1", "sensors/dev-a/t", true, false},
		{"dev-a", "c1", "sensors/dev-b/t", false, false},
		{"dev-a", "c1", "setpoints/dev-a/x", false, true},
		{"dev-a", "c1", "cmd/c1", false, true},
		{"dev-a", "c/1", "cmd/c/1", false, false},
		{"dash", "d", "sensors/x", false, true},
		{"other", "o", "anything/at/all", true, true},
		{"other", "o", "out/cnt/dev1", false, true},
		{"other", "o", "out/cnt/a/b", false, true},
		{"other", "o", "out/cnt/", false, true},
		{"other", "o", "out/cnt", true, true},
		{"other", "o", "gw/status", false, true},
		{"other", "o", "$SYS/broker/uptime", true, true},
		{"", "anon", "public/news", true, true},
		{"", "anon", "private", true, false},
		{"", "anon", "$SYS/broker/uptime", true, false},
	} {
		ac := acl.of([]byte(c.user))
		if ok, _ := acl.mayPublish(ac, c.client, c.topic); ok != c.publish {
			t.Errorf("%q as %q: publish to %q: %v, want %v", c.client, c.user, c.topic, ok, c.publish)
		}
		if ok := acl.maySubscribe(ac, c.client, c.topic); ok != c.subscribe {
			t.Errorf("%q as %q: subscribe to %q: %v, want %v", c.client, c.user, c.topic, ok, c.subscribe)
		}
	}
	ac := acl.of([]byte("dev-a"))
	if !acl.maySubscribe(ac, "c1", "$share/g/setpoints/dev-a/+") || acl.maySubscribe(ac, "c1", "$share/g/setpoints/#") {
		t.Error("a shared subscription is not judged by its filter")
	}
}

// TestCheckGrant checks what CheckGrant refuses, and where.
func TestCheckGrant(t *testing.T) {
	for _, c := range []struct {
		pattern string
		at      int
		reason  string
	}{
		{"sensors/%u/#", -2, ""},
		{"cmd/%c", -2, ""},
		{"+/+/%u", -2, ""},
		{"$SYS/#", -2, ""},
		{"", -1, "is empty"},
		{"a/#/b", 2, "# must be the last level"},
		{"a/b#", 3, "a wildcard must be a whole level"},
		{"a+/b", 1, "a wildcard must be a whole level"},
		{"dev-%u/x", 4, "%u and %c stand for a whole level only"},
		{"a/%c%u", 2, "%u and %c stand for a whole level only"},
		{"a/\x00", 2, "contains NUL (U+0000)"},
		{strings.Repeat("a/", 201) + "a", -1, "has 202 levels, over mosquitto's limit of 201"},
	} {
		err := CheckGrant(c.pattern)
		if c.at == -2 {
			if err != nil {
				t.Errorf("%q: %v", c.pattern, err)
			}
			continue
		}
		te, ok := err.(*mqttio.TopicError)
		if !ok || te.At != c.at || te.Reason != c.reason {
			t.Errorf("%q: %v, want at %d: %s", c.pattern, err, c.at, c.reason)
		}
	}
}

// BenchmarkGrantPublish is the cost of deciding a publish of a user with
// 10 grants, to a topic the tenth grants, with 3 topics of the agent's.
func BenchmarkGrantPublish(b *testing.B) {
	var grants []string
	for i := range 9 {
		grants = append(grants, fmt.Sprintf("site/%d/%%u/+/#", i))
	}
	grants = append(grants, "sensors/%u/#")
	acl := newBrokerACL(Config{Grants: map[string]Grants{"dev-a": {Publish: grants}},
		AgentTopics: []string{"out/cnt/{key}", "gw/status", "gw/status/json"}})
	user := []byte("dev-a")
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := acl.mayPublish(acl.of(user), "dev-a-1", "sensors/dev-a/temperature/3"); !ok {
			b.Fatal("refused")
		}
	}
}

// TestSessionOfAnotherUserIsRefused: a CONNECT under the client id of a
// session another user holds, offline with a message it may not read or
// connected, is refused "not authorized" (3.1.1: 5; MQTT 5: 0x87),
// whether it asks for the session or a clean one, named or anonymous:
// it is sent nothing the session held, and ends no connection; the
// session's own user, back, is sent its message.
func TestSessionOfAnotherUserIsRefused(t *testing.T) {
	b, err := Start(Config{Addr: "127.0.0.1:0", Users: map[string]string{"a": "pa", "b": "pb", "pub": "pp"}, AllowAnonymous: true,
		Grants: map[string]Grants{"a": {Subscribe: []string{"a/#"}}, "b": {Subscribe: []string{"b/#"}}}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addr := strings.TrimPrefix(b.URL(), "tcp://")
	dial := func() *mqttraw.Conn {
		t.Helper()
		c, err := mqttraw.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		return c
	}
	connect := func(s mqttraw.Session) *mqttraw.Conn {
		t.Helper()
		c := dial()
		if code, err := c.Connect(s); err != nil || code != 0 {
			t.Fatalf("%s as %q: CONNACK %d, %v", s.ID, s.User, code, err)
		}
		return c
	}
	// refused tries to take the session "shared" as each of the others,
	// and fails t unless each is refused and sent nothing else.
	refused := func(when string) {
		t.Helper()
		for _, s := range []mqttraw.Session{
			{ID: "shared", User: "b", Password: "pb"},
			{ID: "shared", User: "b", Password: "pb", Clean: true},
			{ID: "shared"},
		} {
			c := dial()
			code, err := c.Connect(s)
			if err != nil || code != packets.Err3NotAuthorized.Code {
				c.SetReadDeadline(time.Now().Add(time.Second))
				pk, _ := c.ReadType(packets.Publish, false)
				t.Fatalf("%s, %q clean=%v: CONNACK %d, %v, want 5; then sent %q", when, s.User, s.Clean, code, err, pk.Payload)
			}
			if pk, err := c.ReadPacket(); err == nil {
				t.Fatalf("%s, %q clean=%v: refused, then sent a %s", when, s.User, s.Clean, packets.PacketNames[pk.FixedHeader.Type])
			}
		}
		// MQTT 5: 0x87. (mqttraw decodes the CONNACK as 3.1.1's, which
		// reads its code and no properties.)
		c := dial()
		if err := c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: 5,
			Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), ClientIdentifier: "shared", UsernameFlag: true, Username: []byte("b"),
				PasswordFlag: true, Password: []byte("pb")}}); err != nil {
			t.Fatal(err)
		}
		if ack, err := c.ReadPacket(); err != nil || ack.FixedHeader.Type != packets.Connack || ack.ReasonCode != packets.ErrNotAuthorized.Code {
			t.Fatalf("%s, MQTT 5: %s %#x, %v; want CONNACK 0x87", when, packets.PacketNames[ack.FixedHeader.Type], ack.ReasonCode, err)
		}
	}

	first := connect(mqttraw.Session{ID: "shared", User: "a", Password: "pa"})
	if codes, err := first.SubscribeAck(1, 1, "a/#"); err != nil || !slices.Equal(codes, []byte{1}) {
		t.Fatalf("a's SUBACK %v, %v", codes, err)
	}
	first.Close()
	awaitOffline(t, b, "shared")
	pub := connect(mqttraw.Session{ID: "pub", User: "pub", Password: "pp", Clean: true})
	if err := pub.Publish(1, "a/1", []byte("a's"), 1, false); err != nil {
		t.Fatal(err)
	}
	if err := pub.Ping(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	refused("offline")
	back := connect(mqttraw.Session{ID: "shared", User: "a", Password: "pa"})
	if pk, err := back.ReadType(packets.Publish, true); err != nil || string(pk.Payload) != "a's" {
		t.Fatalf("a back was sent %q, %v; want its message", pk.Payload, err)
	}
	refused("connected")
	if err := back.Ping(10 * time.Second); err != nil {
		t.Fatalf("a's connection, after the others' CONNECTs: %v", err)
	}
	// Each is counted once its CONNACK is written.
	testwait.For(t, 10*time.Second, "8 CONNECTs counted as refused another user's session", func() bool {
		return b.Refusals()["embedded broker refused a client's CONNECT: a session of another user under its client id"] == 8
	})
}

// TestSessionClaimedAtOnceByTwoUsers: of two users whose CONNECTs under
// one new client id race, at most one is let in; the other is refused,
// whichever comes first, and never takes over the session the first was
// given.
func TestSessionClaimedAtOnceByTwoUsers(t *testing.T) {
	b, err := Start(Config{Addr: "127.0.0.1:0", Users: map[string]string{"a": "pa", "b": "pb"}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addr := strings.TrimPrefix(b.URL(), "tcp://")
	var both int
	for i := range 200 {
		id := fmt.Sprintf("raced-%d", i)
		codes := make([]byte, 2)
		conns := make([]*mqttraw.Conn, 2)
		var wg sync.WaitGroup
		for k, user := range []string{"a", "b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := mqttraw.Dial(addr)
				if err != nil {
					codes[k] = 0xff
					return
				}
				c.SetDeadline(time.Now().Add(30 * time.Second))
				conns[k] = c
				code, err := c.Connect(mqttraw.Session{ID: id, User: user, Password: "p" + user})
				if err != nil {
					code = 0xfe
				}
				codes[k] = code
			}()
		}
		wg.Wait()
		if codes[0] == 0xff || codes[1] == 0xff {
			t.Fatalf("%s: dial failed", id)
		}
		if codes[0] == 0 && codes[1] == 0 {
			both++
		}
		for _, c := range conns {
			c.Close()
		}
	}
	if both > 0 {
		t.Fatalf("in %d of 200 races both users were let in under one client id: the second took the first's session", both)
	}
}

// TestWillToATopicMadeTheAgents: a will let in at its CONNECT, to a topic
// that a reload then makes the agent's (a new sink's), is dropped when
// its client goes, not retained, and counted; one that went before the
// reload was delivered.
func TestWillToATopicMadeTheAgents(t *testing.T) {
	b, err := Start(Config{Addr: "127.0.0.1:0", AllowAnonymous: true, AgentTopics: []string{"out/a"}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addr := strings.TrimPrefix(b.URL(), "tcp://")
	connect := func(s mqttraw.Session) *mqttraw.Conn {
		t.Helper()
		c, err := mqttraw.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if code, err := c.Connect(s); err != nil || code != 0 {
			t.Fatalf("%s: CONNACK %d, %v", s.ID, code, err)
		}
		return c
	}
	watch := connect(mqttraw.Session{ID: "watch", Clean: true})
	if codes, err := watch.SubscribeAck(1, 1, "out/#"); err != nil || !slices.Equal(codes, []byte{1}) {
		t.Fatalf("SUBACK %v, %v", codes, err)
	}
	before := connect(mqttraw.Session{ID: "before", Clean: true, WillTopic: "out/b/1", WillPayload: []byte("gone"), WillRetain: true})
	after := connect(mqttraw.Session{ID: "after", Clean: true, WillTopic: "out/b/2", WillPayload: []byte("gone"), WillRetain: true})
	// gone closes c's connection without a DISCONNECT, and waits until
	// the broker forgot its session: by then it sent c's will, if at all.
	gone := func(c *mqttraw.Conn, id string) {
		t.Helper()
		c.Close()
		testwait.For(t, 10*time.Second, id+"'s session ended", func() bool { _, ok := b.srv.Clients.Get(id); return !ok })
	}
	gone(before, "before")
	b.SetAgentTopics([]string{"out/a", "out/b/{key}"})
	gone(after, "after")
	pub := connect(mqttraw.Session{ID: "pub", Clean: true})
	if err := pub.Publish(1, "out/marker", []byte("marker"), 1, false); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		pk, err := watch.ReadType(packets.Publish, false)
		if err != nil {
			t.Fatalf("the watcher, after %v: %v", got, err)
		}
		watch.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: pk.PacketID})
		if got = append(got, pk.TopicName); pk.TopicName == "out/marker" {
			break
		}
	}
	if !slices.Equal(got, []string{"out/b/1", "out/marker"}) {
		t.Errorf("the watcher read %v; want the will sent before the reload, then the marker", got)
	}
	if _, ok := b.srv.Topics.Retained.Get("out/b/2"); ok {
		t.Error("the will to the agent's topic was retained")
	}
	if n := b.Refusals()["embedded broker dropped a will: a topic only the agent publishes to"]; n != 1 {
		t.Errorf("wills dropped: %d, want 1 (%v)", n, b.Refusals())
	}
}
