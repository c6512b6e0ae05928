package checkpoint

import "testing"

// TestSameState: manifests that restore the same state are the same,
// whatever their ids, times and statistics; any difference a restore sees
// makes them differ.
func TestSameState(t *testing.T) {
	h := func(key string) StateHandle { return StateHandle{Key: key, Size: 10, CRC32C: 7} }
	base := func() *Manifest {
		return &Manifest{ID: 4, Mode: ExactlyOnce, Subtasks: []Ack{
			{Task: TaskID{Operator: "src"}, State: h("4/src/0"), Source: true, Offset: 100, Watermark: 5},
			{Task: TaskID{Operator: "win"}, State: h("4/win/0"), Base: []StateHandle{h("1/win/0")}, MaxParallelism: 128, Watermark: 5},
		}}
	}
	later := base()
	later.ID, later.Triggered, later.Duration = 9, 7, 3
	later.Subtasks[1].Stats = SubtaskStats{Sync: 5, StateSize: 0}
	if !SameState(base(), later) {
		t.Fatal("the same state under another id and statistics is not the same")
	}
	for name, change := range map[string]func(m *Manifest){
		"offset":    func(m *Manifest) { m.Subtasks[0].Offset++ },
		"watermark": func(m *Manifest) { m.Subtasks[1].Watermark++ },
		"state":     func(m *Manifest) { m.Subtasks[1].State = h("9/win/0") },
		"chain":     func(m *Manifest) { m.Subtasks[1].Base = nil },
		"mode":      func(m *Manifest) { m.Mode = AtLeastOnce },
		"in flight": func(m *Manifest) { m.Subtasks[1].InFlight = &StateHandle{} },
		"subtasks":  func(m *Manifest) { m.Subtasks = m.Subtasks[:1] },
	} {
		m := base()
		change(m)
		if SameState(base(), m) || SameState(m, base()) {
			t.Errorf("a different %s is the same state", name)
		}
	}
}
