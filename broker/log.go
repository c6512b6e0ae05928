package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// brokerLog is the embedded broker's log handler, between mochi and the
// agent's. mochi logs whole packets with some errors, payloads and MQTT 5
// authentication data included: brokerLog keeps only their type. And a
// client that goes away while the broker writes to it — every sink as the
// agent stops — is no warning, nor are quietMessages: such records go
// down to debug, and those without a message get one. mochi's record of
// each publish the ingress holds (a "rejected" one, to mochi) is none.
type brokerLog struct{ slog.Handler }

// heldMessage is mochi's message for a publish a hook rejects, as the
// ingress does each it holds.
const heldMessage = "publish packet rejected"

// quietMessages are mochi's warnings that are no news, each once a
// connection, which a client could have it write as fast as it connects:
// a keepalive of 0 (no keepalive, as MQTT allows) or a few seconds, and
// a packet that ends its connection (logged as clientListener does).
var quietMessages = []string{mqtt.ErrMinimumKeepalive.Error(), "error processing packet"}

func (h brokerLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == heldMessage && r.Level <= slog.LevelDebug && heldByIngress(r) {
		return nil
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	if slices.Contains(quietMessages, r.Message) && out.Level > slog.LevelDebug {
		out.Level = slog.LevelDebug
	}
	r.Attrs(func(a slog.Attr) bool {
		switch v := a.Value.Any().(type) {
		case packets.Packet:
			a.Value = slog.StringValue(packets.PacketNames[v.FixedHeader.Type])
		case *packets.Packet:
			a.Value = slog.StringValue(packets.PacketNames[v.FixedHeader.Type])
		case error:
			if clientGone(v) && out.Level > slog.LevelDebug {
				out.Level = slog.LevelDebug
			}
		}
		out.AddAttrs(a)
		return true
	})
	if out.Message == "" {
		out.Message = "client connection ended"
	}
	if out.Level != r.Level && !h.Handler.Enabled(ctx, out.Level) {
		return nil // went down below the agent's level
	}
	return h.Handler.Handle(ctx, out)
}

// heldByIngress reports whether r names the ingress as its hook.
func heldByIngress(r slog.Record) bool {
	held := false
	r.Attrs(func(a slog.Attr) bool {
		held = a.Key == "hook" && a.Value.String() == ingressID
		return !held
	})
	return held
}

func (h brokerLog) WithAttrs(as []slog.Attr) slog.Handler { return brokerLog{h.Handler.WithAttrs(as)} }
func (h brokerLog) WithGroup(name string) slog.Handler    { return brokerLog{h.Handler.WithGroup(name)} }

// clientGone reports whether err says the client's connection closed.
func clientGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// refusalInterval is the least time between two lines of refusals for
// one address and kind of refusal.
const refusalInterval = time.Minute

// maxRefusalKeys bounds the addresses and kinds refusals keeps counts of
// between two lines: those that come when it is full are counted under
// otherAddresses.
const maxRefusalKeys = 1024

// otherAddresses stands for the addresses refusals has no room for.
const otherAddresses = "other"

// refusals logs what an embedded broker refuses its clients (a failed
// login, a connection over the rate, a filter over a limit, a message
// dropped for a full queue): the first refusal of a kind from an address
// at once, and later ones at most once every refusalInterval, with the
// number of them since the line before. A flood of refused clients so
// costs a few lines a minute, each with the address that sent them. It
// logs the same way what the broker does to its clients of its own
// accord, which is no refusal and not counted as one (tell: an offline
// session ended). Safe for concurrent use.
type refusals struct {
	log      *slog.Logger
	interval time.Duration
	stop     chan struct{}
	done     chan struct{}

	mu     sync.Mutex
	counts map[refusalKey]*refusalCount
	totals map[string]int64 // all refusals, by kind
}

type refusalKey struct {
	addr string // the client's IP address
	what string // the kind of refusal: a message of its own
}

type refusalCount struct {
	level  slog.Level
	n      int         // refusals since the last line
	last   time.Time   // when the last line was written
	detail []slog.Attr // of the newest refusal, for the next line
}

// newRefusals starts the goroutine that writes the counts each interval;
// close stops it.
func newRefusals(log *slog.Logger, interval time.Duration) *refusals {
	r := &refusals{log: log, interval: interval, stop: make(chan struct{}), done: make(chan struct{}),
		counts: make(map[refusalKey]*refusalCount), totals: make(map[string]int64)}
	go r.run()
	return r
}

// note counts n refusals of kind what (the message of its lines, at
// level) for the client at remote (host:port or host), with detail for
// the line (never a password; user names and client ids through
// clientText).
func (r *refusals) note(level slog.Level, remote, what string, n int, detail ...slog.Attr) {
	r.write(level, remote, what, n, true, detail...)
}

// tell logs n events of kind what as note logs refusals, but counts
// them as none.
func (r *refusals) tell(level slog.Level, remote, what string, n int, detail ...slog.Attr) {
	r.write(level, remote, what, n, false, detail...)
}

// write logs n events of kind what as note says, and counts them among
// the refusals if refused.
func (r *refusals) write(level slog.Level, remote, what string, n int, refused bool, detail ...slog.Attr) {
	k := refusalKey{addr: hostOf(remote), what: what}
	now := time.Now()
	r.mu.Lock()
	c := r.counts[k]
	if c == nil {
		if len(r.counts) >= maxRefusalKeys {
			k.addr = otherAddresses
			c = r.counts[k]
		}
		if c == nil {
			c = &refusalCount{level: level}
			r.counts[k] = c
		}
	}
	c.n += n
	c.detail = detail
	if refused {
		r.totals[what] += int64(n)
	}
	var line []slog.Attr
	if c.last.IsZero() || now.Sub(c.last) >= r.interval {
		line = c.takeLocked(k, now)
	}
	r.mu.Unlock()
	if line != nil {
		r.log.LogAttrs(context.Background(), level, what, line...)
	}
}

// takeLocked returns the attributes of a line for c and starts counting
// anew.
func (c *refusalCount) takeLocked(k refusalKey, now time.Time) []slog.Attr {
	line := append([]slog.Attr{slog.String("remote", k.addr), slog.Int("count", c.n)}, c.detail...)
	c.n, c.last = 0, now
	return line
}

// flush writes a line for each count not written for an interval, and
// forgets addresses that were refused nothing since.
func (r *refusals) flush(all bool) {
	now := time.Now()
	var lines []refusalKey
	var levels []slog.Level
	var attrs [][]slog.Attr
	r.mu.Lock()
	for k, c := range r.counts {
		switch {
		case c.n > 0 && (all || now.Sub(c.last) >= r.interval):
			lines, levels, attrs = append(lines, k), append(levels, c.level), append(attrs, c.takeLocked(k, now))
		case c.n == 0 && now.Sub(c.last) >= r.interval:
			delete(r.counts, k)
		}
	}
	r.mu.Unlock()
	for i, k := range lines {
		r.log.LogAttrs(context.Background(), levels[i], k.what, attrs[i]...)
	}
}

func (r *refusals) run() {
	defer close(r.done)
	t := time.NewTicker(r.interval / 4)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.flush(false)
		case <-r.stop:
			r.flush(true)
			return
		}
	}
}

// noteClient counts n refusals of kind what to client cl, as note does,
// with detail, its user name (if it gave one) and its client id; one to
// the agent's own clients is an error, for what it refuses is the
// agent's input.
func (r *refusals) noteClient(cl *mqtt.Client, what string, n int, detail ...slog.Attr) {
	level := slog.LevelWarn
	if isAgent(cl) {
		level = slog.LevelError
	}
	if len(cl.Properties.Username) > 0 {
		detail = append(detail, slog.String("user", clientText(string(cl.Properties.Username))))
	}
	r.note(level, cl.Net.Remote, what, n, append(detail, slog.String("client", clientText(cl.ID)))...)
}

// counted returns the number of refusals of each kind so far.
func (r *refusals) counted() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.totals)
}

// close writes what is counted and stops.
func (r *refusals) close() {
	close(r.stop)
	<-r.done
}

// hostOf is the host of a host:port address, or addr.
func hostOf(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// maxClientText is the most of a user name or client id a log line shows.
const maxClientText = 64

// clientText is s, a user name or client id a client sent, for a log
// line: cut to maxClientText bytes (at a character) and marked so; the
// handler quotes what needs quoting.
func clientText(s string) string {
	if len(s) <= maxClientText {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	cut := maxClientText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "\uFFFD") + "…"
}
