package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/datadir"
	"github.com/cairn-edge/cairn/internal/testing/testlog"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// TestDataDirEntriesAreNotFollowed: each entry the agent keeps in its
// data directory, made a symbolic link (to a file or a directory that
// the agent's user may write) or a file with another name, makes the
// start fail, naming it, before anything is written there.
func TestDataDirEntriesAreNotFollowed(t *testing.T) {
	for name := range entries {
		for _, kind := range []string{"link to a file", "link to a directory", "hard link"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				data, elsewhere := t.TempDir(), t.TempDir()
				target := filepath.Join(elsewhere, "target")
				var err error
				switch kind {
				case "link to a file", "hard link":
					if err := os.WriteFile(target, []byte("keep me"), 0o600); err != nil {
						t.Fatal(err)
					}
					if kind == "hard link" {
						err = os.Link(target, filepath.Join(data, name))
					} else {
						err = os.Symlink(target, filepath.Join(data, name))
					}
				case "link to a directory":
					if err := os.Mkdir(target, 0o700); err != nil {
						t.Fatal(err)
					}
					err = os.Symlink(target, filepath.Join(data, name))
				}
				if err != nil {
					t.Fatal(err)
				}
				release, err := lockDataDir(data)
				if err == nil {
					release()
					t.Fatalf("a data directory whose %s is a %s was taken", name, kind)
				}
				if !errors.Is(err, datadir.ErrNotOwn) || !strings.Contains(err.Error(), filepath.Join(data, name)) {
					t.Fatalf("refused with %v; want it to name %s", err, name)
				}
				if b, err := os.ReadFile(target); err == nil && string(b) != "keep me" {
					t.Fatalf("the %s's target was written: %q", kind, b)
				}
				if ls, _ := os.ReadDir(elsewhere); len(ls) != 1 {
					t.Fatalf("files were made beside the target: %v", ls)
				}
			})
		}
	}
}

// TestDataDirHoldsOnlyItsEntries runs an agent with an MQTT source, a
// sink and a savepoint, stops it, and finds in its data directory only
// the entries it keeps (the list checkEntries checks).
func TestDataDirHoldsOnlyItsEntries(t *testing.T) {
	dir := t.TempDir()
	data, file := filepath.Join(dir, "data"), filepath.Join(dir, "pipeline.yaml")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	pipeline := fmt.Sprintf(`agent: {data_dir: %s}
brokers:
  local: {embedded: true, listen: "%s"}
checkpoints: {interval: 100ms}
sources:
  - {id: fleet, simulator: {devices: 5, rate: 100}}
  - {id: readings, broker: local, topics: ["in/{device}"], key: device}
operators:
  - {id: counts, type: count, inputs: [fleet, readings], key_by: key}
sinks:
  - {id: out, input: counts, broker: local, topic: "out/{key}"}
`, data, addr)
	if err := os.WriteFile(file, []byte(pipeline), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := new(testlog.Buffer)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- Run(ctx, file, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}) }()
	client := api.NewClient(SocketPath(data))
	testwait.For(t, time.Minute, "a savepoint", func() bool {
		sctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		_, err := client.Savepoint(sctx, "", false)
		return err == nil
	})
	list := func() []string {
		ls, err := os.ReadDir(data)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ls {
			names = append(names, e.Name())
		}
		return names
	}
	running := list()
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v\n%s", err, logs)
	}
	for _, name := range append(running, list()...) {
		if _, ok := entries[name]; !ok {
			t.Errorf("the data directory holds %s, which is not among the entries checked (%v)", name, entries)
		}
	}
	for _, name := range []string{"LOCK", "cairn.pid", "cairn.sock", "checkpoint-id", "checkpoints.db", "ingest", "savepoints"} {
		if !slices.Contains(running, name) {
			t.Errorf("the running agent's data directory lacks %s: %v", name, running)
		}
	}
}
