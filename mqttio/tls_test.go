package mqttio

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/internal/testing/testlog"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
	"github.com/cairn-edge/cairn/runtime"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files.
type testPKI struct {
	dir               string
	pool              *x509.CertPool
	server            tls.Certificate
	caFile, cert, key string
}

func newPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cairn test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, server bool) (tls.Certificate, []byte, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "cairn test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if server {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalECPrivateKey(key)
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c, certPEM, keyPEM
	}
	p := testPKI{dir: dir, pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.server, _, _ = issue(2, true)
	_, certPEM, keyPEM := issue(3, false)
	p.caFile, p.cert, p.key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	for f, data := range map[string][]byte{p.caFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), p.cert: certPEM, p.key: keyPEM} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestMutualTLS runs a source and a sink against a broker that demands a
// client certificate signed by its CA.
func TestMutualTLS(t *testing.T) {
	pki := newPKI(t)
	srv := mqtt.New(&mqtt.Options{InlineClient: true})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	l := listeners.NewTCP(listeners.Config{ID: "tls", Address: "127.0.0.1:0", TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{pki.server}, ClientCAs: pki.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}})
	if err := srv.AddListener(l); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close()
	url := "ssl://" + l.Address()

	cc := ClientConfig{Broker: url, ClientID: "tls-agent", CAFile: pki.caFile, CertFile: pki.cert, KeyFile: pki.key, StatusTopic: "agents/tls-agent/status"}
	online := make(chan struct{})
	var onlineOnce sync.Once
	if err := srv.Subscribe("agents/+/status", 1, func(_ *mqtt.Client, _ packets.Subscription, pk packets.Packet) {
		if string(pk.Payload) == "online" {
			onlineOnce.Do(func() { close(online) })
		}
	}); err != nil {
		t.Fatal(err)
	}

	var got atomic.Int64
	done := make(chan struct{}, 1)
	var b graph.Builder
	src := b.Source("mqtt", 1, NewSource(SourceConfig{Name: "mqtt", Client: cc, Topics: []string{"in/#"}, AtMostOnce: true,
		Decoding: Decoding{Format: Raw}}))
	target := new(atomic.Int64)
	target.Store(50)
	b.Operator("count", 1, func(int) graph.Operator { return counter{n: &got, target: target, done: done} },
		[]graph.Input{graph.In(src, graph.Forward())})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer runInBackground(t, topo, runtime.Options{Checkpoints: checkpoint.DefaultConfig()})()
	testwait.Recv(t, online, 10*time.Second, `the agent's "online" status over TLS`)
	// At-most-once: only what is published after the subscription counts.
	// Publish until 50 arrived, from the broker's inline client.
	if !testwait.Poll(10*time.Second, func() bool {
		select {
		case <-done:
			return true
		default:
		}
		for range 10 {
			srv.Publish("in/x", []byte("hello"), false, 0)
		}
		return false
	}) {
		t.Fatalf("only %d messages arrived over TLS", got.Load())
	}
}

// TestTLSVerificationFailureIsSeen connects to a TLS broker whose
// certificate another CA signed: the failure is logged at once, naming the
// certificate, and the broker's state says it is not connected and why.
func TestTLSVerificationFailureIsSeen(t *testing.T) {
	pki, other := newPKI(t), newPKI(t)
	srv := mqtt.New(&mqtt.Options{InlineClient: true})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tracked := &trackedListener{Listener: raw}
	l := listeners.NewNet("tls", tls.NewListener(tracked, &tls.Config{Certificates: []tls.Certificate{pki.server}, MinVersion: tls.VersionTLS12}))
	if err := srv.AddListener(l); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	var log testlog.Buffer
	state := new(BrokerState)
	cfg := ClientConfig{Broker: "ssl://" + l.Address(), ClientID: "tls-wrong-ca", CAFile: other.caFile, Name: "plant", State: state,
		Logger: slog.New(slog.NewTextHandler(&log, nil))}
	c, _, err := cfg.connect("", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// mochi's Close must not meet a connection it is still taking
		// (it waits on a WaitGroup that taking one adds to): the client
		// stops retrying, no connection is taken any more, and those
		// taken, which all fail, end before the broker closes.
		c.Disconnect(0)
		raw.Close()
		testwait.For(t, 10*time.Second, "the broker done with the failed connections", func() bool { return tracked.open.Load() == 0 })
		srv.Close()
	}()
	testwait.For(t, 20*time.Second, "the failed attempt logged", func() bool { return strings.Contains(log.String(), "MQTT connect failed") })
	if got := log.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "certificate") {
		t.Fatalf("the log of a connection to a broker the CA does not vouch for:\n%s", got)
	}
	if st := state.Status(); st.Connected != 0 || !strings.Contains(st.LastError, "certificate") {
		t.Fatalf("broker state: %+v", st)
	}
}

// trackedListener counts the connections it took that are not closed
// yet.
type trackedListener struct {
	net.Listener
	open atomic.Int64
}

func (l *trackedListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.open.Add(1)
	return &trackedConn{Conn: conn, open: &l.open}, nil
}

// trackedConn is a connection a trackedListener took.
type trackedConn struct {
	net.Conn
	open   *atomic.Int64
	closed sync.Once
}

func (c *trackedConn) Close() error {
	c.closed.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}
