package activities

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// keepAliveInterval is how often a running agent or BMC call reports to
// Temporal; the workflow gives those calls a heartbeat timeout (the
// policy's AgentActivityHeartbeat, 30 s by default) so that the attempt of
// a worker that died is retried after that long instead of after the
// call's whole start-to-close timeout (docs/crash-safety.md).
var keepAliveInterval = 10 * time.Second

// KeepAliveInterceptor heartbeats every regular activity a worker runs,
// every keepAliveInterval while it runs: a BMC call that waits on a BMC
// that does not answer keeps its attempt alive as long as its worker is,
// and no longer. Each beat carries the details the activity last recorded
// (else those its attempt started with), so that an activity that keeps
// its progress in its heartbeat (RunAgentStep's agent command) finds it
// on its next attempt, never an empty beat of the interceptor's.
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
	out *keepAliveOutbound
}

func (k *keepAliveActivity) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	k.out = &keepAliveOutbound{}
	k.out.Next = outbound
	return k.Next.Init(k.out)
}

func (k *keepAliveActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	defer keepAliveWith(ctx, func() { k.out.again(ctx) })()
	return k.Next.ExecuteActivity(ctx, in)
}

// keepAliveOutbound sees the activity's own heartbeats.
type keepAliveOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	mu   sync.Mutex
	last []any // the details the activity last recorded; nil: none yet
}

func (o *keepAliveOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	if len(details) > 0 {
		o.mu.Lock()
		o.last = details
		o.mu.Unlock()
	}
	o.Next.RecordHeartbeat(ctx, details...)
}

// again reports once more what the activity last reported: its own
// details, else the ones its attempt started with (beat).
func (o *keepAliveOutbound) again(ctx context.Context) {
	o.mu.Lock()
	last := o.last
	o.mu.Unlock()
	if last != nil {
		o.Next.RecordHeartbeat(ctx, last...)
		return
	}
	beat(ctx)
}

// keepAlive heartbeats a regular activity until the returned stop is called;
// it does nothing for local activities and outside Temporal.
func keepAlive(ctx context.Context) (stop func()) {
	return keepAliveWith(ctx, func() { activity.RecordHeartbeat(ctx) })
}

// keepAliveWith calls beat every keepAliveInterval until the returned stop
// is called, for a regular activity.
func keepAliveWith(ctx context.Context, beat func()) (stop func()) {
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
				beat()
			}
		}
	}()
	return func() { close(done) }
}
