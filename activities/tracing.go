package activities

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/ironflow/ironflow/agent/client"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/tracing"
)

// Spans the worker builds for a step (docs/tracing.md): the step itself, a
// child of Temporal's span of the activity that runs it, and, for an
// in-band step, the agent's command as the step's child, built from the
// command's results and progress as the worker polls them (the ramdisk
// cannot reach a collector). The command that writes the image is the
// "agent image write" span. While tracing is off they are no-op spans.

// startStepSpan starts the span of a step and returns its end.
func startStepSpan(ctx context.Context, kind provision.StepKind, s provision.Step) (context.Context, func(error)) {
	ctx, span := tracing.Tracer().Start(ctx, "step "+string(kind)+" "+s.Name(), trace.WithAttributes(
		attribute.String("ironflow.step.kind", string(kind)),
		attribute.String("ironflow.step.interface", s.Interface),
		attribute.String("ironflow.step.name", s.Step),
		attribute.Int("ironflow.step.priority", s.Priority),
	))
	return ctx, func(err error) { endSpan(span, err) }
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// agentCommandSpan follows one agent command.
type agentCommandSpan struct {
	span     trace.Span
	progress client.Progress
	seen     bool
}

// startAgentCommandSpan starts the span of the command a step runs (at
// start, when the worker sends it, or when it finds a running command
// of an earlier attempt).
func startAgentCommandSpan(ctx context.Context, s provision.Step, start time.Time) *agentCommandSpan {
	name := "agent " + s.Interface + "." + s.Step
	if s.StepID == provision.StepWriteImage {
		name = "agent image write"
	}
	_, span := tracing.Tracer().Start(ctx, name, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindClient))
	return &agentCommandSpan{span: span}
}

// progressed records the command's progress report (its last counts go
// on the span at its end; a new stage is an event).
func (c *agentCommandSpan) progressed(p client.Progress) {
	if p.Stage != "" && p.Stage != c.progress.Stage {
		c.span.AddEvent("stage " + p.Stage)
	}
	c.progress, c.seen = p, true
}

// end closes the span with the command's result.
func (c *agentCommandSpan) end(r client.CommandResult, err error) {
	c.span.SetAttributes(attribute.String("ironflow.agent.command_id", r.ID),
		attribute.String("ironflow.agent.command_name", r.CommandName),
		attribute.String("ironflow.agent.command_status", r.CommandStatus))
	if p, ok := r.Progress(); ok {
		c.progress, c.seen = p, true
	}
	if c.seen {
		c.span.SetAttributes(attribute.Int64("ironflow.image.bytes_downloaded", c.progress.BytesDownloaded),
			attribute.Int64("ironflow.image.bytes_written", c.progress.BytesWritten),
			attribute.Int64("ironflow.image.total_bytes", c.progress.TotalBytes))
	}
	if err == nil {
		err = r.Err()
	}
	endSpan(c.span, err)
}
