package remote

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"

	"github.com/cairn-edge/cairn/checkpoint"
)

// maxManifest bounds the size of a manifest read back.
const maxManifest = 64 << 20

// Device is one device's uploaded checkpoints: a read-only
// checkpoint.Store for a restore (package recovery), safe for concurrent
// use. Each call is one or a few requests, each bounded by the Config's
// Timeout.
type Device struct {
	r    *Remote
	name string
	log  *slog.Logger
}

// Device returns the uploaded checkpoints of the device called name
// (ValidDevice). log receives a line for each manifest that Completed
// skips; nil discards them.
func (r *Remote) Device(name string, log *slog.Logger) (*Device, error) {
	if err := ValidDevice(name); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Device{r: r, name: name, log: log}, nil
}

// Name is the device's name.
func (d *Device) Name() string { return d.name }

// ids lists the ids of the device's uploaded manifests, newest first.
func (d *Device) ids(ctx context.Context) ([]uint64, error) {
	names, err := d.r.list(ctx, d.r.manifestsDir(d.name))
	if err != nil {
		return nil, err
	}
	var ids []uint64
	for _, n := range names {
		if id, ok := d.r.parseManifestName(d.name, n); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	return ids, nil
}

// manifest reads and checks checkpoint id's manifest.
func (d *Device) manifest(ctx context.Context, id uint64) (*checkpoint.Manifest, error) {
	name := d.r.manifestName(d.name, id)
	data, err := d.r.get(ctx, name, maxManifest)
	if err != nil {
		return nil, err
	}
	m, err := decodeManifest(data, id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

// Completed implements checkpoint.Store: the manifests of the device's
// uploaded checkpoints, newest first. A manifest that fails its checksum
// is logged and left out; failing to list or read is an error.
func (d *Device) Completed() ([]*checkpoint.Manifest, error) {
	ctx := context.Background()
	ids, err := d.ids(ctx)
	if err != nil {
		return nil, err
	}
	var out []*checkpoint.Manifest
	for _, id := range ids {
		m, err := d.manifest(ctx, id)
		if errors.Is(err, checkpoint.ErrCorrupt) {
			d.log.Error("skipping a damaged remote checkpoint manifest", "device", d.name, "id", id, "err", err)
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// ReadState implements checkpoint.Store: it downloads the blob behind h and
// verifies its size and CRC-32C; a missing or damaged blob is an error
// wrapping checkpoint.ErrCorrupt that names the object.
func (d *Device) ReadState(h checkpoint.StateHandle) ([]byte, error) {
	name := d.r.stateName(d.name, h.Key)
	data, err := d.r.get(context.Background(), name, max(h.Size, 0))
	if err != nil {
		return nil, err
	}
	if err := checkpoint.Verify(h, data); err != nil {
		return nil, fmt.Errorf("remote object %s: %w", name, err)
	}
	return data, nil
}

// LastID implements checkpoint.Store: the highest id among the device's
// uploaded manifests, damaged or not, 0 if none. A device that lost its
// disk continues above it (invariant I6).
func (d *Device) LastID() (uint64, error) {
	ids, err := d.ids(context.Background())
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	return ids[0], nil
}

// The rest of checkpoint.Store: a Device is read-only; an Uploader writes.

var errReadOnly = errors.New("remote checkpoints are read-only here; an Uploader writes them")

func (d *Device) SaveLastID(uint64) error { return errReadOnly }
func (d *Device) PutState(uint64, checkpoint.TaskID, iter.Seq[[]byte]) (checkpoint.StateHandle, error) {
	return checkpoint.StateHandle{}, errReadOnly
}
func (d *Device) Complete(*checkpoint.Manifest) error { return errReadOnly }
func (d *Device) Discard(uint64) error                { return errReadOnly }

var _ checkpoint.Store = (*Device)(nil)
