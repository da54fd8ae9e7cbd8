package apiserver

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/internal/testkit/syncbuf"
)

// TestRequestSpanAndLogCarryTheRequestIDs: Ironic's behaviour (oslo.middleware's
// request_id): the answer carries the API's own request id, and a client's
// well-formed X-OpenStack-Request-Id is kept as the global request id; both
// are in the request's log line and its span, which continues the client's
// W3C trace.
func TestRequestSpanAndLogCarryTheRequestIDs(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	var logs syncbuf.Buffer
	st := storetest.New(t)
	h, err := New(DefaultConfig(), st, newFakeEngine(st), slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	const global = "req-0123abcd-0000-4000-8000-00000000beef"
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, c := range []struct {
		sent, wantGlobal string
	}{{global, global}, {"not-an-oslo-id", ""}} {
		logs.Reset()
		req, _ := http.NewRequest("GET", "/v1/nodes/no-such-node", nil)
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.78")
		req.Header.Set("X-OpenStack-Request-Id", c.sent)
		req.Header.Set("traceparent", parent)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		id := rec.Header().Get("Openstack-Request-Id")
		if rec.Code != 404 || !strings.HasPrefix(id, "req-") || id == c.sent || rec.Header().Get("X-Openstack-Request-Id") != id {
			t.Fatalf("sent %q: %d, request ids %q / %q", c.sent, rec.Code, id, rec.Header().Get("X-Openstack-Request-Id"))
		}
		ended := spans.Ended()
		span := ended[len(ended)-1]
		attrs := map[string]string{}
		for _, kv := range span.Attributes() {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		if span.Name() != "GET /v1/nodes/:node" {
			t.Errorf("span name %q", span.Name())
		}
		if attrs[attrRequestID] != id || attrs[attrGlobalRequestID] != c.wantGlobal || attrs["http.response.status_code"] != "404" {
			t.Errorf("sent %q: span attributes %v", c.sent, attrs)
		}
		if span.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || span.Parent().SpanID().String() != "00f067aa0ba902b7" {
			t.Errorf("the span does not continue the client's trace: %v, parent %v", span.SpanContext(), span.Parent())
		}
		var line map[string]any
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			if err := json.Unmarshal([]byte(l), &line); err == nil && line["msg"] == "request" {
				break
			}
		}
		g, _ := line["global_request_id"].(string)
		if line["request_id"] != id || g != c.wantGlobal || line["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("sent %q: access log line %v", c.sent, line)
		}
	}
}
