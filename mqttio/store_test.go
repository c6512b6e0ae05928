package mqttio

import (
	"slices"
	"testing"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// TestOrderedStoreListsInPutOrder checks what paho's resend after a
// reconnect relies on: All lists the messages in flight in the order they
// were put, whatever their ids, without those deleted.
func TestOrderedStoreListsInPutOrder(t *testing.T) {
	s := newOrderedStore()
	for _, id := range []string{"o.9", "o.2", "o.40", "o.1", "o.7"} {
		s.Put(id, packets.NewControlPacket(packets.Publish))
	}
	s.Put("o.2", packets.NewControlPacket(packets.Publish)) // an update keeps its place
	s.Del("o.40")
	s.Del("o.missing")
	if got, want := s.All(), []string{"o.9", "o.2", "o.1", "o.7"}; !slices.Equal(got, want) {
		t.Fatalf("All = %v, want %v", got, want)
	}
	if s.Get("o.40") != nil || s.Get("o.9") == nil {
		t.Fatal("Get after Del")
	}
	s.Reset()
	if len(s.All()) != 0 {
		t.Fatal("Reset left messages")
	}
}
