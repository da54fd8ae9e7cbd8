package store

import (
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
