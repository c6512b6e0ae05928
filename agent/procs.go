package agent

import (
	"context"
	"log/slog"
	"runtime"
	"syscall"
	"time"
)

// At a gateway's rate most of the agent's CPU goes not to the readings
// but to waking threads. paho hands each message through five goroutines
// and each acknowledgement through two more, and while a second
// processor (a P of Go's scheduler) is idle, every hand-off also wakes a
// thread to look for work there, which finds none and sleeps again: at 50
// readings a second perf put half of the agent's CPU in Go's scheduler
// and sysmon (docs/durability.md). On one processor a hand-off is a switch on
// the thread that made it. So the agent runs on one processor while it
// uses little of one, and on as many as Go would give it once it needs
// more.

// procPolicy decides, from the CPU time the process spent, how many
// processors it runs on: one once it used less than narrowBelow of a
// processor over a period, all (most) again once it used more than
// widenAbove of its one. It is told the time and the CPU time; it reads
// no clock.
type procPolicy struct {
	most    int // the processors Go would use
	procs   int // the processors in use
	lastCPU time.Duration
	lastAt  time.Time
}

const (
	narrowBelow = 0.25
	widenAbove  = 0.6
)

// observe notes the process's CPU time at now and returns how many
// processors it is to run on.
func (p *procPolicy) observe(now time.Time, cpu time.Duration) int {
	if !p.lastAt.IsZero() && now.After(p.lastAt) {
		used := float64(cpu-p.lastCPU) / float64(now.Sub(p.lastAt))
		switch {
		case p.procs > 1 && used < narrowBelow:
			p.procs = 1
		case p.procs == 1 && used > widenAbove:
			p.procs = p.most
		}
	}
	p.lastCPU, p.lastAt = cpu, now
	return p.procs
}

// How often the processors are decided: every second while on all of
// them, every five while on one (an idle agent wakes little for it; a
// load that needs more waits five seconds at most).
const (
	procsWide   = time.Second
	procsNarrow = 5 * time.Second
)

// governProcs runs the agent on the processors procPolicy decides until
// ctx is done, and then gives Go back its default. It does nothing where
// Go would use one processor anyway, or where GOMAXPROCS sets how many.
func governProcs(ctx context.Context, custom bool, log *slog.Logger) {
	most := runtime.GOMAXPROCS(0)
	if custom || most < 2 {
		return
	}
	p := procPolicy{most: most, procs: most}
	defer runtime.SetDefaultGOMAXPROCS()
	t := time.NewTimer(procsWide)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			cpu, err := processCPU()
			if err != nil {
				log.Warn("processors left to Go: the process's CPU time is not to be had", "err", err)
				return
			}
			was := p.procs
			switch p.observe(now, cpu) {
			case was:
			case 1:
				runtime.GOMAXPROCS(1)
				log.Debug("running on one processor while the load is light")
			default:
				runtime.SetDefaultGOMAXPROCS()
				log.Debug("running on every processor", "processors", runtime.GOMAXPROCS(0))
			}
			period := procsWide
			if p.procs == 1 {
				period = procsNarrow
			}
			t.Reset(period)
		}
	}
}

// processCPU is the CPU time, user and system, the process spent.
func processCPU() (time.Duration, error) {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0, err
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()), nil
}
