package mqttio

import "testing"

// A backlog holds the sources above its limit and lets them go below three
// quarters of it, telling onChange each time; a nil backlog never holds.
func TestBacklogHolds(t *testing.T) {
	var changes []bool
	b := NewBacklog(1000, func(held bool, _ int64) { changes = append(changes, held) })
	b.Add(1000)
	if b.Hold() != nil {
		t.Fatal("held at the limit")
	}
	b.Add(1)
	hold := b.Hold()
	if hold == nil {
		t.Fatal("not held over the limit")
	}
	b.Add(-200) // 801: over three quarters, still held
	select {
	case <-hold:
		t.Fatal("released above three quarters of the limit")
	default:
	}
	if n, held := b.Bytes(); n != 801 || !held {
		t.Fatalf("Bytes() = %d, %v; want 801, true", n, held)
	}
	b.Add(-51) // 750
	select {
	case <-hold:
	default:
		t.Fatal("not released at three quarters of the limit")
	}
	if b.Hold() != nil {
		t.Fatal("held after the release")
	}
	if len(changes) != 2 || !changes[0] || changes[1] {
		t.Fatalf("onChange heard %v, want [true false]", changes)
	}
	var none *Backlog
	none.Add(1 << 40)
	if none.Hold() != nil {
		t.Fatal("a nil backlog holds")
	}
}
