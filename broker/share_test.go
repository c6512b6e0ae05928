package broker

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/testing/mqttraw"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// TestAddressShareLeavesOthersRoom: from one address, four connected
// clients that subscribe to # and never acknowledge, and four offline
// sessions of #, once took the whole of max_queued_bytes_total, and a
// reader of another address then missed messages. With
// max_queued_bytes_per_address, the address holds within its share (its
// offline sessions within half of it, dropping their oldest), and the
// reader gets every message; without, it does not (the attack as it was).
func TestAddressShareLeavesOthersRoom(t *testing.T) {
	for _, c := range []struct {
		name    string
		share   int64
		readAll bool
	}{{"without", 0, false}, {"with", defaultLimits.MaxQueuedBytesPerAddress, true}} {
		t.Run(c.name, func(t *testing.T) {
			lim := defaultLimits
			lim.MaxQueuedBytesPerAddress = c.share
			b := limitedBroker(t, lim)
			read, total := attackFromOneAddress(t, b)
			got := shareOf(b, hogAddress)
			t.Logf("the reader got %d of %d; %s holds %d bytes, %d offline; refused %v; dropped %v",
				read, total, hogAddress, got.queued, got.offline, b.Refusals(), b.OfflineDrops())
			if (read == total) != c.readAll {
				t.Fatalf("the reader of another address got %d of %d messages", read, total)
			}
			if !c.readAll {
				return
			}
			if got.queued > c.share || got.offline > c.share/offlineShare {
				t.Errorf("%s holds %d bytes, %d of them offline: over its share %d (offline %d)", hogAddress, got.queued, got.offline, c.share, c.share/offlineShare)
			}
			// As mochi holds them, too.
			var held int64
			for _, cl := range b.srv.Clients.GetAll() {
				if hostOf(cl.Net.Remote) == hogAddress {
					_, n := inflightOf(cl)
					held += n
				}
			}
			if held > c.share {
				t.Errorf("mochi holds %d bytes in flight for %s, over its share %d", held, hogAddress, c.share)
			}
			drops := b.OfflineDrops()
			for i := range 4 {
				if id := fmt.Sprint("off-", i); drops[id] == 0 {
					t.Errorf("offline session %s dropped none of its oldest: %v", id, drops)
				}
			}
			found := false
			for what := range b.Refusals() {
				found = found || strings.Contains(what, "over max_queued_bytes_per_address")
			}
			if !found {
				t.Errorf("no delivery refused over max_queued_bytes_per_address: %v", b.Refusals())
			}
		})
	}
}

// hogAddress is the address the attack of attackFromOneAddress comes
// from; the reader's and the publisher's are others.
const hogAddress = "127.0.0.2"

// attackFromOneAddress makes, on b, four offline sessions of # and four
// connected clients of # that never acknowledge, from hogAddress; then
// 2,000 QoS 1 messages of 10 KB published from 127.0.0.3, and read by a
// reader of plant/# from 127.0.0.4. It returns what the reader got, of
// how many.
func attackFromOneAddress(t *testing.T, b *Server) (read, total int) {
	addr := strings.TrimPrefix(b.URL(), "tcp://")
	for i := range 4 {
		id := fmt.Sprint("off-", i)
		c := rawConnFrom(t, addr, hogAddress, mqttraw.Session{ID: id})
		if codes, err := c.SubscribeAck(1, 1, "#"); err != nil || !slices.Equal(codes, []byte{1}) {
			t.Fatalf("%s subscribing to #: %x %v", id, codes, err)
		}
		c.Close()
		awaitOffline(t, b, id)
	}
	for i := range 4 {
		id := fmt.Sprint("hog-", i)
		c := rawConnFrom(t, addr, hogAddress, mqttraw.Session{ID: id, Clean: true})
		if codes, err := c.SubscribeAck(1, 1, "#"); err != nil || !slices.Equal(codes, []byte{1}) {
			t.Fatalf("%s subscribing to #: %x %v", id, codes, err)
		}
		go func() { // reads, so as not to stall the broker's writes, and acknowledges nothing
			for {
				if _, err := c.ReadPacket(); err != nil {
					return
				}
			}
		}()
	}
	reader := rawConnFrom(t, addr, "127.0.0.4", mqttraw.Session{ID: "reader", Clean: true})
	if codes, err := reader.SubscribeAck(1, 1, "plant/#"); err != nil || !slices.Equal(codes, []byte{1}) {
		t.Fatalf("the reader subscribing: %x %v", codes, err)
	}
	got := countReads(reader)
	const messages = 2000
	pub := rawConnFrom(t, addr, "127.0.0.3", mqttraw.Session{ID: "pub", Clean: true})
	publishNumbered(t, pub, "plant/line-1", messages)
	// Every message is acknowledged to the publisher once delivered or
	// refused to each subscriber; the reader's PUBACKs are what is left.
	testwait.Poll(10*time.Second, func() bool { return got.Load() == messages })
	return int(got.Load()), messages
}

// shareOf returns what the limits count for the sessions of address
// host.
func shareOf(b *Server, host string) addressBytes {
	b.guard.mu.Lock()
	defer b.guard.mu.Unlock()
	return b.guard.addressLocked(host)
}
