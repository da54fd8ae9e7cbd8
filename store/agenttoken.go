package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
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

// ClaimAgentURL records url as the node's agent URL if it has none or
// already has that one, in one conditional write, and reports whether it
// did: of heartbeats racing with different callback URLs, exactly one is
// accepted, and the others see the change Ironic refuses.
func (s *Store) ClaimAgentURL(ctx context.Context, uuid, url string) (bool, error) {
	u, _ := canonicalUUID(uuid)
	tag, err := s.pool.Exec(ctx, `UPDATE nodes SET driver_internal_info = driver_internal_info || jsonb_build_object($2::text, $3::text)
		WHERE uuid = $1 AND COALESCE(driver_internal_info->>$2, '') IN ('', $3)`, u, KeyAgentURL, url)
	if err != nil {
		return false, dbError(err, "claim the agent URL of node %s", uuid)
	}
	return tag.RowsAffected() == 1, nil
}

// IssueAgentToken stores token as the node's agent token if it has none, in
// one conditional write, and returns the node as written; issued is false
// (and the node nil) when the node already holds a token or is gone. Of
// lookups racing for one node, exactly one is issued a token.
func (s *Store) IssueAgentToken(ctx context.Context, uuid, token string) (n *Node, issued bool, err error) {
	u, _ := canonicalUUID(uuid)
	rows, _ := s.pool.Query(ctx, `UPDATE nodes SET driver_internal_info = driver_internal_info || jsonb_build_object($2::text, $3::text),
			updated_at = now()
		WHERE uuid = $1 AND NOT driver_internal_info ? $2::text
		RETURNING `+nodeColumns, u, KeyAgentToken, token)
	n, err = pgx.CollectExactlyOneRow(rows, scanNode)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, dbError(err, "issue the agent token of node %s", uuid)
	}
	return n, true, nil
}
