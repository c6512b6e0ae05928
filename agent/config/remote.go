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
	// The S3 API's host:port, without a scheme or a path:
	// `s3.example.net:443`.
	Endpoint string `yaml:"endpoint,required"`
	// The bucket the checkpoints go to: a name S3 takes, 3 to 63
	// lower-case letters, digits, dots and hyphens, beginning and ending
	// with a letter or a digit.
	Bucket string `yaml:"bucket,required"`
	// A prefix of the objects' names, which are
	// `<prefix>/<device>/checkpoints/<id>.json` and
	// `<prefix>/<device>/state/...`.
	Prefix string `yaml:"prefix"`
	// This agent's area in the bucket, a name without slashes or
	// surrounding spaces, unique per agent. Empty: the host name.
	Device string `yaml:"device"`
	// The device whose checkpoints a restore reads, if not this one: a
	// replacement device names the one it replaces. Uploads go to
	// `device` in any case.
	RestoreFromDevice string `yaml:"restore_from_device"`
	// The access key, such as `${S3_ACCESS_KEY}`; or `access_key_file`,
	// one of them.
	AccessKey string `yaml:"access_key"`
	// A file holding the access key (line breaks at its end are not part
	// of it).
	AccessKeyFile string `yaml:"access_key_file"`
	// The secret key, such as `${S3_SECRET_KEY}`; or `secret_key_file`,
	// one of them.
	SecretKey string `yaml:"secret_key"`
	// A file holding the secret key (line breaks at its end are not part
	// of it).
	SecretKeyFile string `yaml:"secret_key_file"`
	// Whether requests go over HTTPS. `false` sends the signed requests
	// and every checkpoint in the clear, for a store on the same host or
	// on a network you trust, and is warned of at start.
	TLSSetting *bool `yaml:"tls" default:"true"`
	// TLS is whether requests go over HTTPS: TLSSetting, true unless the
	// file says false.
	TLS bool `yaml:"-"`
	// A file of PEM certificates of the authorities that vouch for the
	// storage's; default the system's. Needs `tls`.
	CAFile string `yaml:"ca_file"`
	// How many uploaded checkpoints are kept, the newest, with the
	// objects they reference; at least 1. Default: `checkpoints.retained`.
	Retained int `yaml:"retained"`
	// The longest a request to the storage may take.
	Timeout time.Duration `yaml:"timeout" default:"1m"`
}

// remote checks the remote section and sets TLS; applyDefaults filled in
// its defaults, except the device's (the host name, which the agent
// knows).
func (v *validator) remote() {
	r := v.c.Remote
	if r == nil {
		return
	}
	r.TLS = *r.TLSSetting
	if strings.Contains(r.Endpoint, "://") || strings.Contains(r.Endpoint, "/") {
		v.errorf(v.c.at(&r.Endpoint, r.Pos), "remote: endpoint %s: want host:port, without a scheme or a path (tls: true for https)", v.c.show(&r.Endpoint))
	}
	if err := remote.ValidBucket(r.Bucket); r.Bucket != "" && err != nil {
		v.errorf(v.c.at(&r.Bucket, r.Pos), "remote: %s", v.c.reason(&r.Bucket, err,
			"bucket %s is no name S3 takes: 3 to 63 lower-case letters, digits, dots and hyphens, beginning and ending with a letter or a digit"))
	}
	for _, f := range []struct {
		name  string
		value *string
	}{{"device", &r.Device}, {"restore_from_device", &r.RestoreFromDevice}} {
		if err := remote.ValidDevice(*f.value); *f.value != "" && err != nil {
			v.errorf(v.c.at(f.value, r.Pos), "remote: %s: %s", f.name, v.c.reason(f.value, err, "device name %s: want a non-empty name without slashes or surrounding spaces"))
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
		v.errorf(v.c.at(&r.Retained, r.Pos), "remote: retained %s keeps no upload to restore from: write 1 or more (default: checkpoints.retained)", v.c.show(&r.Retained))
	}
	if r.Timeout <= 0 {
		v.errorf(v.c.at(&r.Timeout, r.Pos), "remote: timeout %s: a request must be given some time, 1s or more (1m is the default)", v.c.show(&r.Timeout))
	}
}
