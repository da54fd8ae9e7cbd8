package store_test

import (
	"encoding/base64"
	"testing"

	"github.com/ironflow/ironflow/store"
)

func TestNewAgentTokenIsIronicsURLSafe32Bytes(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, err := store.NewAgentToken()
		if err != nil {
			t.Fatal(err)
		}
		// The agent refuses a token shorter than 32 characters.
		if len(tok) != 43 {
			t.Fatalf("token %q has %d characters, want 43", tok, len(tok))
		}
		if b, err := base64.RawURLEncoding.DecodeString(tok); err != nil || len(b) != 32 {
			t.Fatalf("token %q is not 32 bytes in URL-safe base64: %v", tok, err)
		}
		if seen[tok] {
			t.Fatalf("token %q minted twice", tok)
		}
		seen[tok] = true
	}
}
