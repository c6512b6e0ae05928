package savepoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cairn-edge/cairn/checkpoint"
)

// FuzzRead feeds arbitrary files to Read. With sealed set, the harness
// appends the right CRC-32C, so that the fuzzer gets past the checksum to
// the manifest and the snapshots. Read must never panic and must refuse
// with ErrCorrupt; a savepoint it accepts either serves every snapshot its
// manifest names (and then writes back to a file that reads as the same
// savepoint, byte for byte the same when written again) or says which one
// is corrupt. Seeds: testdata/fuzz/FuzzRead.
func FuzzRead(f *testing.F) {
	store := checkpoint.NewMemStore(0)
	task := checkpoint.TaskID{Operator: "count", Subtask: 0}
	base, _ := store.PutState(1, task, slices.Values([][]byte{[]byte("whole snapshot")}))
	inc, _ := store.PutState(2, task, slices.Values([][]byte{[]byte("increment")}))
	src, _ := store.PutState(2, checkpoint.TaskID{Operator: "mqtt"}, slices.Values([][]byte(nil)))
	m := &checkpoint.Manifest{ID: 2, Subtasks: []checkpoint.Ack{
		{Task: task, ID: 2, State: inc, Base: []checkpoint.StateHandle{base}},
		{Task: checkpoint.TaskID{Operator: "mqtt"}, ID: 2, State: src, Source: true, Offset: 77},
	}}
	path, err := WriteIn(f.TempDir(), "seed.cairn", false, m, store)
	if err != nil {
		f.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(file, false)
	f.Add(file[:len(file)-4], true)
	f.Add([]byte(magic+"\x01\x02{}"), true)
	f.Add([]byte(magic+"\x01"), false)
	f.Fuzz(func(t *testing.T, data []byte, sealed bool) {
		if sealed {
			data = binary.BigEndian.AppendUint32(bytes.Clone(data), crc32.Checksum(data, castagnoli))
		}
		dir := t.TempDir()
		in := filepath.Join(dir, "in.cairn")
		if err := os.WriteFile(in, data, 0o600); err != nil {
			t.Fatal(err)
		}
		sp, err := Read(in)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("refused without ErrCorrupt: %v", err)
			}
			return
		}
		if sp.Manifest == nil {
			t.Fatal("read without a manifest")
		}
		for _, h := range handles(sp.Manifest) {
			if _, err := sp.ReadState(h); err != nil && !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Fatalf("state %q fails without ErrCorrupt: %v", h.Key, err)
			}
		}
		out, err := WriteIn(dir, "out.cairn", false, sp.Manifest, sp)
		if err != nil {
			if !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Fatalf("writing it back failed without ErrCorrupt: %v", err)
			}
			return
		}
		back, err := Read(out)
		if err != nil {
			t.Fatalf("a written savepoint does not read: %v", err)
		}
		before, _ := json.Marshal(sp.Manifest)
		after, _ := json.Marshal(back.Manifest)
		if !bytes.Equal(before, after) {
			t.Fatalf("the manifest changed:\n%s\n%s", before, after)
		}
		for _, h := range handles(sp.Manifest) {
			a, _ := sp.ReadState(h)
			b, err := back.ReadState(h)
			if err != nil || !bytes.Equal(a, b) {
				t.Fatalf("state %q: %q, read back as %q (%v)", h.Key, a, b, err)
			}
		}
		again, err := WriteIn(dir, "again.cairn", false, back.Manifest, back)
		if err != nil {
			t.Fatal(err)
		}
		first, _ := os.ReadFile(out)
		second, _ := os.ReadFile(again)
		if !bytes.Equal(first, second) {
			t.Fatal("writing a savepoint twice gives different files")
		}
	})
}
