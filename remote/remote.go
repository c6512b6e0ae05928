package remote

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/cairn-edge/cairn/checkpoint"
)

// Config says where checkpoints are stored.
type Config struct {
	// Endpoint is the S3 API's host:port, without a scheme.
	Endpoint string
	Bucket   string
	// Prefix, if set, is prepended to every object name, followed by "/".
	Prefix string
	// AccessKey and SecretKey sign every request. They are never logged.
	AccessKey, SecretKey string
	// TLS speaks HTTPS; CAFile, if set, is a PEM file of the certificates
	// that verify the server, instead of the system's.
	TLS    bool
	CAFile string
	// Timeout bounds each request; default one minute.
	Timeout time.Duration
}

// String describes c without its credentials, so that a Config in a log
// line or an error shows no secret.
func (c Config) String() string {
	return fmt.Sprintf("endpoint=%s bucket=%s prefix=%q tls=%v", c.Endpoint, c.Bucket, c.Prefix, c.TLS)
}

// Remote is a connection to a bucket. It is safe for concurrent use.
type Remote struct {
	client  *minio.Client
	bucket  string
	prefix  string
	timeout time.Duration
}

// Open checks cfg and prepares a client; it does not reach the server.
func Open(cfg Config) (*Remote, error) {
	switch {
	case cfg.Endpoint == "" || strings.Contains(cfg.Endpoint, "://"):
		return nil, fmt.Errorf("remote endpoint %q: want host:port, without a scheme (tls chooses https)", cfg.Endpoint)
	case cfg.Bucket == "":
		return nil, errors.New("remote: no bucket")
	case cfg.CAFile != "" && !cfg.TLS:
		return nil, errors.New("remote: a CA file needs tls")
	}
	transport, err := minio.DefaultTransport(cfg.TLS)
	if err != nil {
		return nil, err
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("remote CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("remote CA file %s holds no PEM certificate", cfg.CAFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:    cfg.TLS,
		Transport: transport,
		// Few retries: a failed upload is followed by the next
		// checkpoint's, and a restore falls back or fails visibly.
		MaxRetries: 3,
	})
	if err != nil {
		return nil, fmt.Errorf("remote endpoint %q: %w", cfg.Endpoint, err)
	}
	r := &Remote{client: client, bucket: cfg.Bucket, prefix: strings.Trim(cfg.Prefix, "/"), timeout: cfg.Timeout}
	if r.timeout <= 0 {
		r.timeout = time.Minute
	}
	if r.prefix != "" {
		r.prefix += "/"
	}
	return r, nil
}

// ValidDevice reports why name cannot name a device's area, or nil.
func ValidDevice(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\") || strings.TrimSpace(name) != name {
		return fmt.Errorf("device name %q: want a non-empty name without slashes or surrounding spaces", name)
	}
	return nil
}

// ValidBucket returns why name is no bucket name S3 takes, if it is not:
// 3 to 63 lower-case letters, digits, dots and hyphens, beginning and
// ending with a letter or a digit, no two dots together, no IP address.
func ValidBucket(name string) error {
	if err := s3utils.CheckValidBucketNameStrict(name); err != nil {
		why := err.Error()
		if why != "" {
			why = strings.ToLower(why[:1]) + why[1:]
		}
		return fmt.Errorf("bucket %q: %s; S3 takes 3 to 63 lower-case letters, digits, dots and hyphens, beginning and ending with a letter or a digit", name, why)
	}
	return nil
}

// Object names; see the package documentation.

func (r *Remote) deviceRoot(device string) string { return r.prefix + device + "/" }

func (r *Remote) manifestsDir(device string) string { return r.deviceRoot(device) + "checkpoints/" }

func (r *Remote) manifestName(device string, id uint64) string {
	return fmt.Sprintf("%s%020d.json", r.manifestsDir(device), id)
}

func (r *Remote) stateDir(device string) string { return r.deviceRoot(device) + "state/" }

func (r *Remote) stateName(device string, key string) string { return r.stateDir(device) + key }

// parseManifestName returns the checkpoint id of a manifest's object name.
func (r *Remote) parseManifestName(device, name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(strings.TrimPrefix(name, r.manifestsDir(device)), ".json")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	id, err := strconv.ParseUint(digits, 10, 64)
	return id, err == nil
}

// record is a manifest as stored: its JSON and that JSON's checksum.
type record struct {
	Format   int             `json:"format"`
	CRC32C   uint32          `json:"crc32c"`
	Manifest json.RawMessage `json:"manifest"`
}

func encodeManifest(m *checkpoint.Manifest) ([]byte, error) {
	js, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return json.Marshal(record{Format: 1, CRC32C: checkpoint.Checksum(js), Manifest: js})
}

// decodeManifest checks a stored manifest; a damaged one is an error
// wrapping checkpoint.ErrCorrupt.
func decodeManifest(data []byte, id uint64) (*checkpoint.Manifest, error) {
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("%w: manifest is not JSON: %v", checkpoint.ErrCorrupt, err)
	}
	if rec.Format != 1 {
		return nil, fmt.Errorf("%w: manifest format %d is not 1", checkpoint.ErrCorrupt, rec.Format)
	}
	if sum := checkpoint.Checksum(rec.Manifest); sum != rec.CRC32C {
		return nil, fmt.Errorf("%w: manifest has checksum %08x, want %08x", checkpoint.ErrCorrupt, sum, rec.CRC32C)
	}
	m := new(checkpoint.Manifest)
	if err := json.Unmarshal(rec.Manifest, m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", checkpoint.ErrCorrupt, err)
	}
	if m.ID != id {
		return nil, fmt.Errorf("%w: manifest of checkpoint %d is stored as %d", checkpoint.ErrCorrupt, m.ID, id)
	}
	return m, nil
}

// put stores data under name. The payload is not hashed for the request
// (UNSIGNED-PAYLOAD, no Content-MD5): hashing every byte was most of the
// device's cost of an upload. TLS protects it on the way, and a restore
// checks every blob's size and CRC-32C against its handle.
func (r *Remote) put(ctx context.Context, name string, data []byte, contentType string) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	_, err := r.client.PutObject(ctx, r.bucket, name, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: contentType, DisableContentSha256: true})
	if err != nil {
		return fmt.Errorf("uploading %s: %w", name, err)
	}
	return nil
}

// errMissing is wrapped by get's error when the object does not exist.
var errMissing = errors.New("object is missing")

// get reads the object name, at most limit bytes (more is an error).
func (r *Remote) get(ctx context.Context, name string, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	obj, err := r.client.GetObject(ctx, r.bucket, name, minio.GetObjectOptions{})
	if err == nil {
		defer obj.Close()
		var data []byte
		data, err = io.ReadAll(io.LimitReader(obj, limit+1))
		if err == nil && int64(len(data)) > limit {
			return nil, fmt.Errorf("%w: %s is larger than %d bytes", checkpoint.ErrCorrupt, name, limit)
		}
		if err == nil {
			return data, nil
		}
	}
	if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
		return nil, fmt.Errorf("%w: %s: %w", checkpoint.ErrCorrupt, name, errMissing)
	}
	return nil, fmt.Errorf("reading %s: %w", name, err)
}

// list returns the names of the objects under dir.
func (r *Remote) list(ctx context.Context, dir string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var names []string
	for obj := range r.client.ListObjects(ctx, r.bucket, minio.ListObjectsOptions{Prefix: dir, Recursive: true}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("listing %s: %w", dir, obj.Err)
		}
		names = append(names, obj.Key)
	}
	return names, nil
}

func (r *Remote) remove(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if err := r.client.RemoveObject(ctx, r.bucket, name, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	return nil
}
