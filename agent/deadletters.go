package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"syscall"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/seglog"
)

// maxDeadLettersPage bounds one answer of the dead letters endpoint.
const maxDeadLettersPage = 1000

// deadLetters answers GET /deadletters?from=SEQ&limit=N from the running
// agent's store.
func (c *controlAPI) deadLetters(w http.ResponseWriter, r *http.Request) {
	from, limit, err := page(r)
	if err != nil {
		reply(w, http.StatusBadRequest, api.Error{Error: err.Error()})
		return
	}
	dls, err := c.state.logs.DeadLetters(from, limit)
	if err != nil {
		reply(w, http.StatusInternalServerError, api.Error{Error: err.Error()})
		return
	}
	reply(w, http.StatusOK, deadLetterPage(dls, from))
}

// page reads the from and limit parameters of a dead letters request.
func page(r *http.Request) (from uint64, limit int, err error) {
	limit = maxDeadLettersPage
	if s := r.URL.Query().Get("from"); s != "" {
		if from, err = strconv.ParseUint(s, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("from=%q is not a sequence number", s)
		}
	}
	if s := r.URL.Query().Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 {
			return 0, 0, fmt.Errorf("limit=%q is not a positive number", s)
		}
	}
	return from, min(limit, maxDeadLettersPage), nil
}

// DeadLetters returns up to limit (0: a page's worth) dead letters from
// seq from on, stored in
// the data directory of an agent that is not running; ErrAgentRunning
// when one is (ask it instead: the store's tail is its to write).
func DeadLetters(dataDir string, from uint64, limit int) (api.DeadLetters, error) {
	release, err := seglog.LockDirToRead(dataDir)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return api.DeadLetters{}, ErrAgentRunning
	}
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dataDir); errors.Is(serr, fs.ErrNotExist) {
			return api.DeadLetters{}, fmt.Errorf("no data directory at %s: no agent has run there yet", dataDir)
		}
		return api.DeadLetters{}, fmt.Errorf("data directory %s has no LOCK: no agent has run there yet", dataDir)
	}
	if err != nil {
		return api.DeadLetters{}, fmt.Errorf("data directory %s: %w", dataDir, err)
	}
	defer release()
	if limit <= 0 || limit > maxDeadLettersPage {
		limit = maxDeadLettersPage
	}
	dls, err := ingest.ReadDeadLetters(ingest.Dir(dataDir), from, limit)
	if err != nil {
		return api.DeadLetters{}, err
	}
	return deadLetterPage(dls, from), nil
}

// ErrAgentRunning is returned by what reads a stopped agent's data
// directory when an agent runs on it.
var ErrAgentRunning = errors.New("an agent is running on the data directory")

func deadLetterPage(dls []ingest.StoredDeadLetter, from uint64) api.DeadLetters {
	out := api.DeadLetters{DeadLetters: make([]api.DeadLetter, 0, len(dls)), Next: from}
	for _, dl := range dls {
		shown := dl.Shown()
		out.DeadLetters = append(out.DeadLetters, api.DeadLetter(shown))
		out.Next = dl.Seq + 1
	}
	return out
}
