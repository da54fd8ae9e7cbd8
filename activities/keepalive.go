package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// keepAliveInterval is how often a running agent or BMC call reports to
// Temporal; the workflow gives those calls a heartbeat timeout (the
// policy's AgentActivityHeartbeat, 30 s by default) so that the attempt of
// a worker that died is retried after that long instead of after the
// call's whole start-to-close timeout (docs/crash-safety.md).
const keepAliveInterval = 10 * time.Second

// KeepAliveInterceptor heartbeats every regular activity a worker runs,
// every keepAliveInterval while it runs: a BMC call that waits on a BMC
// that does not answer keeps its attempt alive as long as its worker is,
// and no longer.
type KeepAliveInterceptor struct {
	interceptor.WorkerInterceptorBase
}

// InterceptActivity wraps the worker's activity calls.
func (*KeepAliveInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &keepAliveActivity{}
	i.Next = next
	return i
}

type keepAliveActivity struct {
	interceptor.ActivityInboundInterceptorBase
}

func (k *keepAliveActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	defer keepAlive(ctx)()
	return k.Next.ExecuteActivity(ctx, in)
}

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
