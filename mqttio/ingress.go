package mqttio

// Ingress is an MQTT broker in the agent's own process (broker.Server)
// that hands a durable source the publishes it reads before it
// acknowledges them to their publishers, so that a device's PUBACK means
// the message is in the ingest log (SourceConfig.Ingress).
type Ingress interface {
	// Attach hands take, from the publishers' connections, each publish
	// on a topic that one of filters matches and that pick accepts (nil:
	// all), until detach is called; source names the source, whose
	// filters the broker was told to hold publishes for while no subtask
	// is attached. take returns once it holds the message, or false if it
	// stops first; it calls Handoff.Ack once the message is durable. A
	// message handed and not acknowledged when detach is called is handed
	// again, as a duplicate, to the next subtask of the source attached.
	Attach(source string, filters []string, pick func(topic string) bool, take func(Handoff) bool) (detach func())
}

// Handoff is a publish a client sent the agent's own broker, handed to a
// source before the broker acknowledges it.
type Handoff struct {
	Topic     string
	Payload   []byte
	Publisher string // the client id of its publisher
	PacketID  uint16 // 0 for QoS 0
	QoS       byte
	Retained  bool
	// Duplicate is set when the message was sent before: by its
	// publisher (the DUP flag of a redelivery), or to a subtask that
	// stopped before it acknowledged it.
	Duplicate bool
	// Ack tells the broker that the message is durable in the source's
	// log, once; nil for QoS 0, which is never acknowledged.
	Ack func()
}

// handoff is a Handoff as the message paho would have delivered: the
// intake takes either.
type handoff struct{ h Handoff }

func (m handoff) Duplicate() bool   { return m.h.Duplicate }
func (m handoff) Qos() byte         { return m.h.QoS }
func (m handoff) Retained() bool    { return m.h.Retained }
func (m handoff) Topic() string     { return m.h.Topic }
func (m handoff) MessageID() uint16 { return m.h.PacketID }
func (m handoff) Payload() []byte   { return m.h.Payload }
func (m handoff) Ack() {
	if m.h.Ack != nil {
		m.h.Ack()
	}
}

// attach takes the publishes of the source's topics from its Ingress
// (SourceConfig.Ingress) instead of a subscription: with a parallelism
// above 1, only those whose topic falls to this subtask.
func (s *source) attach() {
	var pick func(string) bool
	if s.parallel > 1 {
		pick = func(topic string) bool { return topicSubtask(topic, s.parallel) == s.subtask }
	}
	s.intake.connected()
	s.detach = s.cfg.Ingress.Attach(s.cfg.Name, s.cfg.Topics, pick, func(h Handoff) bool {
		select {
		case <-s.stop:
			return false // closing: the broker hands it to the next subtask
		default:
		}
		s.cfg.Metrics.Received.Add(1)
		taken, redelivered := s.intake.add(handoff{h}, h.Publisher, s.stop, false)
		if redelivered {
			s.cfg.Metrics.Redelivered.Add(1)
		}
		return taken
	})
}
