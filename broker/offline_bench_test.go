package broker

import (
	"fmt"
	"net"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"
)

// BenchmarkGuardDelivery is what brokerGuard's accounting costs a QoS 1
// delivery of 10 KB, as mochi calls its hooks: the access check, the
// message in flight, its acknowledgement (connected); or, to a session
// whose client is gone and that is full, the access check and the
// message in flight, for which its oldest is dropped (offline).
func BenchmarkGuardDelivery(b *testing.B) {
	for _, offline := range []bool{false, true} {
		b.Run(fmt.Sprint("offline=", offline), func(b *testing.B) {
			br := limitedBroker(b, defaultLimits)
			g := br.guard
			conn, _ := net.Pipe()
			cl := br.srv.NewClient(conn, "clients", "bench", false)
			pub := br.srv.NewClient(conn, "clients", "pub", false)
			g.OnSessionEstablished(cl, packets.Packet{})
			pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, TopicName: "plant/line-1", Payload: make([]byte, 10_000)}
			id := uint16(0)
			deliver := func() {
				id = id%65535 + 1
				g.OnPublish(pub, pk)
				g.OnACLCheck(cl, pk.TopicName, false)
				out := pk // sharing the payload: mochi's copy is not the accounting
				out.PacketID = id
				cl.State.Inflight.Set(out)
				g.OnQosPublish(cl, out, out.Created, 0)
				g.OnPublished(pub, pk)
				if !offline {
					cl.State.Inflight.Delete(id)
					g.OnQosComplete(cl, out)
				}
			}
			if offline {
				cl.Stop(nil)
				g.OnDisconnect(cl, nil, false)
				for range defaultLimits.MaxQueuedMessages {
					deliver()
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				deliver()
			}
		})
	}
}
