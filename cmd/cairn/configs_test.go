package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// readEnvFile returns the NAME=value lines of an env file such as
// configs/gateway.env, without its comments and blank lines.
func readEnvFile(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var env []string
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		line := strings.TrimSpace(lines.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(line) {
			t.Fatalf("%s: %q is not NAME=value", path, line)
		}
		env = append(env, line)
	}
	if err := lines.Err(); err != nil {
		t.Fatal(err)
	}
	return env
}

// TestConfigsValidate runs `cairn validate` on every file in configs/ as a
// user of a fresh clone would, with the environment of its env file
// (configs/NAME.env) where it has one: each is valid, but for the files a
// gateway keeps beside its pipeline (secrets, certificates), which a clone
// has not; validate names each of those at its line, exit status 2, and
// with them in place the file is valid.
func TestConfigsValidate(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	files, err := filepath.Glob(filepath.Join("..", "..", "configs", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("configs/*.yaml: %v, %v", files, err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			var env []string
			if envFile := strings.TrimSuffix(file, ".yaml") + ".env"; fileExists(envFile) {
				env = readEnvFile(t, envFile)
			}
			c, errs := config.Parse(file, mustRead(t, file), func(v string) (string, bool) {
				for _, kv := range env {
					if value, ok := strings.CutPrefix(kv, v+"="); ok {
						return value, true
					}
				}
				return "", false
			})
			if len(errs) > 0 {
				t.Fatalf("with its env file:\n%v", errs)
			}
			// The files it names (resolved beside it) that a clone lacks.
			var missing []string
			for _, b := range c.Brokers {
				for _, f := range []string{b.PasswordFile, b.CAFile, b.CertFile, b.KeyFile} {
					if f != "" && !fileExists(filepath.Join(filepath.Dir(file), f)) {
						missing = append(missing, f)
					}
				}
			}
			code, stdout, stderr := validateWith(t, bin, env, file)
			if len(missing) == 0 {
				if code != 0 || stdout != file+": valid\n" {
					t.Fatalf("cairn validate: exit %d\n%s%s", code, stdout, stderr)
				}
				return
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if code != 2 || len(lines) != len(missing) {
				t.Fatalf("cairn validate: exit %d, %d lines; want 2 and one line for each of %v:\n%s", code, len(lines), missing, stderr)
			}
			for i, line := range lines {
				if !regexp.MustCompile(`^` + regexp.QuoteMeta(file) + `:\d+:\d+: broker "\w+": \w+_file ` + regexp.QuoteMeta(missing[i]) + ` \(.*, beside the pipeline file\): no such file or directory$`).MatchString(line) {
					t.Errorf("line %d: %q, want %s missing at its line", i+1, line, missing[i])
				}
			}
			// With the files in place (a secret readable by its owner
			// alone), as on a gateway, the same file is valid.
			dir := t.TempDir()
			copied := filepath.Join(dir, filepath.Base(file))
			if err := os.WriteFile(copied, mustRead(t, file), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, f := range missing {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("placeholder\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if code, stdout, stderr := validateWith(t, bin, env, copied); code != 0 || stdout != copied+": valid\n" {
				t.Fatalf("cairn validate with its files beside it: exit %d\n%s%s", code, stdout, stderr)
			}
		})
	}
}

// TestGatewayEnvironment: configs/gateway.yaml with configs/gateway.env,
// the environment the README's install writes to /etc/cairn/env, names
// the gateway gw-0042 in its client id and topics, not gw-gw-0042.
func TestGatewayEnvironment(t *testing.T) {
	env := readEnvFile(t, filepath.Join("..", "..", "configs", "gateway.env"))
	readme := string(mustRead(t, filepath.Join("..", "..", "README.md")))
	if want := "printf '" + strings.Join(env, `\n`) + `\n' | sudo tee /etc/cairn/env`; !strings.Contains(readme, want) {
		t.Errorf("the README's install does not write configs/gateway.env's environment: want %q", want)
	}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
	c, errs := config.Parse("gateway.yaml", mustRead(t, filepath.Join("..", "..", "configs", "gateway.yaml")), os.LookupEnv)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	b := c.Brokers["plant"]
	if b.ClientID != "gw-0042" || b.StatusTopic != "gateways/gw-0042/status" || c.Sinks[0].Topic != "cairn/gw-0042/avg/{key}" {
		t.Errorf("client id %q, status topic %q, sink topic %q: want gw-0042 in each, once", b.ClientID, b.StatusTopic, c.Sinks[0].Topic)
	}
}

// validateWith runs `cairn validate -c file` with env added to the
// test's environment.
func validateWith(t *testing.T, bin string, env []string, file string) (code int, stdout, stderr string) {
	t.Helper()
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
	return cairntest.Run(t, bin, "validate", "-c", file)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
