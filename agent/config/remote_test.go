package config

import (
	"strings"
	"testing"
	"time"
)

const minimal = "sources:\n  - id: s\n    simulator: {devices: 1, rate: 1}\ncheckpoints:\n  retained: 5\n"

func TestRemoteSection(t *testing.T) {
	c, errs := Parse("r.yaml", []byte(minimal+`remote:
  endpoint: s3.example:9000
  bucket: cairn
  prefix: fleet-a
  restore_from_device: gw-3
  access_key: ${S3_ACCESS}
  secret_key_file: /etc/cairn/s3.secret
  tls: true
  ca_file: /etc/cairn/ca.pem
`), env(map[string]string{"S3_ACCESS": "AKIA1"}))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	r := c.Remote
	if r == nil || r.Endpoint != "s3.example:9000" || r.AccessKey != "AKIA1" || r.SecretKeyFile != "/etc/cairn/s3.secret" ||
		r.RestoreFromDevice != "gw-3" || r.Device != "" || !r.TLS || r.Retained != 5 || r.Timeout != time.Minute {
		t.Fatalf("remote = %+v", r)
	}
	for tls, want := range map[string]bool{"": true, "  tls: true\n": true, "  tls: false\n": false} {
		c, errs := Parse("r.yaml", []byte(minimal+"remote:\n  endpoint: s3:9000\n  bucket: bkt\n  access_key: a\n  secret_key: s\n"+tls), env(nil))
		if len(errs) > 0 || c.Remote.TLS != want {
			t.Errorf("remote with %q: TLS %v (%v), want %v: HTTPS unless the file says otherwise", tls, c.Remote.TLS, errs, want)
		}
	}
	c, errs = Parse("off.yaml", []byte(minimal), env(nil))
	if len(errs) > 0 || c.Remote != nil {
		t.Fatalf("without a remote section: %+v, %v", c.Remote, errs)
	}
}

func TestRemoteRefusals(t *testing.T) {
	for src, want := range map[string]string{
		"remote:\n  bucket: bkt\n  access_key: a\n  secret_key: s\n":                                                  `r.yaml:7:3: missing required field "endpoint"`,
		"remote:\n  endpoint: https://s3:9000\n  bucket: bkt\n  access_key: a\n  secret_key: s\n":                     "r.yaml:7:13: remote: endpoint \"https://s3:9000\": want host:port, without a scheme",
		"remote:\n  endpoint: s3:9000\n  bucket: bkt\n  secret_key: s\n":                                              "r.yaml:7:3: remote: needs access_key (for example ${S3_ACCESS_KEY}) or access_key_file",
		"remote:\n  endpoint: s3:9000\n  bucket: bkt\n  access_key: a\n  secret_key: s\n  secret_key_file: f\n":       "r.yaml:7:3: remote: secret_key or secret_key_file, not both",
		"remote:\n  endpoint: s3:9000\n  bucket: bkt\n  access_key: a\n  secret_key: s\n  ca_file: c\n  tls: false\n": "r.yaml:7:3: remote: ca_file needs TLS, which tls: false turns off",
		"remote:\n  endpoint: s3:9000\n  bucket: b\n  access_key: a\n  secret_key: s\n":                               `r.yaml:8:11: remote: bucket "b": bucket name cannot be shorter than 3 characters; S3 takes 3 to 63 lower-case letters`,
		"remote:\n  endpoint: s3:9000\n  bucket: My_Bucket\n  access_key: a\n  secret_key: s\n":                       `r.yaml:8:11: remote: bucket "My_Bucket": bucket name contains invalid characters`,
		"remote:\n  endpoint: s3:9000\n  bucket: bkt\n  access_key: a\n  secret_key: s\n  device: a/b\n":              "r.yaml:11:11: remote: device: device name \"a/b\"",
		"remote:\n  endpoint: s3:9000\n  bucket: bkt\n  access_key: a\n  secret_key: s\n  retained: -1\n":             "r.yaml:11:13: remote: retained -1 keeps no upload to restore from",
		"remote:\n  endpoint: s3:9000\n  bucket: bkt\n  access_key: a\n  secret_key: ${NOPE}\n":                       "r.yaml:10:15: environment variable NOPE is not set",
		"remote:\n  endpoint: s3:9000\n  bucket: bkt\n  access_key: a\n  secret_key: s\n  tls: maybe\n":               "r.yaml:11:8: want true or false",
		"remote:\n  endpoint: s3:9000\n  bucket: bkt\n  access_key: a\n  secret_key: s\n  region: x\n":                `r.yaml:11:3: unknown field "region"`,
	} {
		_, errs := Parse("r.yaml", []byte(minimal+src), env(nil))
		if len(errs) == 0 || !strings.Contains(errs.Error(), want) {
			t.Errorf("%s\ngave %v\nwant %s", src, errs, want)
		}
	}
	// A bucket from the environment is shown as the file writes it.
	_, errs := Parse("r.yaml", []byte(minimal+"remote:\n  endpoint: s3:9000\n  bucket: ${BUCKET}\n  access_key: a\n  secret_key: s\n"), env(map[string]string{"BUCKET": "Secret_Name"}))
	if want := `r.yaml:8:11: remote: bucket "${BUCKET}" (from the environment) is no name S3 takes`; len(errs) == 0 || !strings.Contains(errs.Error(), want) || strings.Contains(errs.Error(), "Secret") {
		t.Errorf("a bucket from the environment: %v\nwant %s", errs, want)
	}
}
