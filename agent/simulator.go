package agent

import (
	"fmt"
	"math"
	"time"

	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/graph"
)

// simulator is a built-in sensor fleet: a deterministic sequence of
// readings, paced by the wall clock. Reading i's device and temperature are
// the same on every run, so a restore replays them from the checkpointed
// offset. Its event time is the wall-clock time at which it is due in this
// run (the subtask's opening, plus 1s/rate a reading), so that event time
// runs with the gateway's clock as a real fleet's would: a replay after a
// restore carries the times of the replay, not those of the lost run.
type simulator struct {
	cfg          config.Simulator
	next, stride uint64 // next reading index of this subtask, and the step
	read         uint64 // readings read, the offset
	start        time.Time
	startRead    uint64
	base         int64 // the event time of reading 0 in this run (ms): start less the readings before next
	ready        chan struct{}
	stop         chan struct{}
}

func newSimulator(cfg config.Simulator) func(int) graph.Source {
	return func(int) graph.Source { return &simulator{cfg: cfg} }
}

func (s *simulator) Open(ctx *graph.Context, offset uint64) error {
	info := ctx.Info()
	s.stride = uint64(info.Parallelism)
	s.read = offset
	s.next = uint64(info.Subtask) + offset*s.stride
	s.start, s.startRead = time.Now(), offset
	s.base = s.start.UnixMilli() - int64(s.next*1000/uint64(s.cfg.Rate))
	s.ready, s.stop = make(chan struct{}, 1), make(chan struct{})
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				select {
				case s.ready <- struct{}{}:
				default:
				}
			case <-s.stop:
				return
			}
		}
	}()
	return nil
}

// mix is a 64-bit hash of i and the seed: splitmix64.
func (s *simulator) mix(i uint64) uint64 {
	z := i + uint64(s.cfg.Seed)*0x9e3779b97f4a7c15 + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// reading returns reading i: a device chosen with the configured skew (a
// few devices send most when skew nears 1), a temperature around 24 °C.
func (s *simulator) reading(i uint64) graph.Record {
	u := float64(s.mix(i)>>11) / (1 << 53)
	dev := int(float64(s.cfg.Devices) * math.Pow(u, 1/(1-s.cfg.Skew)))
	dev = min(dev, s.cfg.Devices-1)
	noise := float64(s.mix(i^0xabcdef)>>11)/(1<<53) - 0.5
	temp := math.Round((24+6*math.Sin(float64(i)/500+float64(dev))+2*noise)*10) / 10
	name := fmt.Sprintf("dev-%03d", dev)
	site := "north"
	if dev%3 == 0 {
		site = "south"
	}
	t := s.base + int64(i*1000/uint64(s.cfg.Rate))
	return graph.Record{Key: name, Time: t, Value: temp,
		Payload: map[string]any{"device": name, "temp": temp, "site": site}}
}

func (s *simulator) Read(buf []graph.Record) (int, error) {
	// This subtask's share of the rate since it opened.
	due := s.startRead + uint64(time.Since(s.start).Milliseconds())*uint64(s.cfg.Rate)/1000/s.stride
	n := 0
	for n < len(buf) && s.read < due {
		buf[n] = s.reading(s.next)
		s.next += s.stride
		s.read++
		n++
	}
	return n, nil
}

func (s *simulator) Offset() uint64         { return s.read }
func (s *simulator) Ready() <-chan struct{} { return s.ready }
func (s *simulator) Close() error {
	if s.stop != nil {
		close(s.stop)
	}
	return nil
}
