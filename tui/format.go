package tui

import (
	"fmt"
	"strings"
	"time"
)

// millis formats a duration in milliseconds compactly: 120ms, 3.4s, 2m03s,
// 1h02m, 3d04h, 336d.
func millis(ms int64) string {
	switch {
	case ms < 0:
		return "-"
	case ms < 1000:
		return fmt.Sprintf("%dms", ms)
	case ms < 10_000:
		return fmt.Sprintf("%.1fs", float64(ms)/1000)
	case ms < 60_000:
		return fmt.Sprintf("%ds", ms/1000)
	case ms < 3_600_000:
		return fmt.Sprintf("%dm%02ds", ms/60_000, ms/1000%60)
	case ms < 86_400_000:
		return fmt.Sprintf("%dh%02dm", ms/3_600_000, ms/60_000%60)
	case ms < 10*86_400_000:
		return fmt.Sprintf("%dd%02dh", ms/86_400_000, ms/3_600_000%24)
	default:
		return fmt.Sprintf("%dd", ms/86_400_000)
	}
}

// ago formats an age to the second: 0s, 45s, 2m10s, 1h02m.
func ago(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%ds", int64(d/time.Second))
	}
	return millis(d.Milliseconds())
}

// uptime formats seconds as 1h02m03s, 3m04s or 12s.
func uptime(seconds float64) string {
	s := int64(seconds)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	default:
		return fmt.Sprintf("%dh%02dm%02ds", s/3600, s/60%60, s%60)
	}
}

// count formats a number of records: 812, 1.2k, 34k, 3.4M.
func count(n float64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%.0f", n)
	case n < 10_000:
		return fmt.Sprintf("%.1fk", n/1000)
	case n < 1_000_000:
		return fmt.Sprintf("%.0fk", n/1000)
	default:
		return fmt.Sprintf("%.1fM", n/1_000_000)
	}
}

// bytes formats a size: 812B, 1.2KB, 34MB.
func bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	if v < 10 {
		return fmt.Sprintf("%.1f%cB", v, "KMGT"[exp])
	}
	return fmt.Sprintf("%.0f%cB", v, "KMGT"[exp])
}

// sparkline draws values as one block character each, scaled to the
// largest; at most width of the newest are drawn.
func sparkline(values []int64, width int) string {
	const blocks = "▁▂▃▄▅▆▇█"
	steps := []rune(blocks)
	if len(values) > width {
		values = values[len(values)-width:]
	}
	var top int64
	for _, v := range values {
		top = max(top, v)
	}
	var b strings.Builder
	for _, v := range values {
		i := 0
		if top > 0 {
			i = int(v * int64(len(steps)-1) / top)
		}
		b.WriteRune(steps[i])
	}
	return b.String()
}
