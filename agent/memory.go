package agent

import (
	"math"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"

	"github.com/cairn-edge/cairn/agent/api"
)

// memoryNow reads this process's memory: the resident set from
// /proc/self/statm, the heap and the limit from the Go runtime. It stops
// nothing and costs a few microseconds.
func memoryNow() api.Memory {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}, {Name: "/gc/gomemlimit:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	m := api.Memory{HeapLive: int64(s[0].Value.Uint64()), HeapGoal: int64(s[1].Value.Uint64()), Resident: resident()}
	if m.HeapLive == 0 { // no collection yet: what the heap holds
		m.HeapLive = int64(s[3].Value.Uint64())
	}
	if l := s[2].Value.Uint64(); l < math.MaxInt64 {
		m.Limit = int64(l)
	}
	return m
}

// resident is the process's resident set in bytes; 0 where /proc is not.
func resident() int64 {
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(statm)) // size resident shared …, in pages
	if len(fields) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}
