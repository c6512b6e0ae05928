package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
)

// Upload states of a checkpoint.
const (
	// Pending: queued or being uploaded.
	Pending = "pending"
	// Uploaded: the manifest and every blob it names are in the bucket.
	Uploaded = "uploaded"
	// Failed: the upload failed; State.Err says why. A later checkpoint
	// is uploaded in its turn.
	Failed = "failed"
	// Skipped: the uploader fell behind and went on with a newer
	// checkpoint instead.
	Skipped = "skipped"
)

// State is a checkpoint's upload state.
type State struct {
	// Status is Pending, Uploaded, Failed or Skipped; empty when the
	// uploader does not know the checkpoint.
	Status string
	// Err says why an upload failed.
	Err string
}

// UploadOptions configure an Uploader. Zero values mean the defaults noted.
type UploadOptions struct {
	// Device names the area the checkpoints go to (ValidDevice).
	Device string
	// Retain is how many uploaded checkpoints are kept; default 3.
	Retain int
	// Queue is how many completed checkpoints may wait for their upload;
	// one more makes the uploader skip to the newest. Default 2.
	Queue int
	// Logger receives failures, skips and recoveries; default
	// slog.Default.
	Logger *slog.Logger
}

// tracked is how many checkpoints' states State remembers (the newest).
const tracked = 256

// Uploader uploads completed checkpoints, reading their blobs from a local
// store, on its own goroutine. Its methods are safe for concurrent use;
// Upload never blocks.
type Uploader struct {
	r      *Remote
	dev    *Device
	local  checkpoint.Store
	opts   UploadOptions
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	queue   []*checkpoint.Manifest
	closed  bool
	states  map[uint64]State
	listed  map[uint64]bool // manifests in the bucket at the last look
	skipped []uint64        // skipped since the last warning
	warned  time.Time       // of the last skip warning

	// Owned by the goroutine.
	sent      map[string]checkpoint.StateHandle // blobs in the bucket, by key
	manifests map[uint64]*checkpoint.Manifest   // uploaded or read back
	failing   bool                              // the last attempt failed
	retaining bool                              // the last retention failed
}

// NewUploader starts an uploader of local's checkpoints to r.
func NewUploader(r *Remote, local checkpoint.Store, opts UploadOptions) (*Uploader, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	dev, err := r.Device(opts.Device, opts.Logger)
	if err != nil {
		return nil, err
	}
	if opts.Retain <= 0 {
		opts.Retain = 3
	}
	if opts.Queue <= 0 {
		opts.Queue = 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	u := &Uploader{r: r, dev: dev, local: local, opts: opts, ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
		states: make(map[uint64]State), listed: make(map[uint64]bool),
		sent: make(map[string]checkpoint.StateHandle), manifests: make(map[uint64]*checkpoint.Manifest)}
	go u.run()
	return u, nil
}

// Upload queues completed checkpoint m for upload and returns at once. If
// the queue is full, the checkpoints in it are skipped (logged, at most once
// a minute, and marked Skipped) in favour of m.
func (u *Uploader) Upload(m *checkpoint.Manifest) {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return
	}
	if len(u.queue) >= u.opts.Queue {
		for _, q := range u.queue {
			u.setLocked(q.ID, State{Status: Skipped, Err: fmt.Sprintf("the upload fell behind; checkpoint %d was uploaded instead", m.ID)})
			u.skipped = append(u.skipped, q.ID)
		}
		u.queue = u.queue[:0]
		if time.Since(u.warned) >= time.Minute {
			u.opts.Logger.Warn("remote upload is behind; skipping to the newest checkpoint", "skipped", u.skipped, "newest", m.ID)
			u.skipped, u.warned = nil, time.Now()
		}
	}
	u.queue = append(u.queue, m)
	u.setLocked(m.ID, State{Status: Pending})
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// State returns checkpoint id's upload state. Checkpoints uploaded before
// this process started are known once the uploader has listed the bucket.
func (u *Uploader) State(id uint64) State {
	u.mu.Lock()
	defer u.mu.Unlock()
	if s, ok := u.states[id]; ok {
		return s
	}
	if u.listed[id] {
		return State{Status: Uploaded}
	}
	return State{}
}

func (u *Uploader) set(id uint64, s State) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.setLocked(id, s)
}

func (u *Uploader) setLocked(id uint64, s State) {
	u.states[id] = s
	if len(u.states) > tracked {
		oldest := id
		for k := range u.states {
			oldest = min(oldest, k)
		}
		delete(u.states, oldest)
	}
}

// Close stops taking checkpoints and waits for the queued uploads to
// finish, or for ctx: then the upload in progress is abandoned (its
// checkpoint stays without a manifest, so it is not in the bucket).
func (u *Uploader) Close(ctx context.Context) {
	u.mu.Lock()
	u.closed = true
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
	select {
	case <-u.done:
	case <-ctx.Done():
		u.cancel()
		<-u.done
	}
	u.cancel()
}

// next returns the oldest queued checkpoint, waiting for one; false when
// the uploader is closed and has nothing left, or cancelled.
func (u *Uploader) next() (*checkpoint.Manifest, bool) {
	for {
		u.mu.Lock()
		if len(u.queue) > 0 && u.ctx.Err() == nil {
			m := u.queue[0]
			u.queue = u.queue[1:]
			u.mu.Unlock()
			return m, true
		}
		closed := u.closed
		u.mu.Unlock()
		if closed || u.ctx.Err() != nil {
			return nil, false
		}
		select {
		case <-u.wake:
		case <-u.ctx.Done():
		}
	}
}

func (u *Uploader) run() {
	defer close(u.done)
	if err := u.refresh(); err != nil {
		u.opts.Logger.Warn("remote storage cannot be listed; uploads will be tried all the same", "device", u.dev.name, "err", err)
	}
	for {
		m, ok := u.next()
		if !ok {
			return
		}
		start := time.Now()
		n, bytes, err := u.upload(m)
		if err != nil {
			u.set(m.ID, State{Status: Failed, Err: err.Error()})
			if !u.failing && u.ctx.Err() == nil {
				u.opts.Logger.Warn("remote upload failed; the local checkpoint stands and later ones will be uploaded",
					"id", m.ID, "err", err)
			}
			u.failing = true
			continue
		}
		u.set(m.ID, State{Status: Uploaded})
		if u.failing {
			u.opts.Logger.Info("remote upload works again", "id", m.ID)
			u.failing = false
		}
		u.opts.Logger.Debug("checkpoint uploaded", "id", m.ID, "blobs", n, "bytes", bytes, "duration", time.Since(start))
		switch err := u.retain(); {
		case err != nil && !u.retaining:
			u.opts.Logger.Warn("remote retention failed; it is tried again after each upload", "err", err)
			u.retaining = true
		case err == nil && u.retaining:
			u.opts.Logger.Info("remote retention works again")
			u.retaining = false
		}
	}
}

// upload stores m's blobs that are not in the bucket yet, then its
// manifest, and returns how many blobs and bytes it sent. It reads those
// blobs from the local store first, all of them, as one view of it where
// the store can (a localrecovery.Store: ReadStates): sending can take
// longer than the local store keeps m, whose retention, in the
// transaction of a later checkpoint, would delete them under a slow
// upload.
func (u *Uploader) upload(m *checkpoint.Manifest) (int, int64, error) {
	type blob struct {
		h    checkpoint.StateHandle
		data []byte
	}
	var blobs []blob
	var handles []checkpoint.StateHandle
	var total int64
	for _, a := range m.Subtasks {
		for _, h := range a.Handles() {
			if u.sent[h.Key] == h || slices.Contains(handles, h) {
				continue
			}
			handles = append(handles, h)
			total += h.Size
		}
	}
	datas, err := readStates(u.local, handles)
	if err != nil {
		return 0, 0, fmt.Errorf("checkpoint %d: reading its local state: %w", m.ID, err)
	}
	for i, h := range handles {
		blobs = append(blobs, blob{h, datas[i]})
	}
	for _, b := range blobs {
		if err := u.r.put(u.ctx, u.r.stateName(u.dev.name, b.h.Key), b.data, "application/octet-stream"); err != nil {
			return 0, 0, fmt.Errorf("checkpoint %d: %w", m.ID, err)
		}
		u.sent[b.h.Key] = b.h
	}
	rec, err := encodeManifest(m)
	if err != nil {
		return 0, 0, err
	}
	if err := u.r.put(u.ctx, u.r.manifestName(u.dev.name, m.ID), rec, "application/json"); err != nil {
		return 0, 0, fmt.Errorf("checkpoint %d: %w", m.ID, err)
	}
	u.manifests[m.ID] = m
	return len(blobs), total, nil
}

// refresh learns which manifests are in the bucket.
func (u *Uploader) refresh() error {
	ids, err := u.dev.ids(u.ctx)
	if err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.listed)
	for _, id := range ids {
		u.listed[id] = true
	}
	return nil
}

// retain keeps the newest Retain readable manifests and the blobs they
// reference and deletes every other object of the device: older and
// damaged manifests first, then unreferenced blobs, so that no manifest
// ever names a deleted blob.
func (u *Uploader) retain() error {
	ids, err := u.dev.ids(u.ctx)
	if err != nil {
		return err
	}
	referenced := make(map[string]bool)
	var kept, dropped []uint64
	for _, id := range ids {
		if len(kept) < u.opts.Retain {
			m := u.manifests[id]
			if m == nil {
				m, err = u.dev.manifest(u.ctx, id)
				if err != nil && !errors.Is(err, checkpoint.ErrCorrupt) {
					return err // not known to be damaged: keep everything
				}
			}
			if m != nil {
				u.manifests[id] = m
				kept = append(kept, id)
				for _, a := range m.Subtasks {
					for _, h := range a.Handles() {
						referenced[h.Key] = true
					}
				}
				continue
			}
		}
		dropped = append(dropped, id)
	}
	for _, id := range dropped {
		if err := u.r.remove(u.ctx, u.r.manifestName(u.dev.name, id)); err != nil {
			return err
		}
		delete(u.manifests, id)
	}
	u.mu.Lock()
	clear(u.listed)
	for _, id := range kept {
		u.listed[id] = true
	}
	u.mu.Unlock()
	names, err := u.r.list(u.ctx, u.r.stateDir(u.dev.name))
	if err != nil {
		return err
	}
	dir := u.r.stateDir(u.dev.name)
	for _, name := range names {
		key := strings.TrimPrefix(name, dir)
		if referenced[key] {
			continue
		}
		if err := u.r.remove(u.ctx, name); err != nil {
			return err
		}
		delete(u.sent, key)
	}
	if len(dropped) > 0 {
		slices.Reverse(dropped)
		u.opts.Logger.Debug("remote retention", "deleted", dropped, "kept", kept)
	}
	return nil
}

// viewStore is a store that reads several snapshots as one view of it
// (localrecovery.Store).
type viewStore interface {
	ReadStates(hs []checkpoint.StateHandle) ([][]byte, error)
}

// readStates reads the snapshots hs name from store, as one view where it
// can.
func readStates(store checkpoint.Store, hs []checkpoint.StateHandle) ([][]byte, error) {
	if v, ok := store.(viewStore); ok {
		return v.ReadStates(hs)
	}
	out := make([][]byte, len(hs))
	for i, h := range hs {
		data, err := store.ReadState(h)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.Key, err)
		}
		out[i] = data
	}
	return out, nil
}
