// Package otlpsink is a tiny OTLP/gRPC trace receiver for tests (Debian has
// no OpenTelemetry collector): it keeps every span it is sent, with its
// resource's service.name, and lets a test look them up.
package otlpsink

import (
	"context"
	"encoding/hex"
	"net"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// Span is one received span.
type Span struct {
	Service, Name           string
	TraceID, SpanID, Parent string
	Attributes              map[string]string
	Span                    *tracepb.Span
}

// Sink is a running receiver.
type Sink struct {
	coltracepb.UnimplementedTraceServiceServer
	addr  string
	srv   *grpc.Server
	mu    sync.Mutex
	spans []Span
}

// Start listens on a free loopback port.
func Start() (*Sink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Sink{addr: l.Addr().String(), srv: grpc.NewServer()}
	coltracepb.RegisterTraceServiceServer(s.srv, s)
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// Addr is the host:port to give --otel-endpoint.
func (s *Sink) Addr() string { return s.addr }

// Stop stops the receiver.
func (s *Sink) Stop() { s.srv.Stop() }

// Export is the OTLP trace service.
func (s *Sink) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				attrs := map[string]string{}
				for _, kv := range sp.GetAttributes() {
					v := kv.GetValue()
					switch {
					case v.GetStringValue() != "":
						attrs[kv.GetKey()] = v.GetStringValue()
					default:
						attrs[kv.GetKey()] = v.String()
					}
				}
				s.spans = append(s.spans, Span{Service: service, Name: sp.GetName(),
					TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
					Parent: hex.EncodeToString(sp.GetParentSpanId()), Attributes: attrs, Span: sp})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Spans is every span received so far.
func (s *Sink) Spans() []Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Span(nil), s.spans...)
}

// Trace is the spans of one trace.
func (s *Sink) Trace(traceID string) []Span {
	var out []Span
	for _, sp := range s.Spans() {
		if sp.TraceID == traceID {
			out = append(out, sp)
		}
	}
	return out
}
