package agent

import (
	"log/slog"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// debounce is how long the file must be quiet before a change counts: an
// editor's save is often several events.
const debounce = 250 * time.Millisecond

// watch reports changes of the file at path. It watches the directory, so
// that editors that save by writing a new file and renaming it over the old
// one are seen too.
func watch(path string, log *slog.Logger) (<-chan struct{}, func(), error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	if err := w.Add(filepath.Dir(abs)); err != nil {
		w.Close()
		return nil, nil, err
	}
	changes := make(chan struct{}, 1)
	go func() {
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		for {
			select {
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if filepath.Clean(ev.Name) == abs && ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) != 0 {
					timer.Reset(debounce)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				log.Warn("watching the pipeline file", "err", err)
			case <-timer.C:
				select {
				case changes <- struct{}{}:
				default:
				}
			}
		}
	}()
	return changes, func() { w.Close() }, nil
}
