package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/mqttio"
)

// FleetBroker is where `cairn top --fleet` finds the gateways' statuses:
// the broker they publish them to, how to log in, and the filter of their
// status topics.
type FleetBroker struct {
	URL                       string
	Username, Password        string
	CAFile, CertFile, KeyFile string
	// Topic is the status topics' filter, a + (or a # at the end) where
	// a gateway's name is: gateways/+/status. The statuses as JSON are on
	// its /json sibling (mqttio.StatusJSONTopic).
	Topic string
}

// String says where the fleet view watches, without a password.
func (b FleetBroker) String() string {
	u := b.URL
	if p, err := url.Parse(b.URL); err == nil {
		u = p.Redacted()
	}
	return u + " " + b.Topic
}

// FleetBrokerOf reads from the pipeline file at path the broker named name,
// or, when name is "", the one broker with a status_topic; the topic's
// filter is status_topic with + for each level that takes a variable from
// the environment (gateways/${GATEWAY}/status: gateways/+/status), as
// every gateway's file writes it.
func FleetBrokerOf(path, name string) (FleetBroker, error) {
	brokers, err := config.WatchedBrokers(path)
	if err != nil {
		return FleetBroker{}, err
	}
	if name == "" {
		var with []string
		for _, n := range slices.Sorted(maps.Keys(brokers)) {
			if brokers[n].StatusTopic != "" {
				with = append(with, n)
			}
		}
		switch len(with) {
		case 0:
			return FleetBroker{}, fmt.Errorf("%s: no broker has a status_topic: name one with --broker, and give --topic", path)
		case 1:
			name = with[0]
		default:
			return FleetBroker{}, fmt.Errorf("%s: brokers %s have a status_topic: name one with --broker", path, strings.Join(with, ", "))
		}
	}
	b, ok := brokers[name]
	if !ok {
		return FleetBroker{}, fmt.Errorf("%s: no broker %q (brokers: %s)", path, name, strings.Join(slices.Sorted(maps.Keys(brokers)), ", "))
	}
	fb := FleetBroker{URL: b.URL, Username: b.Username, CAFile: b.CAFile, CertFile: b.CertFile, KeyFile: b.KeyFile}
	if b.Embedded {
		host, port, err := net.SplitHostPort(b.Listen)
		if err != nil {
			return FleetBroker{}, fmt.Errorf("%s: broker %q: listen %q: %w", path, name, b.Listen, err)
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		fb.URL = "tcp://" + net.JoinHostPort(host, port)
	}
	if config.RefersToEnv(fb.URL) || config.RefersToEnv(fb.Username) {
		return FleetBroker{}, fmt.Errorf("%s: broker %q: its url or username takes a variable this shell's environment lacks", path, name)
	}
	if fb.Password, err = secret(b.Password, b.PasswordFile, "password_file"); err != nil {
		return FleetBroker{}, fmt.Errorf("%s: broker %q: %w", path, name, err)
	}
	if b.WrittenStatusTopic != "" {
		fb.Topic = StatusFilter(b.WrittenStatusTopic)
	}
	return fb, nil
}

// StatusFilter is the filter of every gateway's status topic, from a
// status_topic as a gateway's pipeline file writes it: each level that
// takes a variable from the environment becomes +.
func StatusFilter(written string) string {
	levels := strings.Split(written, "/")
	for i, l := range levels {
		if config.RefersToEnv(l) {
			levels[i] = "+"
		}
	}
	return strings.Join(levels, "/")
}

// WatchFleet subscribes to b's status topics and their JSON siblings,
// calling onMessage with every message, on one goroutine, and onLink with
// every connection made or lost, until stop. It does not wait for the
// broker: it connects, and reconnects, in the background.
func WatchFleet(b FleetBroker, onMessage func(api.FleetMessage), onLink func(api.FleetLink)) (stop func(), err error) {
	if b.URL == "" || b.Topic == "" {
		return nil, errors.New("a broker URL and a status topic filter are needed")
	}
	host, _ := os.Hostname()
	cc := mqttio.ClientConfig{Broker: b.URL, ClientID: fmt.Sprintf("cairn-top-%s-%d", host, os.Getpid()),
		Username: b.Username, Password: b.Password, CAFile: b.CAFile, CertFile: b.CertFile, KeyFile: b.KeyFile,
		KeepAlive: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	return cc.WatchStatus(b.Topic, func(topic string, payload []byte, retained bool) {
		gateway, json, ok := gatewayOf(b.Topic, topic)
		if !ok {
			return
		}
		onMessage(api.FleetMessage{Gateway: gateway, Topic: topic, JSON: json, Payload: payload, Retained: retained, At: time.Now()})
	}, func(up bool, err error) {
		l := api.FleetLink{Up: up, At: time.Now()}
		if err != nil {
			l.Err = err.Error()
		}
		onLink(l)
	})
}

// gatewayOf returns the gateway whose status topic, or its JSON sibling,
// topic is, for the filter: the levels its wildcards matched, joined by
// "/" (the status topic itself for a filter without any); json says it is
// the sibling. ok is false for a topic that is neither.
func gatewayOf(filter, topic string) (gateway string, json, ok bool) {
	status := topic
	if t, cut := strings.CutSuffix(topic, mqttio.StatusJSONTopic("")); cut {
		if _, ok := matched(filter, t); ok {
			status, json = t, true
		}
	}
	g, ok := matched(filter, status)
	if g == "" {
		g = status
	}
	return g, json, ok
}

// matched returns the levels of topic that filter's wildcards match,
// joined by "/", if filter matches topic.
func matched(filter, topic string) (string, bool) {
	fl, tl := strings.Split(filter, "/"), strings.Split(topic, "/")
	var got []string
	for i, f := range fl {
		switch {
		case f == "#":
			return strings.Join(append(got, tl[i:]...), "/"), true
		case i >= len(tl):
			return "", false
		case f == "+":
			got = append(got, tl[i])
		case f != tl[i]:
			return "", false
		}
	}
	if len(fl) != len(tl) {
		return "", false
	}
	return strings.Join(got, "/"), true
}

// ReadSecret reads a password from the file at path, without the line
// breaks at its end.
func ReadSecret(path string) (string, error) { return secret("", path, path) }
