package mqttio

import (
	"slices"
	"sync"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// orderedStore is paho's in-memory store of messages in flight, except that
// All lists them in the order they were put: after a reconnect, paho sends
// the stored publishes again in that order, so a sink with several publishes
// awaiting acknowledgement keeps its output in order (paho's MemoryStore
// lists them in map order).
type orderedStore struct {
	mu    sync.Mutex
	msgs  map[string]packets.ControlPacket
	order []string
}

var _ paho.Store = (*orderedStore)(nil)

func newOrderedStore() *orderedStore {
	return &orderedStore{msgs: make(map[string]packets.ControlPacket)}
}

func (s *orderedStore) Open() {}

func (s *orderedStore) Put(key string, m packets.ControlPacket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.msgs[key]; !ok {
		s.order = append(s.order, key)
	}
	s.msgs[key] = m
}

func (s *orderedStore) Get(key string) packets.ControlPacket {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.msgs[key]
}

func (s *orderedStore) All() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order)
}

func (s *orderedStore) Del(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.msgs[key]; !ok {
		return
	}
	delete(s.msgs, key)
	if i := slices.Index(s.order, key); i >= 0 {
		s.order = slices.Delete(s.order, i, i+1)
	}
}

func (s *orderedStore) Close() {}

func (s *orderedStore) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.msgs)
	s.order = nil
}
