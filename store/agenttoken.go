package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
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
