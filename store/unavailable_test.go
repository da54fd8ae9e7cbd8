package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestIsUnavailable: a database that refuses connections, or that the
// call outlived its deadline, is an outage; a request the database refused
// is not.
func TestIsUnavailable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: connections are refused
	_, refused := pgx.Connect(context.Background(), "postgres://u@"+addr+"/db?sslmode=disable")
	if refused == nil {
		t.Fatal("a connection to a closed port succeeded")
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"wrapped by dbError", dbError(refused, "load node %s", "x"), true},
		{"deadline", fmt.Errorf("list nodes: %w", context.DeadlineExceeded), true},
		{"disk full", &pgconn.PgError{Code: "53100"}, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"cancelled by the caller", &pgconn.PgError{Code: "57014"}, false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"no rows", pgx.ErrNoRows, false},
		{"caller went away", context.Canceled, false},
		{"nil", nil, false},
	} {
		if got := IsUnavailable(tc.err); got != tc.want {
			t.Errorf("%s: IsUnavailable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	if !errors.Is(dbError(refused, "load node"), ErrUnavailable) {
		t.Error("dbError does not mark a refused connection ErrUnavailable")
	}
}
