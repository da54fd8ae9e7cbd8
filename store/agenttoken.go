package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/provision"
)

// NewAgentToken mints an agent token as Ironic does (secrets.token_urlsafe()):
// 32 random bytes, URL-safe base64 without padding, 43 characters. The API's
// lookup issues one to an agent that booted without one; a boot that hands
// the agent its token up front (virtual media, kickstart) pre-generates one.
// Either way the node keeps it in driver_internal_info.
func NewAgentToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate agent token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ErrAgentSessionEnded is what a write on behalf of an agent returns when
// the node's agent token is no longer the one the agent's request was
// checked against: the session it belonged to was wiped (or replaced) in
// between, and the write is not made.
var ErrAgentSessionEnded = errors.New("agent session ended")

// agentTokenIs is the SQL condition that the node's agent token is $n
// ("" for none): what each write on behalf of an agent is conditional on.
// An operation that ends wipes the session (store.AgentSessionKeys) in its
// own statement; a request that read the node before that wipe and writes
// after it must not bring the session back, and PostgreSQL evaluates the
// condition on the row as the wipe left it.
func agentTokenIs(param int) string {
	return fmt.Sprintf("COALESCE(driver_internal_info->>'%s', '') = $%d::text", KeyAgentToken, param)
}

// ClaimAgentURL records url as the node's agent URL if it has none or
// already has that one, in one conditional write, and reports whether it
// did: of heartbeats racing with different callback URLs, exactly one is
// accepted, and the others see the change Ironic refuses. token is the
// node's agent token the heartbeat was checked against; once it is not the
// node's, the claim returns ErrAgentSessionEnded.
func (s *Store) ClaimAgentURL(ctx context.Context, uuid, token, url string) (bool, error) {
	u, _ := canonicalUUID(uuid)
	tag, err := s.pool.Exec(ctx, `UPDATE nodes SET driver_internal_info = driver_internal_info || jsonb_build_object($2::text, $3::text)
		WHERE uuid = $1 AND COALESCE(driver_internal_info->>$2, '') IN ('', $3) AND `+agentTokenIs(4), u, KeyAgentURL, url, token)
	if err != nil {
		return false, dbError(err, "claim the agent URL of node %s", uuid)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	// A token once wiped never comes back (a new session has a new one),
	// so reading it after the write tells which condition failed.
	var same bool
	err = s.pool.QueryRow(ctx, `SELECT `+agentTokenIs(2)+` FROM nodes WHERE uuid = $1`, u, token).Scan(&same)
	switch {
	case err != nil:
		return false, dbError(err, "claim the agent URL of node %s", uuid)
	case !same:
		return false, fmt.Errorf("claim the agent URL of node %s: %w", uuid, ErrAgentSessionEnded)
	}
	return false, nil
}

// IssueAgentToken stores token as the node's agent token if it has none, in
// one conditional write, and returns the node as written; issued is false
// (and the node nil) when the node already holds a token or is gone. Of
// lookups racing for one node, exactly one is issued a token. states, when
// not empty, are the provision states the node must still be in (the
// lookup's restrict_lookup states): a lookup that read the node before its
// operation ended (and wiped the session) gets ErrStateConflict, not a
// token on a node that no longer waits for an agent.
func (s *Store) IssueAgentToken(ctx context.Context, uuid, token string, in []provision.State) (n *Node, issued bool, err error) {
	u, _ := canonicalUUID(uuid)
	states := make([]string, len(in))
	for i, st := range in {
		states[i] = string(st)
	}
	rows, _ := s.pool.Query(ctx, `UPDATE nodes SET driver_internal_info = driver_internal_info || jsonb_build_object($2::text, $3::text),
			updated_at = now()
		WHERE uuid = $1 AND NOT driver_internal_info ? $2::text
			AND (cardinality($4::text[]) = 0 OR provision_state = ANY($4::text[]))
		RETURNING `+nodeColumns, u, KeyAgentToken, token, states)
	n, err = pgx.CollectExactlyOneRow(rows, scanNode)
	if err == nil {
		return n, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, dbError(err, "issue the agent token of node %s", uuid)
	}
	if len(states) == 0 {
		return nil, false, nil
	}
	var state string
	err = s.pool.QueryRow(ctx, `SELECT provision_state FROM nodes WHERE uuid = $1`, u).Scan(&state)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, dbError(err, "issue the agent token of node %s", uuid)
	case !slices.Contains(states, state):
		return nil, false, fmt.Errorf("issue the agent token of node %s in state %s: %w", uuid, state, ErrStateConflict)
	}
	return nil, false, nil
}
