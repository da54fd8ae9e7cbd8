package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestHandleAnswersWrappedAPIErrorsWithTheirStatus: the adapter finds an
// *apiError anywhere in the chain, so a handler may wrap one with %w and
// still answer its status and message; anything else is a 500 that hides
// its cause.
func TestHandleAnswersWrappedAPIErrorsWithTheirStatus(t *testing.T) {
	s := &server{log: quietLogger()}
	cases := []struct {
		name   string
		err    error
		status int
		body   string
	}{
		{"bare", nodeNotFound("n1"), http.StatusNotFound, string(errorBody(404, "Node n1 could not be found."))},
		{"wrapped", fmt.Errorf("load: %w", nodeNotFound("n1")), http.StatusNotFound, string(errorBody(404, "Node n1 could not be found."))},
		{"wrapped twice", fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", errorf(http.StatusConflict, "busy"))), http.StatusConflict, string(errorBody(409, "busy"))},
		{"joined", errors.Join(errors.New("other"), badRequest("bad")), http.StatusBadRequest, string(errorBody(400, "bad"))},
		{"plain", errors.New("database down"), http.StatusInternalServerError, string(errorBody(500, "Internal Server Error"))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gin.SetMode(gin.ReleaseMode)
			r := gin.New()
			r.GET("/x", s.handle(func(c *gin.Context) error { return tc.err }))
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d", rec.Code, tc.status)
			}
			if got := rec.Body.String(); got != tc.body {
				t.Fatalf("body %s, want %s", got, tc.body)
			}
		})
	}
}

// TestHandleWritesNothingMoreOnSuccess: a handler that answered and
// returned nil keeps its answer.
func TestHandleWritesNothingMoreOnSuccess(t *testing.T) {
	s := &server{log: quietLogger()}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.GET("/x", s.handle(func(c *gin.Context) error {
		writeEmpty(c, http.StatusNoContent, "")
		return nil
	}))
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
	if rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
		t.Fatalf("got %d %q, want 204 and no body", rec.Code, rec.Body.String())
	}
}
