package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/localrecovery"
	"github.com/cairn-edge/cairn/remote"
)

// remoteSide is the agent's use of remote storage: the uploader of its own
// checkpoints, its own area (whose ids a device that lost its disk must
// continue above) and the area a restore reads.
type remoteSide struct {
	uploads *remote.Uploader
	own     *remote.Device
	restore *remote.Device
}

// openRemote starts uploading store's checkpoints as c says; nil when c
// is nil (remote storage is off).
func openRemote(c *config.Remote, store checkpoint.Store, log *slog.Logger) (*remoteSide, error) {
	if c == nil {
		return nil, nil
	}
	r, cfg, own, err := openDevice(c, log)
	if err != nil {
		return nil, err
	}
	device := own.Name()
	from := own
	if c.RestoreFromDevice != "" {
		if from, err = r.Device(c.RestoreFromDevice, log); err != nil {
			return nil, err
		}
	}
	uploads, err := remote.NewUploader(r, store, remote.UploadOptions{Device: device, Retain: c.Retained, Logger: log})
	if err != nil {
		return nil, err
	}
	log.Info("remote upload on", "remote", cfg, "device", device, "restore_from_device", from.Name(), "retained", c.Retained)
	if !c.TLS {
		log.Warn("remote upload without TLS (remote.tls: false): checkpoints travel in the clear", "endpoint", c.Endpoint)
	}
	return &remoteSide{uploads: uploads, own: own, restore: from}, nil
}

// openDevice opens the remote storage c names and this device's part of
// it (remote.device, by default the host name).
func openDevice(c *config.Remote, log *slog.Logger) (*remote.Remote, remote.Config, *remote.Device, error) {
	access, err := secret(c.AccessKey, c.AccessKeyFile, "access_key_file")
	if err != nil {
		return nil, remote.Config{}, nil, fmt.Errorf("remote: %w", err)
	}
	key, err := secret(c.SecretKey, c.SecretKeyFile, "secret_key_file")
	if err != nil {
		return nil, remote.Config{}, nil, fmt.Errorf("remote: %w", err)
	}
	cfg := remote.Config{Endpoint: c.Endpoint, Bucket: c.Bucket, Prefix: c.Prefix, AccessKey: access, SecretKey: key,
		TLS: c.TLS, CAFile: c.CAFile, Timeout: c.Timeout}
	r, err := remote.Open(cfg)
	if err != nil {
		return nil, cfg, nil, err
	}
	device := c.Device
	if device == "" {
		if device, err = os.Hostname(); err != nil {
			return nil, cfg, nil, fmt.Errorf("remote: the host name is not known (%v): set remote.device", err)
		}
	}
	own, err := r.Device(device, log)
	if err != nil {
		return nil, cfg, nil, err
	}
	return r, cfg, own, nil
}

// UploadStates fills in the upload state of a stopped agent's completed
// checkpoints from what remote storage c holds of this device: "uploaded"
// or "not uploaded". When the storage cannot be read, each says why.
func UploadStates(c *config.Remote, infos []api.CheckpointInfo) {
	uploaded := make(map[uint64]bool)
	_, _, own, err := openDevice(c, slog.New(slog.DiscardHandler))
	var ms []*checkpoint.Manifest
	if err == nil {
		ms, err = own.Completed()
	}
	for _, m := range ms {
		uploaded[m.ID] = true
	}
	for i := range infos {
		switch {
		case err != nil:
			infos[i].Upload, infos[i].UploadError = "unknown", err.Error()
		case uploaded[infos[i].ID]:
			infos[i].Upload = "uploaded"
		default:
			infos[i].Upload = "not uploaded"
		}
	}
}

// secret is value, or the content of file without its trailing newline:
// a password, key or token a config names by field. A file its group or
// other users may read is refused (config.ReadSecret).
func secret(value, file, field string) (string, error) {
	if file == "" {
		return value, nil
	}
	b, err := config.ReadSecret(file)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", field, err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// close waits at most StopTimeout for the queued uploads (the final
// checkpoint's among them).
func (r *remoteSide) close() {
	ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
	defer cancel()
	r.uploads.Close(ctx)
}

// damage is why m's state fails verification (localrecovery.Verify), or "".
func damage(store checkpoint.Store, m *checkpoint.Manifest) string {
	if err := localrecovery.Verify(store, m); err != nil {
		return err.Error()
	}
	return ""
}

// retained reports whether store still holds completed checkpoint id: a
// running agent's retention may drop the oldest while a listing reads it.
func retained(store checkpoint.Store, id uint64) bool {
	ms, err := store.Completed()
	return err != nil || slices.ContainsFunc(ms, func(m *checkpoint.Manifest) bool { return m.ID == id })
}

// uploadState fills in info's upload state, when remote upload is on
// (r is not nil).
func (r *remoteSide) uploadState(info *api.CheckpointInfo) {
	if r == nil || info.Status != "completed" {
		return
	}
	s := r.uploads.State(info.ID)
	info.Upload, info.UploadError = s.Status, s.Err
}

// sameRemote reports whether two remote sections say the same, wherever
// they are in their files.
func sameRemote(a, b *config.Remote) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.Pos, y.Pos = config.Pos{}, config.Pos{}
	x.TLSSetting, y.TLSSetting = nil, nil // TLS holds what it comes to
	return x == y
}
