package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNamedFiles: Load finds the files a pipeline names that cannot be
// read, each at its value, and resolves relative ones beside the pipeline
// file, wherever the command runs.
func TestNamedFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("secrets/mqtt.pass", "hunter2\n")
	ca := write("tls/ca.pem", "not checked\n")
	write("secrets/token", "t0ken\n")
	write("secrets/s3.access", "AKIA\n")
	write("secrets/s3.secret", "sEcReT\n")
	const pipeline = `agent:
  api: 127.0.0.1:0
  api_token_file: secrets/token
brokers:
  plant:
    url: ssl://b:8883
    password_file: secrets/mqtt.pass
    ca_file: %s
sources:
  - id: s
    simulator: {devices: 1, rate: 1}
remote:
  endpoint: s3:9000
  bucket: bkt
  access_key_file: ./secrets/s3.access
  secret_key_file: secrets/s3.secret
`
	good := write("good.yaml", strings.Replace(pipeline, "%s", ca, 1))
	t.Chdir(t.TempDir()) // the agent's working directory is not the file's
	c, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	for got, want := range map[string]string{
		c.Agent.APITokenFile:            "secrets/token",
		c.Brokers["plant"].PasswordFile: "secrets/mqtt.pass",
		c.Brokers["plant"].CAFile:       "tls/ca.pem",
		c.Remote.AccessKeyFile:          "secrets/s3.access",
		c.Remote.SecretKeyFile:          "secrets/s3.secret",
		c.Agent.DataDir:                 "data",
	} {
		if got != filepath.Join(dir, want) {
			t.Errorf("%s resolved to %s, want it beside the pipeline file", want, got)
		}
	}

	bad := write("bad.yaml", strings.NewReplacer("secrets/token", "secrets/tokn", "password_file: secrets/mqtt.pass", "password_file: secrets",
		"%s", filepath.Join(dir, "tls/missing.pem"), "./secrets/s3.access", "${CAIRN_TEST_UNSET_DIR}/s3.access").Replace(pipeline))
	_, err = Load(bad)
	got := err.Error()
	for _, want := range []string{
		bad + `:3:19: agent.api_token_file secrets/tokn (` + filepath.Join(dir, "secrets/tokn") + `, beside the pipeline file): no such file or directory`,
		bad + `:7:20: broker "plant": password_file secrets (` + filepath.Join(dir, "secrets") + `, beside the pipeline file): is a directory, not a file`,
		bad + `:8:14: broker "plant": ca_file ` + filepath.Join(dir, "tls/missing.pem") + `: no such file or directory`,
		bad + `:15:20: environment variable CAIRN_TEST_UNSET_DIR is not set`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q", want)
		}
	}
	if n := strings.Count(got, "\n") + 1; n != 4 {
		t.Errorf("%d errors, want 4 (none for /s3.access, whose name has an unset variable)", n)
	}
	for _, secret := range []string{"hunter2", "t0ken", "AKIA", "sEcReT"} {
		if strings.Contains(got, secret) {
			t.Errorf("errors show the secret %q", secret)
		}
	}
	if t.Failed() {
		t.Logf("all errors:\n%s", got)
	}

	if os.Geteuid() != 0 { // root reads any file
		locked := write("secrets/locked", "x")
		os.Chmod(locked, 0)
		_, err := Load(write("locked.yaml", "agent:\n  api_token_file: secrets/locked\nsources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\n"))
		if want := "locked.yaml:2:19: agent.api_token_file secrets/locked (" + locked + ", beside the pipeline file): permission denied"; err == nil || err.Error() != want {
			t.Errorf("an unreadable file: %v, want %s", err, want)
		}
	}
}
