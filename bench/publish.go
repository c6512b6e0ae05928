package bench

import (
	"context"
	"fmt"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// publishPaced publishes at QoS 1 from c, rate messages a second in ticks
// of 10 ms, the i-th (from 0) being message(i), until limit are published
// (limit < 0: until ctx ends). At most 1000 wait for the broker's
// acknowledgement: a broker that falls behind slows the load instead of
// exhausting the publisher's packet ids. It returns once the broker has
// acknowledged every message published, with the first failure, or
// ctx's error if it ended first.
func publishPaced(ctx context.Context, c paho.Client, rate, limit int, message func(i int) (topic, payload string)) error {
	inflight := make(chan paho.Token, 1000)
	acked := make(chan error, 1)
	go func() {
		var err error
		for t := range inflight {
			if err == nil && (!t.WaitTimeout(time.Minute) || t.Error() != nil) {
				err = fmt.Errorf("publish: %v", t.Error())
			}
		}
		acked <- err
	}()
	const tick = 10 * time.Millisecond
	start := time.Now()
	n := 0
	for next := start; ctx.Err() == nil && n != limit; {
		due := int(time.Since(start).Seconds() * float64(rate))
		if limit >= 0 {
			due = min(due, limit)
		}
		for ; n < due; n++ {
			topic, payload := message(n)
			inflight <- c.Publish(topic, 1, false, payload)
		}
		next = next.Add(tick)
		select {
		case <-time.After(time.Until(next)): // pacing the load, not waiting for an event
		case <-ctx.Done():
		}
	}
	close(inflight)
	if err := <-acked; err != nil {
		return err
	}
	if n != limit {
		return ctx.Err()
	}
	return nil
}
