package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/ironflow/ironflow/console/web"
	"log/slog"
	"time"

	"github.com/ironflow/ironflow/store"
)

// DefaultTokenTTL is how long a console token is valid, as Ironic's [vnc]
// token_timeout (600 s).
const DefaultTokenTTL = 600 * time.Second

// Target is where a token leads: the node, the kind of endpoint and its
// host:port on the worker holding the console (the browser side's type, so
// that Tokens is the Resolver of package console/web).
type Target = web.Target

// ErrBadToken: the token is unknown, expired or revoked, names another
// kind, or the node's console is no longer enabled; the pages answer it 401.
var ErrBadToken = web.ErrBadToken

// Tokens is the Resolver of the browser pages.
var _ web.Resolver = (*Tokens)(nil)

// Tokens issues and checks the tokens of the browser pages, stored hashed
// (SHA-256) in PostgreSQL. It is the Resolver of package console/web.
type Tokens struct {
	Store *store.Store
	// TTL is a token's validity; DefaultTokenTTL when 0.
	TTL time.Duration
	Log *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

func (t *Tokens) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// Issue makes a token for the node's endpoint of kind (256 random bits,
// URL-safe) and stores its hash; it returns the token and its expiry.
func (t *Tokens) Issue(ctx context.Context, node, kind string) (string, time.Time, error) {
	ttl := t.TTL
	if ttl <= 0 {
		ttl = DefaultTokenTTL
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", time.Time{}, fmt.Errorf("console token: %w", err)
	}
	tok := base64.RawURLEncoding.EncodeToString(b)
	exp := t.now().Add(ttl)
	if err := t.Store.AddConsoleToken(ctx, hashToken(tok), node, kind, exp); err != nil {
		return "", time.Time{}, err
	}
	return tok, exp, nil
}

// Resolve checks token for kind and answers the endpoint it leads to, read
// from the node at this moment (a worker that took the console over
// listens elsewhere). Every refusal is ErrBadToken, wrapped with the
// reason (never the token).
func (t *Tokens) Resolve(ctx context.Context, token, kind string) (Target, error) {
	if token == "" {
		return Target{}, fmt.Errorf("%w: no token", ErrBadToken)
	}
	rec, err := t.Store.GetConsoleToken(ctx, hashToken(token))
	if errors.Is(err, store.ErrNotFound) {
		return Target{}, fmt.Errorf("%w: unknown token", ErrBadToken)
	}
	if err != nil {
		return Target{}, err
	}
	switch {
	case rec.Kind != kind:
		return Target{}, fmt.Errorf("%w: the token is for the %s console, not the %s one", ErrBadToken, rec.Kind, kind)
	case rec.Revoked:
		return Target{}, fmt.Errorf("%w: the token was revoked (the console was disabled)", ErrBadToken)
	case !t.now().Before(rec.ExpiresAt):
		return Target{}, fmt.Errorf("%w: the token expired at %s", ErrBadToken, rec.ExpiresAt.UTC().Format(time.RFC3339))
	}
	n, err := t.Store.GetNode(ctx, rec.NodeUUID)
	if errors.Is(err, store.ErrNotFound) {
		return Target{}, fmt.Errorf("%w: the node is gone", ErrBadToken)
	}
	if err != nil {
		return Target{}, err
	}
	key := store.KeyConsoleAddress
	if kind == KindGraphical {
		key = store.KeyConsoleGraphicalAddress
	}
	addr, _ := n.DriverInternalInfo[key].(string)
	if !n.ConsoleEnabled || addr == "" {
		return Target{}, fmt.Errorf("%w: the console of node %s is not enabled", ErrBadToken, n.UUID)
	}
	return Target{NodeUUID: n.UUID, Kind: kind, Addr: addr}, nil
}

// Rejected records a refused attempt in the history of the node the token
// names (a token that names none, a guess, is only logged); the token
// itself is never written.
func (t *Tokens) Rejected(ctx context.Context, token, kind, remote string, why error) {
	log := t.Log
	if log == nil {
		log = slog.Default()
	}
	log.Warn("console access refused", "kind", kind, "remote", remote, "reason", why.Error())
	if token == "" {
		return
	}
	rec, err := t.Store.GetConsoleToken(ctx, hashToken(token))
	if err != nil {
		return
	}
	msg := fmt.Sprintf("Console access (%s) refused from %s: %s", kind, remote, why.Error())
	if err := t.Store.AddHistory(ctx, rec.NodeUUID, store.HistoryEvent{
		Severity: store.SeverityError, EventType: "console", Event: msg,
	}); err != nil {
		log.Warn("record refused console access", "node", rec.NodeUUID, "error", err)
	}
}

// Revoke revokes every token of the node (the console is disabled).
func (t *Tokens) Revoke(ctx context.Context, node string) error {
	return t.Store.RevokeConsoleTokens(ctx, node)
}
