package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// attrReplayed marks the workflow span of a workflow a worker rebuilt from
// its history (after a restart or a cache eviction): Temporal's interceptor
// starts a RunWorkflow span each time the workflow function runs, and the
// one the first worker started is the workflow's span; the rebuilt one is
// dropped before export (dropReplayed), so that a replay emits nothing.
const attrReplayed = "ironflow.replayed"

// replayMarker runs inside Temporal's tracing interceptor and marks the
// workflow span of a run that starts replaying.
type replayMarker struct {
	interceptor.WorkerInterceptorBase
	interceptor.ClientInterceptorBase
}

func (*replayMarker) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &replayMarkerInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type replayMarkerInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (r *replayMarkerInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	if workflow.IsReplaying(ctx) {
		if span, ok := temporalotel.SpanFromWorkflowContext(ctx); ok {
			span.SetAttributes(attribute.Bool(attrReplayed, true))
		}
	}
	return r.Next.ExecuteWorkflow(ctx, in)
}

// dropReplayed passes every span to next but the workflow spans of
// replays.
type dropReplayed struct{ sdktrace.SpanProcessor }

// DropReplayed wraps a span processor so that it never sees the workflow
// span of a replay (replayMarker).
func DropReplayed(next sdktrace.SpanProcessor) sdktrace.SpanProcessor { return dropReplayed{next} }

func (d dropReplayed) OnEnd(s sdktrace.ReadOnlySpan) {
	for _, kv := range s.Attributes() {
		if kv.Key == attrReplayed && kv.Value.AsBool() {
			return
		}
	}
	d.SpanProcessor.OnEnd(s)
}

func (d dropReplayed) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	d.SpanProcessor.OnStart(ctx, s)
}
