package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/agent/savepoint"
	"github.com/cairn-edge/cairn/datadir"
	"github.com/cairn-edge/cairn/localrecovery"
)

// stopRequest is a stop asked for through the control API (`cairn stop`):
// as a SIGTERM's, with a savepoint file instead of a final checkpoint if
// savepoint.
type stopRequest struct {
	savepoint bool
	to        savepointDest // where the savepoint is written
	reply     chan stopReply
	// answered is closed once the reply is on the caller's connection:
	// the agent, which ends after a stop, waits for it so that its exit
	// does not cut the answer off.
	answered chan struct{}
}

// awaitAnswered waits until the caller of req has its answer, or a few
// seconds for one that went away.
func (req stopRequest) awaitAnswered() {
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-req.answered:
	case <-t.C:
	}
}

type stopReply struct {
	resp api.CheckpointResponse
	err  error
}

// stop is POST /stop: it hands the request to the incarnation's loop and
// answers once the pipeline stopped, or the savepoint failed.
func (c *controlAPI) stop(w http.ResponseWriter, r *http.Request) {
	req := stopRequest{savepoint: r.URL.Query().Get("savepoint") != "", reply: make(chan stopReply, 1), answered: make(chan struct{})}
	var ok bool
	if req.to, ok = savepointTarget(w, r, c.state.current.Load(), req.savepoint); !ok {
		return
	}
	select {
	case c.stops <- req:
	case <-r.Context().Done():
		return
	}
	select {
	case rep := <-req.reply:
		defer close(req.answered)
		code, body := http.StatusOK, any(rep.resp)
		if rep.err != nil {
			code, body = savepointStatus(rep.err), api.Error{Error: rep.err.Error()}
		}
		reply(w, code, body)
		http.NewResponseController(w).Flush() // on the connection before answered
	case <-r.Context().Done():
	}
}

// savepointMark is the file beside the store that says which savepoint a
// start restored, and the store's newest checkpoint then: a restart that
// is given the same savepoint again (a --from-savepoint left in the unit)
// restores it again only until a checkpoint has completed after it, as
// Flink does once a job restored from a savepoint.
const savepointMark = "savepoint-restored"

// savepointMarkOf is savepointMark's content.
type savepointMarkOf struct {
	Savepoint string `json:"savepoint"` // the file's SHA-256
	ID        uint64 `json:"id"`        // its checkpoint's id
	After     uint64 `json:"after"`     // the store's newest completed checkpoint when it was restored
}

// savepointIdentity is the SHA-256 of the savepoint file at path.
func savepointIdentity(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// newestCompleted is the id of the newest completed checkpoint in store,
// 0 if there is none.
func newestCompleted(store *localrecovery.Store) (uint64, error) {
	ms, err := store.Completed()
	if err != nil || len(ms) == 0 {
		return 0, err
	}
	return ms[0].ID, nil
}

// savepointApplied reports whether the savepoint of identity id was
// restored on dataDir and a checkpoint has completed in store since: then
// the store, not the savepoint, holds the pipeline's state.
func savepointApplied(dataDir, id string, store *localrecovery.Store) (newest uint64, applied bool, err error) {
	data, err := os.ReadFile(filepath.Join(dataDir, savepointMark))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	var mark savepointMarkOf
	if err := json.Unmarshal(data, &mark); err != nil || mark.Savepoint != id {
		return 0, false, nil // another savepoint's, or unreadable: the savepoint is new here
	}
	newest, err = newestCompleted(store)
	return newest, err == nil && newest > mark.After, err
}

// markSavepointRestored writes savepointMark for the savepoint of identity
// id and checkpoint ckpt, restored over store, durably (a new file renamed
// over the old, the directory synced).
func markSavepointRestored(dataDir, id string, ckpt uint64, store *localrecovery.Store) error {
	after, err := newestCompleted(store)
	if err != nil {
		return err
	}
	data, _ := json.Marshal(savepointMarkOf{Savepoint: id, ID: ckpt, After: after})
	path := filepath.Join(dataDir, savepointMark)
	tmp := path + ".new"
	f, err := datadir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dataDir)
	}
	if err != nil {
		return fmt.Errorf("noting the savepoint restored: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// stopWith stops the job of inc as req asks, once its sources hold: a
// savepoint written as req says, or a final checkpoint; then the
// output drained. A savepoint that fails is an error, and the job goes on.
func (a *Agent) stopWith(ctx context.Context, inc *incarnation, req stopRequest, hold func(bool)) (api.CheckpointResponse, error) {
	hold(true)
	if !req.savepoint {
		id := finalCheckpoint(inc.job, inc.completions, a.log)
		drainOutput(inc.backlog, a.log)
		return api.CheckpointResponse{ID: id}, nil
	}
	resp, err := takeSavepoint(ctx, inc, req.to, a.log)
	if err != nil {
		hold(false)
		a.state.stopping.Store(false)
		a.log.Error("stop with a savepoint refused: the savepoint failed; the pipeline goes on", "err", err)
		return resp, err
	}
	drainOutput(inc.backlog, a.log)
	return resp, nil
}

// savepointOnce returns from, the savepoint at path that a start was given,
// unless it was restored on dataDir before and a checkpoint has completed
// in store since (a --from-savepoint left in the unit, under
// a unit that restarts it): then nil, and the start restores the store's newest
// checkpoint, as Flink does once a job restored from a savepoint. Else it
// notes that from is restored now.
func savepointOnce(path string, from *savepoint.Savepoint, dataDir string, store *localrecovery.Store, log *slog.Logger) (*savepoint.Savepoint, error) {
	identity, err := savepointIdentity(path)
	if err != nil {
		return nil, err
	}
	newest, applied, err := savepointApplied(dataDir, identity, store)
	if err != nil {
		return nil, err
	}
	if applied {
		log.Warn("ignoring --from-savepoint: the savepoint was restored before, and a checkpoint completed since; restoring that",
			"path", path, "savepoint", from.Manifest.ID, "checkpoint", newest)
		return nil, nil
	}
	return from, markSavepointRestored(dataDir, identity, from.Manifest.ID, store)
}
