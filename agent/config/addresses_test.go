package config

import (
	"strings"
	"testing"
)

// TestAddresses checks the addresses a pipeline listens on and the broker
// URLs it connects to, each refusal at the value it is about.
func TestAddresses(t *testing.T) {
	const pipeline = "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"
	for _, good := range []string{
		"agent:\n  metrics: 127.0.0.1:9100\n  api: :0\n  api_token_file: /t\n",
		"agent:\n  metrics: '[::1]:9100'\n",
		"brokers:\n  b: {url: 'tcp://broker:1883'}\n  l: {embedded: true, listen: ':1883', allow_anonymous: true}\n",
		"brokers:\n  l: {embedded: true, listen: '0.0.0.0:1883', users: [{username: dev, password: pw}]}\n",
		"brokers:\n  l: {embedded: true, listen: 'localhost:1883'}\n",
		"brokers:\n  b: {url: 'mqtts://broker:8883', ca_file: /ca, cert_file: /c, key_file: /k}\n",
		"brokers:\n  b: {url: 'wss://broker/mqtt', ca_file: /ca}\n  u: {url: 'unix:///run/mosquitto.sock'}\n",
	} {
		if _, errs := Parse("a.yaml", []byte(good+pipeline), env(nil)); len(errs) > 0 {
			t.Errorf("%s: %v", good, errs)
		}
	}
	for src, want := range map[string]string{
		"agent:\n  metrics: 9100\n":                                                                                 `a.yaml:2:12: agent.metrics: "9100" is not host:port: write 127.0.0.1:9100 (this device only) or :9100 (every interface)`,
		"agent:\n  metrics: localhost\n":                                                                            `a.yaml:2:12: agent.metrics: "localhost" is not host:port: write 127.0.0.1:9100`,
		"agent:\n  api: 'localhost:http'\n  api_token_file: /t\n":                                                   `a.yaml:2:8: agent.api: port "http" of "localhost:http" is not a number 0–65535`,
		"agent:\n  api: 127.0.0.1:65536\n  api_token_file: /t\n":                                                    `a.yaml:2:8: agent.api: port "65536" of "127.0.0.1:65536" is not a number 0–65535`,
		"brokers:\n  l:\n    embedded: true\n    listen: 18830\n":                                                   `a.yaml:4:13: broker "l": listen: "18830" is not host:port: write 127.0.0.1:18830`,
		"brokers:\n  b:\n    url: broker.example:1883\n":                                                            `a.yaml:3:10: broker "b": URL "broker.example:1883" has no scheme: write tcp://broker.example:1883 (or ssl:// for TLS)`,
		"brokers:\n  b:\n    url: http://broker:80\n":                                                               `a.yaml:3:10: broker "b": URL "http://broker:80": scheme "http" is none of tcp, mqtt, ssl`,
		"brokers:\n  b:\n    url: tcp://u:secret@broker\n":                                                          `a.yaml:3:10: broker "b": URL "tcp://u:xxxxx@broker" has no port: write tcp://broker:1883`,
		"brokers:\n  b:\n    url: 'ssl://:8883'\n":                                                                  `a.yaml:3:10: broker "b": URL "ssl://:8883" names no host: write ssl://HOST:8883`,
		"brokers:\n  b:\n    url: tcp://b:1883\n    ca_file: /ca\n":                                                 `a.yaml:4:14: broker "b": ca_file needs a url that speaks TLS, such as ssl://HOST:8883, not tcp://`,
		"brokers:\n  b:\n    embedded: true\n    cert_file: /c\n    key_file: /k\n":                                 `a.yaml:4:16: broker "b": cert_file: the embedded broker speaks no TLS`,
		"brokers:\n  b:\n    url: ssl://b:8883\n    key_file: /k\n":                                                 `a.yaml:4:15: broker "b": cert_file and key_file go together`,
		"brokers:\n  l:\n    embedded: true\n    listen: 0.0.0.0:1883\n":                                            `a.yaml:4:13: broker "l": listen "0.0.0.0:1883" takes clients from the network, which could read every reading and inject their own: list users`,
		"brokers:\n  l:\n    embedded: true\n    users:\n      - username: d\n":                                     `a.yaml:5:9: broker "l": user "d" needs password (such as ${MQTT_PASSWORD}) or password_file, one of them`,
		"brokers:\n  l:\n    embedded: true\n    users: [{username: d, password: a}, {username: d, password: b}]\n": `broker "l": user "d" is there twice`,
		"brokers:\n  b:\n    url: tcp://b:1883\n    allow_anonymous: false\n":                                       `a.yaml:3:5: broker "b": users, allow_anonymous and anonymous are an embedded broker's`,
	} {
		_, errs := Parse("a.yaml", []byte(src+pipeline), env(nil))
		if !strings.Contains(errs.Error(), want) || strings.Contains(errs.Error(), "secret") {
			t.Errorf("%s\ngave %v\nwant %s", src, errs, want)
		}
	}
}
