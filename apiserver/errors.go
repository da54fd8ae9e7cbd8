package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/pyliteral"
)

// apiError is an error answered with Ironic's error body. Handlers return it;
// anything else becomes a 500 whose detail stays in the log.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d: %s", e.status, e.msg) }

func errorf(status int, format string, args ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, format, args...)
}

// notAcceptable is Ironic's NotAcceptable: a feature asked below the version
// that introduced it.
func notAcceptable() *apiError {
	return &apiError{status: http.StatusNotAcceptable, msg: "Request not acceptable."}
}

// methodNotAllowed is the 405 of a method a path does not serve.
func methodNotAllowed(method string) *apiError {
	return errorf(http.StatusMethodNotAllowed, "The method %s is not allowed for this resource.", method)
}

// resourceNotFound is Ironic's generic 404 (unknown routes, lookups, features
// hidden below their version).
func resourceNotFound() *apiError {
	return &apiError{status: http.StatusNotFound, msg: "Resource could not be found."}
}

func nodeNotFound(ident string) *apiError {
	return errorf(http.StatusNotFound, "Node %s could not be found.", ident)
}

// errorBody renders Ironic's double-encoded error body: the outer object's
// error_message is a JSON string holding {faultcode, faultstring, debuginfo},
// both encoded as Python's json.dumps does (", " and ": " separators,
// non-ASCII escaped) so that the bytes match Ironic's.
func errorBody(status int, msg string) []byte {
	fault := "Client"
	if status >= 500 {
		fault = "Server"
	}
	inner := `{"faultcode": ` + pyliteral.JSONString(fault) + `, "faultstring": ` + pyliteral.JSONString(msg) + `, "debuginfo": null}`
	return []byte(`{"error_message": ` + pyliteral.JSONString(inner) + `}`)
}

// versionErrorBody is the different inner shape of the 406 answered by
// microversion negotiation.
func versionErrorBody(description string) []byte {
	inner := `{"code": 406, "title": "Not Acceptable", "description": ` + pyliteral.JSONString(description) + `}`
	return []byte(`{"error_message": ` + pyliteral.JSONString(inner) + `}`)
}

// handler is an API endpoint: it writes its answer and returns nil, or
// returns the error to answer with (see handle).
type handler func(c *gin.Context) error

// handle adapts a handler to gin: a returned error is answered by
// writeError, the one place that turns an error into Ironic's error body.
func (s *server) handle(h handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := h(c); err != nil {
			s.writeError(c, err)
		}
	}
}

// loaded adapts an endpoint of one object (a node, a port) to a handler:
// load finds the object the path names or returns the error to answer.
func loaded[T any](load func(c *gin.Context) (*T, error), h func(c *gin.Context, obj *T) error) handler {
	return func(c *gin.Context) error {
		obj, err := load(c)
		if err != nil {
			return err
		}
		return h(c, obj)
	}
}

// introducedIn hides h below the version that introduced its endpoint, as
// Ironic answers such a request: 404.
func introducedIn(minor int, h handler) handler {
	return func(c *gin.Context) error {
		if ver(c) < minor {
			return resourceNotFound()
		}
		return h(c)
	}
}

// writeError answers err: an *apiError anywhere in its chain (errors.As, so
// that fmt.Errorf("...: %w", apiErr) keeps its status and message) as
// itself, anything else as a 500 that says nothing about the cause (it is
// logged with the request id).
func (s *server) writeError(c *gin.Context, err error) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
	case dependencyDown(err) && c.Request.Context().Err() == nil:
		s.log.WarnContext(c.Request.Context(), "request failed: a dependency is unavailable",
			"method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
		ae = temporaryFailure()
	default:
		s.log.ErrorContext(c.Request.Context(), "request failed",
			"method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
		ae = &apiError{status: http.StatusInternalServerError, msg: "Internal Server Error"}
	}
	writeRaw(c, ae.status, errorBody(ae.status, sanitizeUTF8(ae.msg)))
}

func writeRaw(c *gin.Context, status int, body []byte) {
	c.Header("Content-Type", "application/json")
	c.Header("Content-Length", strconv.Itoa(len(body)))
	c.Status(status)
	_, _ = c.Writer.Write(body)
	c.Abort()
}

func sanitizeUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// FaultString is the message of an error body as the API writes it
// (error_message holding faultstring); the error_message itself when it
// holds no faultstring, the trimmed body when it is not one.
func FaultString(body []byte) string {
	var outer struct {
		ErrorMessage string `json:"error_message"`
	}
	if json.Unmarshal(body, &outer) != nil || outer.ErrorMessage == "" {
		return strings.TrimSpace(string(body))
	}
	var inner struct {
		Faultstring string `json:"faultstring"`
	}
	if json.Unmarshal([]byte(outer.ErrorMessage), &inner) != nil || inner.Faultstring == "" {
		return outer.ErrorMessage
	}
	return inner.Faultstring
}
