package localrecovery_test

import (
	"fmt"
	"slices"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/localrecovery"
)

// storeEnv makes the test binary a writer of checkpoints into the store
// at its path (runWriter), killed by the power-cut test.
const storeEnv = "CAIRN_POWERCUT_STORE"

// writerSizes are the sizes of checkpoint id's three snapshots: small
// ones, and now and then one of several chunks.
func writerSizes(id uint64) []int {
	sizes := []int{40 + int(id%7)*10, 500 + int(id*37%3000), 2000}
	if id%9 == 0 {
		sizes[2] = localrecovery.ChunkSize + localrecovery.ChunkSize/2 + int(id%1000)
	}
	return sizes
}

// writerState is what the writer stores under the handle key key, n bytes.
func writerState(key string, n int) []byte {
	data := make([]byte, n)
	seed := uint64(len(key))
	for _, c := range key {
		seed = seed*31 + uint64(c)
	}
	for i := range data {
		data[i] = byte(seed + uint64(i)*131)
	}
	return data
}

var writerTasks = []checkpoint.TaskID{{Operator: "telemetry"}, {Operator: "per-device"}, {Operator: "upstream"}}

// runWriter completes checkpoints in the store at path, with ids above
// its last, until it is killed, and prints "completed N" once checkpoint
// N's Complete returned. Every fourth is whole; the others' second
// snapshot is an increment on the chain since the whole one.
func runWriter(path string) error {
	s, err := localrecovery.Open(path, localrecovery.Options{Retain: 3})
	if err != nil {
		return err
	}
	id, err := s.LastID()
	if err != nil {
		return err
	}
	var chain []checkpoint.StateHandle
	for {
		id++
		m := &checkpoint.Manifest{ID: id}
		for i, task := range writerTasks {
			key := fmt.Sprintf("%d/%s", id, task)
			h, err := s.PutState(id, task, slices.Values([][]byte{writerState(key, writerSizes(id)[i])}))
			if err != nil {
				return err
			}
			a := checkpoint.Ack{Task: task, ID: id, State: h, Source: i == 0, Offset: id * 100}
			if i == 1 {
				if id%4 == 0 {
					chain = nil
				}
				a.Base = slices.Clone(chain)
				chain = append(chain, h)
			}
			m.Subtasks = append(m.Subtasks, a)
		}
		if err := s.Complete(m); err != nil {
			return err
		}
		fmt.Printf("completed %d\n", id)
	}
}
