// Package s3test starts a real S3-compatible server for tests: versitygw
// with its posix backend on a temporary directory, on a free loopback port.
//
// The binary is found as $CAIRN_VERSITYGW, as versitygw on the PATH, or as
// ~/.cache/cairn/bin/versitygw-v1.8.0, where .ci/run builds it. Without it
// a test is skipped, unless CAIRN_REQUIRE_S3 is set (as in CI): then its
// absence is a failure. To build it by hand:
//
//	GOBIN=/tmp/vgw go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
//	mkdir -p ~/.cache/cairn/bin && mv /tmp/vgw/versitygw ~/.cache/cairn/bin/versitygw-v1.8.0
package s3test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/cairn-edge/cairn/internal/testing/loopback"
	"github.com/cairn-edge/cairn/internal/testing/needs"
	"github.com/cairn-edge/cairn/internal/testing/testlog"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// Credentials of every test server. The secret is long and odd enough that
// a test can search logs for it.
const (
	AccessKey = "cairn-test-access"
	SecretKey = "cairn-test-secret-7f3a9c1e5b"
)

// Server is a running versitygw.
type Server struct {
	// Endpoint is host:port of its S3 API.
	Endpoint string
	// Client talks to it with the test credentials.
	Client *minio.Client
	cmd    *exec.Cmd
	out    *testlog.Buffer // the server's output, for failure messages
}

// Binary returns the path of versitygw, or "" when there is none.
func Binary() string {
	if p := os.Getenv("CAIRN_VERSITYGW"); p != "" {
		return p
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache", "cairn", "bin", "versitygw-v1.8.0")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// Start starts a server that lives as long as t, or skips t when versitygw
// is missing and not required.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, "", false)
}

// StartBackground starts a server at the lowest CPU priority (nice 19), so
// that it takes only CPU time nothing else wants, as if it ran on another
// machine: for benchmarks of what uploading costs the device.
func StartBackground(t testing.TB) *Server {
	t.Helper()
	return start(t, "", true)
}

// StartTLS starts a server that speaks HTTPS with a self-signed certificate
// for 127.0.0.1, and returns it with the certificate's PEM file, which
// verifies it.
func StartTLS(t testing.TB) (*Server, string) {
	t.Helper()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "s3test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile := filepath.Join(dir, "cert.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	return start(t, dir, false), certFile
}

// start starts versitygw, with the certificate and key in tlsDir if set,
// and at nice 19 if background.
func start(t testing.TB, tlsDir string, background bool) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		needs.Missing(t, "versitygw", "set CAIRN_VERSITYGW or install it (see internal/testing/s3test)", "CAIRN_REQUIRE_S3")
	}
	dir := t.TempDir()
	port := freePort(t)
	s := &Server{Endpoint: fmt.Sprintf("127.0.0.1:%d", port), out: new(testlog.Buffer)}
	args := []string{"--port", s.Endpoint, "--access", AccessKey, "--secret", SecretKey, "--quiet"}
	opts := &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, "")}
	if tlsDir != "" {
		args = append(args, "--cert", filepath.Join(tlsDir, "cert.pem"), "--key", filepath.Join(tlsDir, "key.pem"))
		pool := x509.NewCertPool()
		certPEM, err := os.ReadFile(filepath.Join(tlsDir, "cert.pem"))
		if err != nil || !pool.AppendCertsFromPEM(certPEM) {
			t.Fatalf("test certificate: %v", err)
		}
		opts.Secure = true
		opts.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	}
	s.cmd = exec.Command(bin, append(args, "posix", dir)...)
	if background {
		// nice execs versitygw in its own process: the pid stays.
		s.cmd = exec.Command("nice", append([]string{"-n", "19", bin}, append(args, "posix", dir)...)...)
	}
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGCONT) // if a test paused it
		s.cmd.Process.Kill()
		s.cmd.Wait()
	})
	var err error
	s.Client, err = minio.New(s.Endpoint, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !testwait.Poll(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = s.Client.ListBuckets(ctx)
		return err == nil
	}) {
		t.Fatalf("versitygw did not answer on %s: %v\n%s", s.Endpoint, err, s.out.String())
	}
	return s
}

// CPUTime is the CPU time the server has used so far.
func (s *Server) CPUTime(t testing.TB) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which may hold spaces): state is the
	// first, utime and stime the 12th and 13th, in clock ticks (1/100 s).
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// Bucket creates a bucket.
func (s *Server) Bucket(t testing.TB, name string) {
	t.Helper()
	if err := s.Client.MakeBucket(context.Background(), name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("creating bucket %s: %v", name, err)
	}
}

// Pause stops the server's process (SIGSTOP): connections are accepted by
// the kernel and never answered, like a storage that hangs. Resume lets it
// go on.
func (s *Server) Pause(t testing.TB) {
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

// Resume undoes Pause.
func (s *Server) Resume(t testing.TB) {
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// Keys lists the object names under prefix in bucket.
func (s *Server) Keys(t testing.TB, bucket, prefix string) []string {
	t.Helper()
	var keys []string
	for obj := range s.Client.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			t.Fatalf("listing %s/%s: %v", bucket, prefix, obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

// Get reads an object.
func (s *Server) Get(t testing.TB, bucket, key string) []byte {
	t.Helper()
	obj, err := s.Client.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("reading %s/%s: %v", bucket, key, err)
	}
	return data
}

// Put writes an object.
func (s *Server) Put(t testing.TB, bucket, key string, data []byte) {
	t.Helper()
	if _, err := s.Client.PutObject(context.Background(), bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("writing %s/%s: %v", bucket, key, err)
	}
}

// FlipBit flips one bit in the middle of an object, through the S3 API.
func (s *Server) FlipBit(t testing.TB, bucket, key string) {
	t.Helper()
	data := s.Get(t, bucket, key)
	if len(data) == 0 {
		t.Fatalf("%s/%s is empty: no bit to flip", bucket, key)
	}
	data[len(data)/2] ^= 0x10
	s.Put(t, bucket, key, data)
}

// Throttle starts a TCP proxy to the server that passes at most
// bytesPerSecond in each direction of each connection, and returns its
// host:port. It stops with t.
func (s *Server) Throttle(t testing.TB, bytesPerSecond int) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	slowCopy := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, max(1, bytesPerSecond/20))
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
				time.Sleep(time.Duration(n) * time.Second / time.Duration(bytesPerSecond))
			}
			if err != nil {
				break
			}
		}
		dst.Close()
		src.Close()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", s.Endpoint)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Add(2)
			go slowCopy(up, c)
			go slowCopy(c, up)
		}
	}()
	return l.Addr().String()
}

func freePort(t testing.TB) int {
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
