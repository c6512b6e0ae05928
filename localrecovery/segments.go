package localrecovery

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/seglog"
)

// Before this store, cairn kept its checkpoints in a segmented log (package
// seglog) in the directory <data_dir>/checkpoints, whose records
// (records.go) are chunks of snapshots, completion records and ids taken.
// segmentStore reads such a log, read-only (nothing cut, moved or
// locked), to move what of it verifies into the store's file
// (moveSegments).
type segmentStore struct {
	log *seglog.Log
	// blobs are the snapshots by handle key: where their chunks are.
	blobs map[string][]uint64
	// records are the completion records, oldest first.
	records []*checkpoint.Manifest
	last    uint64
	// broken says the log showed damage: a torn tail, or a record that
	// does not verify.
	broken bool
}

// segmentsDir is where an earlier cairn kept the checkpoints of the store
// at path: the directory of its name without ".db".
func segmentsDir(path string) string { return strings.TrimSuffix(path, ".db") }

// openSegments reads the log in dir into an index.
func openSegments(dir string, log *slog.Logger) (*segmentStore, error) {
	l, err := seglog.Open(dir, seglog.Options{ReadOnly: true, Logger: log})
	if err != nil {
		return nil, err
	}
	s := &segmentStore{log: l, blobs: make(map[string][]uint64), broken: len(l.Damage()) > 0}
	segs := l.Segments()
	for i, first := range segs {
		end := uint64(math.MaxUint64)
		if i+1 < len(segs) {
			end = segs[i+1]
		}
		var bad error
		err := l.Read(first, func(r seglog.Record) bool {
			if r.Offset >= end {
				return false // the next segment's
			}
			e, err := decodeEntry(r.Data)
			if err != nil {
				bad = fmt.Errorf("record %d: %w", r.Offset, err)
				return false
			}
			switch e.kind {
			case chunkRecord:
				offs := s.blobs[e.key]
				if e.index == 0 {
					offs = nil // a retry after a failed write starts afresh
				}
				if e.index == len(offs) {
					s.blobs[e.key] = append(offs, r.Offset)
				}
			case completionRecord:
				s.records = append(s.records, e.manifest)
				s.last = max(s.last, e.manifest.ID)
			case lastIDRecord:
				s.last = max(s.last, e.id)
			}
			return true
		})
		if err = cmp.Or(err, bad); err != nil {
			s.broken = true
			log.Error("the earlier checkpoint store is damaged; reading on after it", "dir", dir, "err", err)
		}
	}
	slices.SortStableFunc(s.records, func(a, b *checkpoint.Manifest) int { return cmp.Compare(a.ID, b.ID) })
	s.records = slices.CompactFunc(s.records, func(a, b *checkpoint.Manifest) bool { return a.ID == b.ID })
	return s, nil
}

func (s *segmentStore) completed() []*checkpoint.Manifest { return s.records }
func (s *segmentStore) lastID() uint64                    { return s.last }
func (s *segmentStore) damaged() bool                     { return s.broken }
func (s *segmentStore) close() error                      { return s.log.Close() }

// readState reads and verifies the snapshot h names.
func (s *segmentStore) readState(h checkpoint.StateHandle) ([]byte, error) {
	offs := s.blobs[h.Key]
	if len(offs) == 0 {
		return nil, fmt.Errorf("%w: %s is missing", checkpoint.ErrCorrupt, h.Key)
	}
	data := make([]byte, 0, max(0, min(h.Size, 1<<30)))
	next := 0
	var bad error
	err := s.log.Read(offs[0], func(r seglog.Record) bool {
		if r.Offset != offs[next] {
			return true // another snapshot's, or another record
		}
		e, err := decodeEntry(r.Data)
		if err != nil || e.kind != chunkRecord || e.key != h.Key || e.index != next {
			bad = fmt.Errorf("%w: %s: record %d is not its chunk %d", checkpoint.ErrCorrupt, h.Key, r.Offset, next)
			return false
		}
		data = append(data, e.data...)
		next++
		return next < len(offs)
	})
	switch {
	case bad != nil:
		return nil, bad
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %v", checkpoint.ErrCorrupt, h.Key, err)
	case next < len(offs):
		return nil, fmt.Errorf("%w: %s: %d of its %d chunks read", checkpoint.ErrCorrupt, h.Key, next, len(offs))
	}
	return data, checkpoint.Verify(h, data)
}

// markOfDir identifies what the log in dir holds: its segments' names,
// sizes and modification times. A store moved from it keeps the mark
// (meta "moved_from"), so that a log written to after the move is known
// for one (moveSegments).
func markOfDir(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "segments of %s:", filepath.Base(dir))
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".seg") {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, " %s %d %d;", e.Name(), info.Size(), info.ModTime().UnixNano())
	}
	return b.String(), nil
}
