package apiserver

import (
	"context"
	"log/slog"
	"regexp"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ironflow/ironflow/tracing"
)

// ctxGlobalRequestID keeps the client's X-OpenStack-Request-Id.
const ctxGlobalRequestID = "ironflow.global_request_id"

// globalRequestIDFormat is oslo.middleware's (request_id.py, ID_FORMAT):
// Ironic keeps the id a client sends in X-OpenStack-Request-Id as the
// request's global_request_id when it has this form, and answers with its
// own request id whatever the client sent.
var globalRequestIDFormat = regexp.MustCompile(`^req-[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$`)

// globalRequestID is the client's request id, "" when it sent none or one
// not of oslo's form (which Ironic drops too).
func globalRequestID(c *gin.Context) string {
	if id := c.GetHeader(headerXRequestID); globalRequestIDFormat.MatchString(id) {
		return id
	}
	return ""
}

// Span attributes of a request (docs/tracing.md).
const (
	attrRequestID       = "openstack.request_id"
	attrGlobalRequestID = "openstack.global_request_id"
)

// startRequestSpan starts the request's server span, a child of the
// caller's when it sent a W3C traceparent, and puts it (and the request
// ids, for the log lines written with the request's context) in the
// request's context, which the workflows the request starts inherit
// through Temporal's tracing interceptor. While tracing is off the span
// is OpenTelemetry's no-op one.
func startRequestSpan(c *gin.Context, id, global string) func() {
	req := c.Request
	ctx := otel.GetTextMapPropagator().Extract(req.Context(), propagation.HeaderCarrier(req.Header))
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", req.Method),
		attribute.String("http.route", route),
		attribute.String(attrRequestID, id),
	}
	if global != "" {
		attrs = append(attrs, attribute.String(attrGlobalRequestID, global))
	}
	ctx, span := tracing.Tracer().Start(ctx, req.Method+" "+route,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	ctx = withRequestIDs(ctx, id, global)
	c.Request = req.WithContext(ctx)
	return func() {
		status := c.Writer.Status()
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, "")
		}
		span.End()
	}
}

// traceID is the request's trace id for its log lines ("" while tracing
// is off).
func traceID(c *gin.Context) string {
	if sc := trace.SpanContextFromContext(c.Request.Context()); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

type requestIDsKey struct{}

type requestIDs struct{ id, global string }

func withRequestIDs(ctx context.Context, id, global string) context.Context {
	return context.WithValue(ctx, requestIDsKey{}, requestIDs{id, global})
}

// requestLogHandler adds the request's ids (request_id, and
// global_request_id when the client sent one) and its trace id to every
// line logged with the request's context (s.log.InfoContext(ctx, ...)).
type requestLogHandler struct{ slog.Handler }

func (h requestLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if ids, ok := ctx.Value(requestIDsKey{}).(requestIDs); ok {
		r.AddAttrs(slog.String("request_id", ids.id))
		if ids.global != "" {
			r.AddAttrs(slog.String("global_request_id", ids.global))
		}
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestLogHandler{h.Handler.WithAttrs(as)}
}

func (h requestLogHandler) WithGroup(name string) slog.Handler {
	return requestLogHandler{h.Handler.WithGroup(name)}
}
