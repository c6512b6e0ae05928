package config

import (
	"strings"
	"time"

	"github.com/cairn-edge/cairn/remote"
)

// Remote is the optional upload of completed checkpoints to S3-compatible
// storage, and the restore from there when the local store has nothing
// that verifies. Secrets come from the environment (${VAR}) or from files;
// they are never logged.
type Remote struct {
	Pos
	// Endpoint is the S3 API's host:port, without a scheme.
	Endpoint string `yaml:"endpoint,required"`
	Bucket   string `yaml:"bucket,required"`
	Prefix   string `yaml:"prefix"`
	// Device names this agent's area in the bucket; default the host name.
	Device string `yaml:"device"`
	// RestoreFromDevice, if set, is the device whose checkpoints a restore
	// reads: a replacement device names the one it replaces. Uploads go
	// to Device in any case.
	RestoreFromDevice string `yaml:"restore_from_device"`
	AccessKey         string `yaml:"access_key"`
	AccessKeyFile     string `yaml:"access_key_file"`
	SecretKey         string `yaml:"secret_key"`
	SecretKeyFile     string `yaml:"secret_key_file"`
	// TLSSetting is the file's `tls`; TLS is what it comes to: HTTPS
	// unless the file says `tls: false`, which sends the credentials'
	// signatures and every checkpoint in the clear (a store on the same
	// host or a network you trust only).
	TLSSetting *bool  `yaml:"tls"`
	TLS        bool   `yaml:"-"`
	CAFile     string `yaml:"ca_file"`
	// Retained is how many uploaded checkpoints are kept; default
	// checkpoints.retained.
	Retained int `yaml:"retained"`
	// Timeout bounds each request to the storage; default 1m.
	Timeout time.Duration `yaml:"timeout"`
}

// remote checks the remote section and fills in its defaults, except the
// device's (the host name, which the agent knows).
func (v *validator) remote() {
	r := v.c.Remote
	if r == nil {
		return
	}
	if r.Retained == 0 {
		r.Retained = v.c.Checkpoints.Retained
	}
	if r.Timeout == 0 {
		r.Timeout = time.Minute
	}
	r.TLS = r.TLSSetting == nil || *r.TLSSetting
	if strings.Contains(r.Endpoint, "://") || strings.Contains(r.Endpoint, "/") {
		v.errorf(r.Pos, "remote: endpoint %s: want host:port, without a scheme or a path (tls: true for https)", v.c.show(&r.Endpoint))
	}
	for _, f := range []struct {
		name  string
		value *string
	}{{"device", &r.Device}, {"restore_from_device", &r.RestoreFromDevice}} {
		if err := remote.ValidDevice(*f.value); *f.value != "" && err != nil {
			v.errorf(r.Pos, "remote: %s: %s", f.name, v.c.reason(f.value, err, "device name %s: want a non-empty name without slashes or surrounding spaces"))
		}
	}
	secret := func(field, value, file string) {
		switch {
		case value != "" && file != "":
			v.errorf(r.Pos, "remote: %s or %s_file, not both", field, field)
		case value == "" && file == "":
			v.errorf(r.Pos, "remote: needs %s (for example ${S3_%s}) or %s_file", field, strings.ToUpper(field), field)
		}
	}
	secret("access_key", r.AccessKey, r.AccessKeyFile)
	secret("secret_key", r.SecretKey, r.SecretKeyFile)
	if r.CAFile != "" && !r.TLS {
		v.errorf(r.Pos, "remote: ca_file needs TLS, which tls: false turns off")
	}
	if r.Retained < 1 {
		v.errorf(r.Pos, "remote: retained must be positive")
	}
}
