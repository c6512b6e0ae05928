package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
)

// stallLines are what `cairn status` says of late checkpoints, alignment
// stalls and event time: how many checkpoints were late, the longest
// recent stall, and how far each operator's event time trails the clock.
func stallLines(st api.Status) []string {
	var lines []string
	var lags, ahead []string
	for _, op := range st.Operators {
		switch {
		case op.WatermarkUnixMS == 0:
		case st.TimeUnixMS != 0 && op.WatermarkUnixMS > st.TimeUnixMS:
			ahead = append(ahead, op.ID+" "+eventLag(api.Operator{WatermarkUnixMS: op.WatermarkUnixMS, WatermarkLagMS: op.WatermarkUnixMS - st.TimeUnixMS}))
		default:
			lags = append(lags, op.ID+" "+eventLag(op))
		}
	}
	if len(lags) > 0 {
		lines = append(lines, "event time behind the clock: "+strings.Join(lags, ", "))
	}
	if len(ahead) > 0 {
		// Only where the gateway's clock is not set, or a source takes
		// readings from the future (max_future: 0s).
		lines = append(lines, "event time AHEAD of the clock (a device or gateway clock is wrong): "+strings.Join(ahead, ", "))
	}
	if n := st.Checkpoints.Late; n > 0 {
		lines = append(lines, fmt.Sprintf("late checkpoints: %d took more than half the %v interval", n, time.Duration(st.Checkpoints.IntervalMS)*time.Millisecond))
	}
	var worst *api.Stall
	for i := range st.Stalls {
		if s := &st.Stalls[i]; worst == nil || s.DurationMS > worst.DurationMS {
			worst = s
		}
	}
	if worst != nil {
		lines = append(lines, fmt.Sprintf("longest recent stall: %s waited %v for %s (backlog %d) at checkpoint %d, ended %s, %s",
			worst.Subtask, time.Duration(worst.DurationMS)*time.Millisecond, worst.WaitedFor, worst.Backlog, worst.CheckpointID,
			time.UnixMilli(worst.EndedUnixMS()).Format(time.TimeOnly), worst.Outcome))
	}
	return lines
}

// eventLag is how far op's event time trails the agent's clock, or "-"
// where its records carry none.
func eventLag(op api.Operator) string {
	if op.WatermarkUnixMS == 0 {
		return "-"
	}
	switch d := time.Duration(op.WatermarkLagMS) * time.Millisecond; {
	case d < 10*time.Second:
		return d.String()
	case d < 48*time.Hour:
		return d.Round(time.Second).String()
	default:
		return fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	}
}
