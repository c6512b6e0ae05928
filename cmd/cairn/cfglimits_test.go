package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// secretAt marks, in a pipeline of TestSecretFilesExposed, the value that
// names the secret file: where its error must be.
const secretAt = "SECRET_FILE"

// TestSecretFilesExposed writes, for each setting that names a file
// holding a secret, a pipeline whose file its group or other users may
// read: `cairn validate` and `cairn run` refuse it alike (exit status 2),
// at the setting's line and column, with one message, and show neither
// the secret nor start anything; the same file at 0600 is valid.
func TestSecretFilesExposed(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	const agent = "agent:\n  data_dir: data\n"
	const local = "brokers:\n  local:\n    embedded: true\n    listen: 127.0.0.1:%[1]d\n"
	const source = "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"
	for _, c := range []struct{ name, file string }{
		{"api_token_file", "agent:\n  data_dir: data\n  api: 127.0.0.1:%[2]d\n  api_token_file: " + secretAt + "\n" + local + source},
		{"password_file", agent + local + "  plant:\n    url: tcp://127.0.0.1:1\n    username: gw\n    password_file: " + secretAt + "\n" + source},
		{"users[].password_file", agent + local + "    users:\n      - {username: dev, password_file: " + secretAt + "}\n" + source},
		{"key_file", agent + local + "  plant:\n    url: ssl://127.0.0.1:1\n    cert_file: client.pem\n    key_file: " + secretAt + "\n" + source},
		{"access_key_file", agent + local + source + "remote:\n  endpoint: 127.0.0.1:1\n  bucket: cairn\n  access_key_file: " + secretAt + "\n  secret_key: s\n"},
		{"secret_key_file", agent + local + source + "remote:\n  endpoint: 127.0.0.1:1\n  bucket: cairn\n  access_key: a\n  secret_key_file: " + secretAt + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			text := fmt.Sprintf(c.file, freePort(t), freePort(t))
			before, _, _ := strings.Cut(text, secretAt)
			line, col := strings.Count(before, "\n")+1, len(before)-strings.LastIndex(before, "\n")
			file, secretFile := filepath.Join(dir, "pipeline.yaml"), filepath.Join(dir, "secret")
			const secret = "hunter2-b0a7c1e9d2f3a4b5c6d7e8f9"
			writeFile(t, file, strings.Replace(text, secretAt, "secret", 1), 0o600)
			writeFile(t, filepath.Join(dir, "client.pem"), "a certificate\n", 0o644)
			for _, mode := range []os.FileMode{0o644, 0o640, 0o604} {
				writeFile(t, secretFile, secret+"\n", mode)
				want := fmt.Sprintf("pipeline.yaml:%d:%d: ", line, col)
				wantMsg := fmt.Sprintf(" secret (%s, beside the pipeline file): may be read by its group or by other users (mode %v): chmod go-r it\n", secretFile, mode)
				for _, cmd := range []string{"validate", "run"} {
					out, code := runCairn(t, bin, cmd, file)
					if code != 2 || !strings.Contains(out, want) || !strings.Contains(out, wantMsg) || strings.Contains(out, secret) || strings.Contains(out, "listening") {
						t.Fatalf("cairn %s with the secret file at %v: exit %d, want 2 and %q...%q, no secret:\n%s", cmd, mode, code, want, wantMsg, out)
					}
				}
			}
			writeFile(t, secretFile, secret+"\n", 0o600)
			if out, code := runCairn(t, bin, "validate", file); code != 0 || strings.Contains(out, secret) {
				t.Fatalf("cairn validate with the secret file at 0600: exit %d\n%s", code, out)
			}
		})
	}
}

// TestPipelineFileTooLarge: a pipeline file over config.MaxFileBytes is
// refused by `cairn validate` and `cairn run` (exit status 2) at the line
// and column of its first byte beyond the limit, having read no more: a
// 50 MB client_id (once 3.8 s and 710 MB to find valid) and 4 million
// topics (once 23 s and 2.8 GB) cost the command under 64 MB. A file of
// exactly the limit is valid.
func TestPipelineFileTooLarge(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	t.Run("50 MB client_id", func(t *testing.T) {
		head := "brokers:\n  b:\n    url: tcp://b:1883\n    client_id: "
		file := writeLarge(t, head, "a", 50<<20, "\nsources:\n  - id: s\n    broker: b\n    topics: [x]\n")
		refusedAsTooLarge(t, bin, file, 4, config.MaxFileBytes-strings.LastIndex(head, "\n"))
	})
	t.Run("4 million topics", func(t *testing.T) {
		head := "brokers:\n  b: {url: 'tcp://b:1883'}\nsources:\n  - id: s\n    broker: b\n    topics:\n"
		file := filepath.Join(t.TempDir(), "pipeline.yaml")
		f, err := os.Create(file)
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		w.WriteString(head)
		n, line, col := len(head), 0, 0
		for i := range 4_000_000 {
			item := fmt.Sprintf("      - t/%d/x\n", i)
			if n <= config.MaxFileBytes && n+len(item) > config.MaxFileBytes {
				line, col = strings.Count(head, "\n")+i+1, config.MaxFileBytes-n+1
			}
			w.WriteString(item)
			n += len(item)
		}
		if err := errors.Join(w.Flush(), f.Close()); err != nil {
			t.Fatal(err)
		}
		refusedAsTooLarge(t, bin, file, line, col)
	})
	t.Run("at the limit", func(t *testing.T) {
		text := "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n# "
		file := filepath.Join(t.TempDir(), "pipeline.yaml")
		writeFile(t, file, text+strings.Repeat("x", config.MaxFileBytes-len(text)), 0o600)
		if out, code := runCairn(t, bin, "validate", file); code != 0 {
			t.Fatalf("a file of %d bytes: exit %d\n%s", config.MaxFileBytes, code, out)
		}
		writeFile(t, file, text+strings.Repeat("x", config.MaxFileBytes-len(text)+1), 0o600)
		refusedAsTooLarge(t, bin, file, 4, config.MaxFileBytes-strings.LastIndex(text, "\n"))
	})
}

// TestPipelineStringTooLong: a string over 65,535 bytes, MQTT's limit, is
// refused at its position, written in the file or from the environment,
// which it does not show; one of 65,535 is valid.
func TestPipelineStringTooLong(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	file := filepath.Join(t.TempDir(), "pipeline.yaml")
	pipeline := func(clientID string) string {
		return "brokers:\n  b:\n    url: tcp://b:1883\n    username: ${LONG_USER}\n    client_id: " + clientID + "\nsources:\n  - id: s\n    broker: b\n    topics: [x]\n"
	}
	t.Setenv("LONG_USER", "u")
	writeFile(t, file, pipeline(strings.Repeat("a", 65_535)), 0o600)
	if out, code := runCairn(t, bin, "validate", file); code != 0 {
		t.Fatalf("a client_id of 65,535 bytes: exit %d\n%s", code, out)
	}
	writeFile(t, file, pipeline(strings.Repeat("a", 65_536)), 0o600)
	t.Setenv("LONG_USER", strings.Repeat("hunter2", 10_000))
	out, code := runCairn(t, bin, "validate", file)
	for _, want := range []string{
		"pipeline.yaml:4:15: a string of 70,000 bytes, more than 65,535",
		"pipeline.yaml:5:16: a string of 65,536 bytes, more than 65,535",
	} {
		if code != 2 || !strings.Contains(out, want) || strings.Contains(out, "hunter2") || len(out) > 4096 {
			t.Fatalf("a username of 70,000 bytes and a client_id of 65,536: exit %d, want 2 and %q:\n%.4096s", code, want, out)
		}
	}
}

// refusedAsTooLarge runs `cairn validate` and `cairn run` on the file, which
// must refuse it as over config.MaxFileBytes at line and col, each in
// under 64 MB.
func refusedAsTooLarge(t *testing.T, bin, file string, line, col int) {
	t.Helper()
	want := fmt.Sprintf("%s:%d:%d: the file goes on beyond 262,144 bytes (256 KiB), the most a pipeline file may hold\n", file, line, col)
	for _, cmd := range []string{"validate", "run"} {
		out, code, rss := cairntest.RunMeasured(t, exec.Command(bin, cmd, "-c", file))
		if code != 2 || string(out) != want {
			t.Fatalf("cairn %s: exit status %d, want 2 and %q:\n%.2000s", cmd, code, want, out)
		}
		if rss > 64<<10 { // KiB
			t.Errorf("cairn %s held %d KiB, over 64 MiB", cmd, rss)
		}
		t.Logf("cairn %s held %d KiB at most", cmd, rss)
	}
}

// writeLarge writes head, fill repeated to n bytes, and tail as a pipeline
// file in a directory of the test's, without holding it in memory.
func writeLarge(t *testing.T, head, fill string, n int, tail string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pipeline.yaml")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	chunk := strings.Repeat(fill, (1<<20)/len(fill))
	w := bufio.NewWriter(f)
	w.WriteString(head)
	for written := 0; written < n; written += len(chunk) {
		w.WriteString(chunk[:min(len(chunk), n-written)])
	}
	w.WriteString(tail)
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}
	return file
}

// writeFile writes text to path with mode, whatever the umask.
func writeFile(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// runCairn runs `cairn cmd -c file`, at most a minute (an agent that
// started when it should have refused is then killed), and returns its
// output and exit status.
func runCairn(t *testing.T, bin, cmd, file string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, cmd, "-c", file).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("cairn %s: %v", cmd, err)
	return "", 0
}
