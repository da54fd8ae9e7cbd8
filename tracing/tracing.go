// Package tracing exports ironflow's OpenTelemetry traces by OTLP
// (docs/tracing.md): a span per API request, carried into the workflows by
// Temporal's tracing interceptor (go.temporal.io/sdk/contrib/opentelemetry),
// the activities as its children, and the steps, the agent's commands and
// the image write as spans the worker builds from the agent's answers.
//
// With no endpoint nothing is set up: the global tracer provider stays
// OpenTelemetry's no-op one and Temporal gets no interceptor. With one,
// spans go through a bounded queue to a background exporter: a slow or
// unreachable collector costs dropped spans (counted in
// ironflow_trace_spans_dropped_total), never a request's time.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"github.com/ironflow/ironflow"
	"github.com/ironflow/ironflow/metrics"
)

// Defaults of Config (docs/tracing.md).
const (
	DefaultQueueSize     = 4096
	DefaultBatchSize     = 512
	DefaultExportTimeout = 5 * time.Second
	DefaultFlushInterval = time.Second
)

// Config says where and how a process exports its spans.
type Config struct {
	// Endpoint is the collector's OTLP/gRPC address: host:port (plain
	// gRPC), or http://host:port, https://host:port (TLS). Empty: no
	// tracing.
	Endpoint string
	// Service is the process's service.name (ironflow-api,
	// ironflow-worker, ironflow-dev).
	Service string
	// QueueSize bounds the spans waiting for export; BatchSize is the
	// most one export sends; ExportTimeout bounds one export;
	// FlushInterval is how long a span waits for a batch to fill.
	QueueSize, BatchSize int
	ExportTimeout        time.Duration
	FlushInterval        time.Duration
}

// Provider is a process's tracing; a nil Provider is tracing off.
type Provider struct {
	tp   *sdktrace.TracerProvider
	proc *boundedProcessor
	icpt []interceptor.Interceptor
}

// Setup starts exporting to cfg.Endpoint and makes the result the global
// tracer provider, with W3C trace-context propagation. An empty endpoint
// returns a nil Provider and changes nothing.
func Setup(cfg Config, log *slog.Logger) (*Provider, error) {
	if cfg.Endpoint == "" {
		return nil, nil
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.ExportTimeout <= 0 {
		cfg.ExportTimeout = DefaultExportTimeout
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.Service == "" {
		cfg.Service = "ironflow"
	}
	opts := []otlptracegrpc.Option{
		otlptracegrpc.WithTimeout(cfg.ExportTimeout),
		// The queue is the retry's budget: a failed batch is counted
		// dropped and the next one goes on (no request ever waits).
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}),
	}
	if strings.Contains(cfg.Endpoint, "://") {
		if !strings.HasPrefix(cfg.Endpoint, "http://") && !strings.HasPrefix(cfg.Endpoint, "https://") {
			return nil, fmt.Errorf("tracing: --otel-endpoint %q: want host:port, http://host:port or https://host:port", cfg.Endpoint)
		}
		opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
	} else {
		opts = append(opts, otlptracegrpc.WithEndpoint(cfg.Endpoint), otlptracegrpc.WithInsecure())
	}
	// New does not connect: gRPC dials lazily, so an unreachable
	// collector does not hold up the start either.
	exp, err := otlptracegrpc.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter for %s: %w", cfg.Endpoint, err)
	}
	proc := newBoundedProcessor(exp, cfg, log)
	res := resource.NewSchemaless(
		attribute.String("service.name", cfg.Service),
		attribute.String("service.version", ironflow.Version()),
	)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(DropReplayed(proc)), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	icpt, err := TemporalInterceptors(otel.Tracer(tracerName))
	if err != nil {
		_ = tp.Shutdown(context.Background())
		return nil, err
	}
	if log != nil {
		log.Info("exporting traces", "endpoint", cfg.Endpoint, "service", cfg.Service, "queue", cfg.QueueSize)
	}
	return &Provider{tp: tp, proc: proc, icpt: icpt}, nil
}

// TemporalInterceptors are Temporal's tracing interceptor on tracer, and
// the replay marker inside it: set on a client, they put the caller's span
// in the headers of the workflows it starts and signals, and on the
// workers built on that client they start the workflow's and each
// activity's span from those headers (only headers: the commands a
// workflow records do not change; no activity span is started while a
// workflow replays, and a replay's workflow span is marked and dropped,
// DropReplayed).
func TemporalInterceptors(tracer trace.Tracer) ([]interceptor.Interceptor, error) {
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer:            tracer,
		TextMapPropagator: propagation.TraceContext{},
	})
	if err != nil {
		return nil, fmt.Errorf("tracing: Temporal interceptor: %w", err)
	}
	return []interceptor.Interceptor{i, &replayMarker{}}, nil
}

// Interceptors is the Temporal client interceptors of p: none when p is nil.
func (p *Provider) Interceptors() []interceptor.ClientInterceptor {
	if p == nil {
		return nil
	}
	out := make([]interceptor.ClientInterceptor, len(p.icpt))
	for i, c := range p.icpt {
		out[i] = c
	}
	return out
}

// Shutdown exports what is queued (within ctx) and stops.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// ForceFlush exports what is queued now (tests).
func (p *Provider) ForceFlush(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.ForceFlush(ctx)
}

const tracerName = "github.com/ironflow/ironflow"

// Tracer is ironflow's tracer (the no-op one while tracing is off).
func Tracer() trace.Tracer { return otel.Tracer(tracerName) }

// boundedProcessor queues ended spans in a bounded channel and exports them
// in batches from one goroutine. OnEnd never blocks: a full queue drops the
// span and counts it.
type boundedProcessor struct {
	exp     sdktrace.SpanExporter
	cfg     Config
	log     *slog.Logger
	queue   chan sdktrace.ReadOnlySpan
	flush   chan chan struct{}
	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
	// lastWarn rate-limits the log line of a failed export.
	lastWarn time.Time
}

func newBoundedProcessor(exp sdktrace.SpanExporter, cfg Config, log *slog.Logger) *boundedProcessor {
	p := &boundedProcessor{exp: exp, cfg: cfg, log: log,
		queue: make(chan sdktrace.ReadOnlySpan, cfg.QueueSize),
		flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *boundedProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (p *boundedProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case p.queue <- s:
	default:
		metrics.TraceSpansDropped.WithLabelValues("queue_full").Inc()
	}
}

func (p *boundedProcessor) run() {
	defer close(p.done)
	batch := make([]sdktrace.ReadOnlySpan, 0, p.cfg.BatchSize)
	t := time.NewTicker(p.cfg.FlushInterval)
	defer t.Stop()
	drain := func() {
		for len(batch) < p.cfg.BatchSize {
			select {
			case s := <-p.queue:
				batch = append(batch, s)
			default:
				return
			}
		}
	}
	for {
		select {
		case s := <-p.queue:
			batch = append(batch, s)
			if len(batch) >= p.cfg.BatchSize {
				batch = p.export(batch)
			}
		case <-t.C:
			batch = p.export(batch)
		case ack := <-p.flush:
			for {
				drain()
				if len(batch) == 0 {
					break
				}
				batch = p.export(batch)
			}
			close(ack)
		case <-p.stop:
			for {
				drain()
				if len(batch) == 0 {
					return
				}
				batch = p.export(batch)
			}
		}
	}
}

// export sends batch and returns it emptied.
func (p *boundedProcessor) export(batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	if len(batch) == 0 {
		return batch
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ExportTimeout)
	err := p.exp.ExportSpans(ctx, batch)
	cancel()
	if err != nil {
		metrics.TraceSpansDropped.WithLabelValues("export_failed").Add(float64(len(batch)))
		if p.log != nil && time.Since(p.lastWarn) > time.Minute {
			p.lastWarn = time.Now()
			p.log.Warn("trace export failed; spans dropped", "endpoint", p.cfg.Endpoint, "spans", len(batch), "err", err)
		}
	} else {
		metrics.TraceSpansExported.Add(float64(len(batch)))
	}
	clear(batch)
	return batch[:0]
}

func (p *boundedProcessor) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case p.flush <- ack:
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *boundedProcessor) Shutdown(ctx context.Context) error {
	p.stopped.Do(func() { close(p.stop) })
	select {
	case <-p.done:
	case <-ctx.Done():
		return errors.Join(ctx.Err(), p.exp.Shutdown(ctx))
	}
	return p.exp.Shutdown(ctx)
}
