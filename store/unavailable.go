package store

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Bounds on every database call, so that a PostgreSQL that is down (the
// connection is refused) or unreachable (packets dropped: a call would hang
// until TCP gives up, many minutes later) costs a caller seconds, not its
// whole request (docs/production.md, "When PostgreSQL is unreachable").
const (
	// DefaultConnectTimeout bounds opening one connection, when the URL
	// sets no connect_timeout of its own.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultQueryTimeout bounds one statement (a transaction's BEGIN,
	// each statement and its COMMIT each get it) whose context has no
	// deadline of its own. A caller's own deadline is left alone.
	DefaultQueryTimeout = 15 * time.Second
)

// ErrUnavailable: the database could not be reached or did not answer in
// time. The API answers 503 for it (Ironic's TemporaryFailure), and a
// workflow's activity retries it.
var ErrUnavailable = errors.New("database unavailable")

// IsUnavailable reports whether err says the database cannot be reached
// now, rather than that the request was wrong: a refused or dropped
// connection, a call that outlived its deadline, a server shutting down or
// out of resources (disk full, too many connections).
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", // connection exception
			"53", // insufficient resources: disk full, out of memory, too many connections
			"57": // operator intervention: admin shutdown, cannot connect now
			return pgErr.Code != "57014" // query_canceled by a caller is not an outage
		}
		return false
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	if pgconn.Timeout(err) || pgconn.SafeToRetry(err) {
		return true
	}
	// A statement cut by DefaultQueryTimeout, or a connection the
	// server closed under it.
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, net.ErrClosed)
}

// queryDeadline is the pgx tracer that gives each statement without a
// deadline DefaultQueryTimeout (pgx runs the statement under the context
// TraceQueryStart returns, and hands it back to TraceQueryEnd).
type queryDeadline struct{ timeout time.Duration }

type cancelKey struct{}

type noDeadlineKey struct{}

// withoutQueryDeadline marks ctx as one whose statements may wait as long
// as it lasts (Migrate's advisory lock waits for another process).
func withoutQueryDeadline(ctx context.Context) context.Context {
	return context.WithValue(ctx, noDeadlineKey{}, true)
}

func (q queryDeadline) start(ctx context.Context) context.Context {
	if _, ok := ctx.Deadline(); ok || ctx.Value(noDeadlineKey{}) != nil {
		// No deadline of its own: a nil cancel hides an enclosing
		// start's (Ping's around an acquire), which end must not call.
		return context.WithValue(ctx, cancelKey{}, context.CancelFunc(nil))
	}
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	return context.WithValue(ctx, cancelKey{}, cancel)
}

func (q queryDeadline) end(ctx context.Context) {
	if cancel, ok := ctx.Value(cancelKey{}).(context.CancelFunc); ok && cancel != nil {
		cancel()
	}
}

// TraceAcquireStart bounds taking a connection from the pool by the same
// deadline: the wait for one while every connection is busy with a
// statement that hangs, the connect of a new one, and the ping pgxpool
// sends on one that was idle, which a black-holed database never answers
// (pgxpool.AcquireTracer; the statement then gets its own deadline).
func (q queryDeadline) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return q.start(ctx)
}

func (q queryDeadline) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	q.end(ctx)
}

func (q queryDeadline) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return q.start(ctx)
}

func (q queryDeadline) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	q.end(ctx)
}

func (q queryDeadline) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return q.start(ctx)
}

func (q queryDeadline) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (q queryDeadline) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	q.end(ctx)
}
