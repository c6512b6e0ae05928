package agent

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"sync/atomic"

	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/broker"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/mqttio"
)

// deps are what building a graph needs beyond the config: the agent's
// inputs, the same for every incarnation (and for a reload's trial build).
type deps struct {
	logs     *ingest.Logs
	clientID string                    // base of every MQTT client id
	brokers  map[string]*broker.Server // the embedded brokers started, by name
	log      *slog.Logger              // the agent's, for the MQTT clients too
	// acceptStateLoss is Options.AcceptStateLoss.
	acceptStateLoss bool
}

// built is what build made of a config: the topology, and the metrics of
// its parts, where the status and the metrics read them.
type built struct {
	topo    *graph.Topology
	sources map[string]*mqttio.SourceMetrics // by source id
	sinks   map[string]*mqttio.SinkMetrics   // by sink id
	late    map[string]*atomic.Int64         // window operator → records dropped as late
	// unmatched counts, by lookup join, the records it dropped with
	// nothing to join yet.
	unmatched map[string]*atomic.Int64
	// brokerStates gather the connection states of each broker's clients.
	brokerStates map[string]*mqttio.BrokerState
}

// brokerState returns broker name's state, shared by its clients.
func (g *built) brokerState(name string) *mqttio.BrokerState {
	if g.brokerStates == nil {
		g.brokerStates = make(map[string]*mqttio.BrokerState)
	}
	if g.brokerStates[name] == nil {
		g.brokerStates[name] = new(mqttio.BrokerState)
	}
	return g.brokerStates[name]
}

// clientConfig resolves a broker of the config into MQTT client settings,
// without a State: the caller's clients share one, or have none.
func (d *deps) clientConfig(c *config.Config, name, suffix string) (mqttio.ClientConfig, error) {
	b := c.Brokers[name]
	cc := mqttio.ClientConfig{
		Broker: b.URL, ClientID: d.clientID + "-" + suffix,
		Username: b.Username, Password: b.Password,
		CAFile: b.CAFile, CertFile: b.CertFile, KeyFile: b.KeyFile,
		KeepAlive: b.KeepAlive, StatusTopic: b.StatusTopic, Logger: d.log,
		Name: name,
	}
	if b.ClientID != "" {
		cc.ClientID = b.ClientID + "-" + suffix
	}
	if br := d.brokers[name]; b.Embedded && br != nil {
		cc.Broker, cc.Dial = br.URL(), br.DialAgent
		cc.Username, cc.Password = br.Credentials()
	}
	pw, err := secret(cc.Password, b.PasswordFile, "password_file")
	if err != nil {
		return cc, fmt.Errorf("broker %q: %w", name, err)
	}
	cc.Password = pw
	return cc, nil
}

// brokerConfig is what the embedded broker name of config c is started
// with: its users (passwords read from their files) and what they may
// do, whether it lets in anonymous clients and what they may do, the
// agent's own client ids (of base clientID), which no one else may take,
// the agent's topics, which no one else may publish to, the topics its
// sources read, and its limits.
func brokerConfig(c *config.Config, name, clientID string) (broker.Config, error) {
	b := c.Brokers[name]
	bc := broker.Config{Addr: b.Listen, AllowAnonymous: b.AnonymousAllowed(), OwnClientIDs: cmp.Or(b.ClientID, clientID) + "-",
		AgentTopics: agentTopics(c), Reads: sourceReads(c, name), Limits: b.Limits.MQTT(), Users: make(map[string]string), Grants: make(map[string]broker.Grants)}
	if b.Anonymous != nil {
		bc.AnonymousGrants = b.Anonymous.MQTT()
	}
	for _, u := range b.Users {
		pw, err := secret(u.Password, u.PasswordFile, "password_file")
		if err != nil {
			return bc, fmt.Errorf("user %q: %w", u.Username, err)
		}
		bc.Users[u.Username] = pw
		bc.Grants[u.Username] = u.MQTT()
	}
	return bc, nil
}

// sourceReads are the filters of the durable sources of c that read the
// embedded broker name, by source id (broker.Config.Reads).
func sourceReads(c *config.Config, name string) map[string][]string {
	reads := make(map[string][]string)
	for _, s := range c.Sources {
		if s.Broker != name || s.AtMostOnce {
			continue
		}
		reads[s.ID], _, _ = sourceTopics(s) // the config's check refused a bad one
	}
	return reads
}

// sourceTopics returns the topic filters source s subscribes to, and the
// record fields its topics' levels name, by level.
func sourceTopics(s *config.Source) (filters []string, fields map[int]string, err error) {
	fields = make(map[int]string)
	for _, t := range s.Topics {
		filter, named, err := mqttio.ParseTopicPattern(t)
		if err != nil {
			return nil, nil, err
		}
		filters = append(filters, filter)
		maps.Copy(fields, named)
	}
	return filters, fields, nil
}

// agentTopics are the topics the agent publishes to on c's brokers: its
// sinks' (with "{key}"), its sources' dead letters', its status topics
// and their /json siblings. The embedded brokers let no one else publish
// to them.
func agentTopics(c *config.Config) []string {
	var out []string
	for _, s := range c.Sinks {
		out = append(out, s.Topic)
	}
	for _, s := range c.Sources {
		if s.DeadLetterTopic != "" {
			out = append(out, s.DeadLetterTopic)
		}
	}
	for _, b := range c.Brokers {
		if b.StatusTopic != "" {
			out = append(out, b.StatusTopic, mqttio.StatusJSONTopic(b.StatusTopic))
		}
	}
	return out
}

// build turns a validated config into a topology whose sinks share
// backlog (nil: a trial build, whose graph never runs).
func (d *deps) build(c *config.Config, backlog *mqttio.Backlog) (*built, error) {
	g := &built{late: make(map[string]*atomic.Int64), unmatched: make(map[string]*atomic.Int64), sources: make(map[string]*mqttio.SourceMetrics)}
	var b graph.Builder
	streams := make(map[string]graph.Stream)
	parallelism := make(map[string]int)
	for _, s := range c.Sources {
		var opts []graph.Option
		if s.Time != "" || s.Simulator != nil {
			opts = append(opts, graph.WithWatermarks(s.OutOfOrderness))
		}
		if s.Time != "" {
			opts = append(opts, graph.WithIdleness(graph.Idleness{Timeout: s.IdleTimeout, Horizon: c.WindowHorizon(), Lag: c.Agent.SyncInterval}))
		}
		if s.Simulator != nil {
			streams[s.ID] = b.Source(s.ID, s.Parallelism, newSimulator(*s.Simulator), opts...)
			parallelism[s.ID] = s.Parallelism
			continue
		}
		cc, err := d.clientConfig(c, s.Broker, s.ID)
		if err != nil {
			return nil, err
		}
		cc.State = g.brokerState(s.Broker)
		bounds, err := s.TimeBounds()
		if err != nil {
			return nil, fmt.Errorf("source %q: %w", s.ID, err)
		}
		filters, topicFields, err := sourceTopics(s)
		if err != nil {
			return nil, err
		}
		dec := mqttio.Decoding{KeyField: s.Key, ValueField: s.Value, TimeField: s.Time, TimeBounds: bounds, TopicFields: topicFields}
		for _, f := range []*string{&s.Key, &s.Value, &s.Time} {
			if w := c.AsWritten(f); w != *f {
				if dec.Written == nil {
					dec.Written = make(map[string]string)
				}
				dec.Written[*f] = w
			}
		}
		if s.Format == "raw" {
			dec.Format = mqttio.Raw
		}
		metrics := new(mqttio.SourceMetrics)
		g.sources[s.ID] = metrics
		var ingress mqttio.Ingress
		if br := d.brokers[s.Broker]; br != nil && !s.AtMostOnce {
			ingress = br // its publishes are durable before it acknowledges them
		}
		streams[s.ID] = b.Source(s.ID, s.Parallelism, mqttio.NewSource(mqttio.SourceConfig{
			Name: s.ID, Client: cc, Topics: filters, Decoding: dec, AtMostOnce: s.AtMostOnce, Ingress: ingress,
			Logs: d.logs, AcceptStateLoss: d.acceptStateLoss, SyncInterval: c.Agent.SyncInterval, MaxInflight: c.Brokers[s.Broker].MaxInflight,
			DeadLetterTopic: s.DeadLetterTopic, RetainCheckpoints: c.Checkpoints.Retained,
			Metrics: metrics,
		}), opts...)
		parallelism[s.ID] = s.Parallelism
	}
	for _, o := range c.Operators {
		var inputs []graph.Input
		for _, in := range o.Inputs {
			p, err := partitioner(o, parallelism[in])
			if err != nil {
				return nil, fmt.Errorf("operator %q: key_by: %w", o.ID, err)
			}
			inputs = append(inputs, graph.In(streams[in], p))
		}
		newOp, err := o.Build(config.Hooks{Late: countingHook(g.late, o.ID), Unmatched: countingHook(g.unmatched, o.ID)})
		if err != nil {
			return nil, fmt.Errorf("operator %q: %w", o.ID, err)
		}
		streams[o.ID] = b.Operator(o.ID, o.Parallelism, newOp, inputs)
		parallelism[o.ID] = o.Parallelism
	}
	for _, s := range c.Sinks {
		cc, err := d.clientConfig(c, s.Broker, s.ID)
		if err != nil {
			return nil, err
		}
		cc.State = g.brokerState(s.Broker)
		metrics := new(mqttio.SinkMetrics)
		if g.sinks == nil {
			g.sinks = make(map[string]*mqttio.SinkMetrics)
		}
		g.sinks[s.ID] = metrics
		in := graph.Rebalance()
		if s.Parallelism == parallelism[s.Input] {
			in = graph.Forward() // each subtask takes one input subtask's records, in order
		}
		b.Operator(s.ID, s.Parallelism, mqttio.NewSink(mqttio.SinkConfig{Client: cc, Topic: s.Topic, Retain: s.Retain, Backlog: backlog, Metrics: metrics,
			Format: c.OutputFormat(s)}),
			[]graph.Input{graph.In(streams[s.Input], in)})
	}
	topo, err := b.Build()
	if err != nil {
		return nil, err
	}
	g.topo = topo
	return g, nil
}

// partitioner is how operator o reads an input of parallelism upstream:
// by the key its key_by gives a record, the record's own key as it is
// for key_by: key.
func partitioner(o *config.Operator, upstream int) (graph.Partitioner, error) {
	switch {
	case len(o.KeyBy) == 1 && o.KeyBy[0] == "key":
		return graph.Hash(nil), nil
	case o.KeyBy != nil:
		key, err := o.Key()
		return graph.Hash(key), err
	case upstream == o.Parallelism:
		return graph.Forward(), nil
	}
	return graph.Rebalance(), nil
}

// countingHook returns a hook of config.Hooks for operator id (Late,
// Unmatched): a counter of the records it hands to it, in counts (g.late,
// g.unmatched), where the status and the metrics read it.
func countingHook(counts map[string]*atomic.Int64, id string) func() func(*graph.Record) {
	return func() func(*graph.Record) {
		n := new(atomic.Int64)
		counts[id] = n
		return func(*graph.Record) { n.Add(1) }
	}
}
