package activities

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
)

// TestKeepAliveInterceptorKeepsTheActivitysDetails: the interceptor beats
// while an activity runs, and every beat after the activity recorded its
// progress carries that progress (an empty beat would wipe what the next
// attempt resumes from); an activity that records nothing is kept alive
// too. beatRecorder, placed before it, sees every beat it sends on (the
// SDK throttles what reaches the server).
func TestKeepAliveInterceptorKeepsTheActivitysDetails(t *testing.T) {
	old := keepAliveInterval
	keepAliveInterval = 20 * time.Millisecond
	t.Cleanup(func() { keepAliveInterval = old })
	for name, records := range map[string]bool{"records its progress": true, "records nothing": false} {
		t.Run(name, func(t *testing.T) {
			rec := &beatRecorder{}
			var s testsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{rec, &KeepAliveInterceptor{}}})
			env.RegisterActivityWithOptions(func(ctx context.Context) error {
				if records {
					activity.RecordHeartbeat(ctx, "command 7 of the agent")
				}
				time.Sleep(300 * time.Millisecond)
				return nil
			}, activity.RegisterOptions{Name: "LongCall"})
			if _, err := env.ExecuteActivity("LongCall"); err != nil {
				t.Fatal(err)
			}
			beats := rec.all()
			if len(beats) < 3 {
				t.Fatalf("%d beats in 300 ms at a 20 ms interval: %q", len(beats), beats)
			}
			for i, b := range beats {
				if records && b != "command 7 of the agent" {
					t.Fatalf("beat %d carries %q, not the activity's progress (all: %q)", i, b, beats)
				}
			}
		})
	}
}

// beatRecorder keeps the details of every heartbeat that passes it.
type beatRecorder struct {
	interceptor.WorkerInterceptorBase
	mu    sync.Mutex
	beats []string
}

func (r *beatRecorder) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &recordingInbound{r: r}
	i.Next = next
	return i
}

func (r *beatRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.beats...)
}

type recordingInbound struct {
	interceptor.ActivityInboundInterceptorBase
	r *beatRecorder
}

func (i *recordingInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	o := &recordingOutbound{r: i.r}
	o.Next = outbound
	return i.Next.Init(o)
}

type recordingOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	r *beatRecorder
}

func (o *recordingOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	d := ""
	if len(details) > 0 {
		d, _ = details[0].(string)
	}
	o.r.mu.Lock()
	o.r.beats = append(o.r.beats, d)
	o.r.mu.Unlock()
	o.Next.RecordHeartbeat(ctx, details...)
}
