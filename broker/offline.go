package broker

import (
	"cmp"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Sessions whose client is gone (offline), which a client keeps by
// connecting with clean=false and then holds every message of its
// subscriptions for, never take what connected clients need: an offline
// session holds within its own limits, the offline sessions together
// within half of MaxQueuedBytesTotal and what connected sessions leave
// of it, and those of one address the same within
// MaxQueuedBytesPerAddress, by dropping their oldest messages for new
// ones (trimLocked); a new session takes the place of the one offline
// longest, among its address's (MaxSessionsPerAddress) and among all
// (MaxClients: room); and a session offline for OfflineSessionExpiry
// ends (end), by the monotonic clock, as mochi's own expiry goes by the
// wall clock, which on a gateway may step by years when it is first set.

// offlineShare is the part of MaxQueuedBytesTotal (of
// MaxQueuedBytesPerAddress) that offline sessions (of the address) may
// hold together: half, the rest is connected sessions'.
const offlineShare = 2

// offlineLocked takes the session cl holds offline: its messages in
// flight queued oldest first, the offline sessions trimmed to their share
// with it, and its expiry started.
func (g *brokerGuard) offlineLocked(cl *mqtt.Client) {
	if isAgent(cl) || g.session[cl.ID] != nil && g.session[cl.ID] != cl {
		return
	}
	q := g.queueLocked(cl)
	if q.offline {
		return
	}
	g.addLocked(q, -q.bytes()) // counted again as offline
	q.offline, q.since = true, time.Now()
	g.addLocked(q, q.bytes())
	g.offline[q] = struct{}{}
	for _, pk := range cl.State.Inflight.GetAll(false) {
		if e, ok := q.inflight[pk.PacketID]; ok && pk.FixedHeader.Type == packets.Publish {
			q.order = append(q.order, held{id: pk.PacketID, seq: e.seq})
		}
	}
	slices.SortFunc(q.order, func(a, b held) int { return cmp.Compare(a.seq, b.seq) })
	if g.lim.OfflineSessionExpiry > 0 {
		q.expiry = time.AfterFunc(g.lim.OfflineSessionExpiry, func() {
			g.end(cl, "after offline_session_expiry",
				slog.Duration("offline_session_expiry", g.lim.OfflineSessionExpiry))
		})
	}
	g.trimLocked(q)
}

// unfitLocked says which limit a message of cost to offline queue q is
// over even with every message of q dropped, if any.
func (g *brokerGuard) unfitLocked(q *queue, cost int64) string {
	a, per := g.addressLocked(q.host), g.lim.MaxQueuedBytesPerAddress
	switch total := g.lim.MaxQueuedBytesTotal; {
	case g.lim.MaxQueuedBytes > 0 && q.will+cost > g.lim.MaxQueuedBytes:
		return "over max_queued_bytes"
	case per > 0 && (cost > per/offlineShare || a.queued-a.offline+cost > per):
		return "over max_queued_bytes_per_address"
	case total > 0 && (cost > total/offlineShare || g.queued-g.offlineQueued+cost > total):
		return "over max_queued_bytes_total"
	}
	return ""
}

// trimLocked drops the oldest messages of offline sessions while
// offline queue q is over its own limits (q's), or the offline sessions
// of q's address or of all over their share of MaxQueuedBytesPerAddress
// or MaxQueuedBytesTotal or over what connected sessions leave of it
// (the one holding most of those, of q's address or of all, with a
// message to drop: a session's QoS 2 acknowledgements are no message of
// its own to drop, nor is its will). It is called as q goes offline and
// once mochi holds a message for q (OnQosPublish), not when mochi asks
// whether to deliver one (OnACLCheck): it asks before it works out the
// delivery's QoS, and keeps nothing of a QoS 0 delivery to a closed
// client, so room made then would be a held message dropped for
// nothing. So a session may be over its bounds by one message from
// mochi's holding it (in its inflight) until OnQosPublish, which mochi
// calls next, trims it.
func (g *brokerGuard) trimLocked(q *queue) {
	for {
		victim, why, shared := q, "", false
		a, per := g.addressLocked(q.host), g.lim.MaxQueuedBytesPerAddress
		switch total := g.lim.MaxQueuedBytesTotal; {
		case g.lim.MaxQueuedMessages > 0 && q.messages() > g.lim.MaxQueuedMessages:
			why = "over max_queued_messages"
		case g.lim.MaxQueuedBytes > 0 && q.bytes() > g.lim.MaxQueuedBytes:
			why = "over max_queued_bytes"
		case per > 0 && (a.offline > per/offlineShare || a.queued > per):
			why, shared = "over their share of max_queued_bytes_per_address", true
			victim = g.holdingMostLocked(func(o *queue) bool { return o.host == q.host })
		case total > 0 && (g.offlineQueued > total/offlineShare || g.queued > total):
			why, shared = "over their share of max_queued_bytes_total", true
			victim = g.holdingMostLocked(func(*queue) bool { return true })
		default:
			return
		}
		if victim == nil {
			return // none holds a message to drop
		}
		// A victim that had none left (its order only messages taken out
		// since) has an empty order now: for the share, the next holding
		// most is tried.
		if !g.dropOldestLocked(victim, why) && !shared {
			return
		}
	}
}

// holdingMostLocked returns, of the offline queues that of says are
// among them, the one holding most in flight with a message to drop, if
// any.
func (g *brokerGuard) holdingMostLocked(of func(*queue) bool) *queue {
	var most *queue
	for o := range g.offline {
		if len(o.order) > 0 && of(o) && (most == nil || o.inflightBytes > most.inflightBytes) {
			most = o
		}
	}
	return most
}

// dropOldestLocked drops the oldest message offline queue q holds in
// flight, and counts it; it reports whether there was one.
func (g *brokerGuard) dropOldestLocked(q *queue, why string) bool {
	for len(q.order) > 0 {
		h := q.order[0]
		q.order = q.order[1:]
		if e, ok := q.inflight[h.id]; !ok || e.seq != h.seq {
			continue // taken out since
		}
		if q.cl.State.Inflight.Delete(h.id) {
			atomic.AddInt64(&g.srv.Info.Inflight, -1)
			q.cl.State.Inflight.IncreaseSendQuota()
		}
		g.setInflightLocked(q, h.id, 0)
		g.drops[q.cl.ID]++
		g.refer.noteClient(q.cl, "embedded broker dropped offline sessions' oldest messages: "+why, 1)
		return true
	}
	return false
}

// room makes room for cl's new session: where the sessions of clients
// last connected from cl's address are MaxSessionsPerAddress, or all
// are MaxClients, the one offline longest among them ends. It returns the
// limit that refuses cl a session, and its value, if there is none to end.
func (g *brokerGuard) room(cl *mqtt.Client) (limit string, n int) {
	host := hostOf(cl.Net.Remote)
	for _, l := range []struct {
		name string
		n    int
		of   func(*mqtt.Client) bool
	}{
		{"max_sessions_per_address", g.lim.MaxSessionsPerAddress, func(o *mqtt.Client) bool { return hostOf(o.Net.Remote) == host }},
		{"max_clients", g.lim.MaxClients, func(*mqtt.Client) bool { return true }},
	} {
		for l.n > 0 {
			count, oldest := g.sessionsOf(l.of)
			if count < l.n {
				break
			}
			if oldest == nil || !g.end(oldest, "for a new session over "+l.name, slog.Int(l.name, l.n)) {
				return l.name, l.n
			}
		}
	}
	return "", 0
}

// sessionsOf counts the sessions of clients other than the agent's that
// of says are among them, and finds the one offline longest, if any.
func (g *brokerGuard) sessionsOf(of func(*mqtt.Client) bool) (n int, oldest *mqtt.Client) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var since time.Time
	for _, cl := range g.srv.Clients.GetAll() {
		if isAgent(cl) || !of(cl) {
			continue
		}
		n++
		if q := g.queues[cl]; q != nil && q.offline && (oldest == nil || q.since.Before(since)) {
			oldest, since = cl, q.since
		}
	}
	return n, oldest
}

// end ends the offline session cl holds (endSession), as mochi ends one
// that expired, with the same race (a client connecting under its id at
// that instant may lose its new session); it reports whether it did, and
// counts and logs why (no refusal: the session's client is gone).
func (g *brokerGuard) end(cl *mqtt.Client, why string, detail ...slog.Attr) bool {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if now, ok := g.srv.Clients.Get(cl.ID); closed || !ok || now != cl || !cl.Closed() || cl.IsTakenOver() {
		return false
	}
	g.mu.Lock()
	g.ended[why]++ // counted as it ends: once it is gone, it is counted
	g.mu.Unlock()
	g.endSession(cl)
	g.refer.tell(slog.LevelInfo, cl.Net.Remote, "embedded broker ended an offline session: "+why, 1, append(detail, slog.String("client", clientText(cl.ID)))...)
	return true
}

// close stops the expiry of every offline session: the broker stopped.
func (g *brokerGuard) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for q := range g.offline {
		if q.expiry != nil {
			q.expiry.Stop()
		}
	}
}

// OfflineDrops returns how many messages the broker dropped from each
// session while its client was gone, to keep the offline sessions within
// their limits, by client id, for the sessions it holds.
func (b *Server) OfflineDrops() map[string]int64 {
	b.guard.mu.Lock()
	defer b.guard.mu.Unlock()
	return maps.Clone(b.guard.drops)
}

// EndedSessions returns how many offline sessions the broker ended since
// it started, by why: "after offline_session_expiry", or "for a new
// session over max_clients" (or max_sessions_per_address).
func (b *Server) EndedSessions() map[string]int64 {
	b.guard.mu.Lock()
	defer b.guard.mu.Unlock()
	return maps.Clone(b.guard.ended)
}
