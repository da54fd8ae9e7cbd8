package tracing

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel"

	"github.com/ironflow/ironflow/internal/testkit/otlpsink"
	"github.com/ironflow/ironflow/metrics"
)

func TestNoEndpointSetsNothingUp(t *testing.T) {
	p, err := Setup(Config{}, nil)
	if err != nil || p != nil {
		t.Fatalf("Setup without an endpoint: %v, %v; want nil, nil", p, err)
	}
	if len(p.Interceptors()) != 0 {
		t.Fatal("tracing off still gives Temporal an interceptor")
	}
}

// TestSpansReachTheCollector: spans end up at a real OTLP/gRPC receiver
// with the process's service name and their parent links.
func TestSpansReachTheCollector(t *testing.T) {
	sink, err := otlpsink.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Stop()
	p, err := Setup(Config{Endpoint: sink.Addr(), Service: "ironflow-test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	exported := testutil.ToFloat64(metrics.TraceSpansExported)
	ctx, parent := Tracer().Start(context.Background(), "parent")
	_, child := otel.Tracer("x").Start(ctx, "child")
	child.End()
	parent.End()
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := sink.Spans()
	if len(spans) != 2 {
		t.Fatalf("the collector received %d spans, want 2: %+v", len(spans), spans)
	}
	byName := map[string]otlpsink.Span{}
	for _, s := range spans {
		byName[s.Name] = s
		if s.Service != "ironflow-test" {
			t.Errorf("span %s: service.name %q", s.Name, s.Service)
		}
	}
	if c, pa := byName["child"], byName["parent"]; c.Parent != pa.SpanID || c.TraceID != pa.TraceID {
		t.Errorf("child %+v is not the child of parent %+v", c, pa)
	}
	if got := testutil.ToFloat64(metrics.TraceSpansExported) - exported; got != 2 {
		t.Errorf("ironflow_trace_spans_exported_total rose by %v, want 2", got)
	}
}

// TestABlackHoledCollectorDelaysNothing: a collector that accepts the
// connection and never answers costs dropped spans, counted, and no
// span's End waits for it.
func TestABlackHoledCollectorDelaysNothing(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never read
		}
	}()
	p, err := Setup(Config{Endpoint: l.Addr().String(), QueueSize: 16, BatchSize: 8, ExportTimeout: 300 * time.Millisecond, FlushInterval: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	full := testutil.ToFloat64(metrics.TraceSpansDropped.WithLabelValues("queue_full"))
	failed := testutil.ToFloat64(metrics.TraceSpansDropped.WithLabelValues("export_failed"))
	start := time.Now()
	for range 2000 {
		_, s := Tracer().Start(context.Background(), "request")
		s.End()
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("2000 spans took %v to end against a black-holed collector", d)
	}
	if got := testutil.ToFloat64(metrics.TraceSpansDropped.WithLabelValues("queue_full")) - full; got < 1000 {
		t.Errorf("queue_full drops rose by %v, want most of the 2000 spans", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(metrics.TraceSpansDropped.WithLabelValues("export_failed")) == failed {
		if time.Now().After(deadline) {
			t.Fatal("no export_failed drop counted within 5s of a black-holed export")
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = p.Shutdown(ctx)
}
