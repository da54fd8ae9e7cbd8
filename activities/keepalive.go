package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// keepAliveInterval is how often a short agent call reports to Temporal; the
// workflow gives those calls a heartbeat timeout (the policy's
// AgentActivityHeartbeat, 30 s by default) so that the attempt of a worker
// that died is retried after that long instead of after the call's whole
// start-to-close timeout (docs/crash-safety.md).
const keepAliveInterval = 10 * time.Second

// keepAlive heartbeats a regular activity until the returned stop is called;
// it does nothing for local activities and outside Temporal.
func keepAlive(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) || activity.GetInfo(ctx).IsLocalActivity {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(keepAliveInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}
