// Package signature authenticates the heartbeat signals the API sends to a
// node's workflow. Anyone who reaches Temporal can signal a workflow; only
// the API and the worker hold the key, so a signal sent straight to Temporal
// (temporal workflow signal) carries no valid MAC and the workflow ignores
// it (docs/architecture.md, "Signals are authenticated").
package signature

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ironflow/ironflow/workflows"
)

// MaxAge bounds how old a signed heartbeat may be when the worker checks it,
// so that a recorded signal cannot be replayed later; MaxSkew is how far in
// the future its timestamp may lie (clocks of API and worker differ).
const (
	MaxAge  = 5 * time.Minute
	MaxSkew = time.Minute
)

// Keys are the shared secret: heartbeats are signed with Current and
// accepted under Current or Previous, so that the key can be rotated without
// dropping the signals in flight (README: key rotation).
type Keys struct {
	Current, Previous []byte
}

// Configured reports whether a current key is set.
func (k Keys) Configured() bool { return len(k.Current) > 0 }

// Load reads the keys from a value and a file (either may be empty), the
// file holding the current key on its first line and, optionally, the
// previous one on its second; previous is the previous key given apart.
func Load(value, file, previous string) (Keys, error) {
	var k Keys
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return Keys{}, fmt.Errorf("read signal key file: %w", err)
		}
		lines := strings.Fields(string(b))
		if len(lines) > 0 {
			k.Current = []byte(lines[0])
		}
		if len(lines) > 1 {
			k.Previous = []byte(lines[1])
		}
	}
	if value != "" {
		k.Current = []byte(value)
	}
	if previous != "" {
		k.Previous = []byte(previous)
	}
	if !k.Configured() {
		return Keys{}, errors.New("no signal key: set --signal-key or --signal-key-file (IRONFLOW_SIGNAL_KEY, IRONFLOW_SIGNAL_KEY_FILE), the same for ironflow api and ironflow worker")
	}
	if len(k.Current) < 16 {
		return Keys{}, errors.New("signal key too short: use at least 16 characters")
	}
	return k, nil
}

// Generate makes a random key (ironflow dev shares one between its API and
// worker).
func Generate() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return []byte(hex.EncodeToString(b))
}

// Sign sets the heartbeat's nonce and MAC for node. hb.ReceivedAt is the
// timestamp the MAC covers and must be set, hb.AgentTokenRef the token the
// heartbeat was accepted with (TokenRef).
func Sign(key []byte, node string, hb *workflows.Heartbeat) {
	n := make([]byte, 12)
	_, _ = rand.Read(n)
	hb.Nonce = base64.RawURLEncoding.EncodeToString(n)
	hb.MAC = base64.RawURLEncoding.EncodeToString(mac(key, node, *hb))
}

// Verify returns why the heartbeat is not authentic for node at now, or nil.
func Verify(k Keys, node string, hb workflows.Heartbeat, now time.Time) error {
	_, err := VerifyVersion(k, node, hb, now)
	return err
}

// Versions of the MAC: V2 covers the agent token's reference
// (Heartbeat.AgentTokenRef); V1 is what an API of the release before signs.
const (
	V1 = 1
	V2 = 2
)

// VerifyVersion is Verify, and says which MAC the heartbeat carries. A
// heartbeat without a token reference may carry a V1 MAC: the worker is
// upgraded before the API (docs/versioning.md, "Rolling out a release"),
// so a new worker accepts what an old API signs; such a signal is not bound
// to an operation's token (CheckToken does not apply to it).
func VerifyVersion(k Keys, node string, hb workflows.Heartbeat, now time.Time) (int, error) {
	if hb.MAC == "" {
		return 0, errors.New("signal carries no MAC: it was not sent by the API")
	}
	// Strict: one MAC has one spelling, so that a store of the signals seen
	// cannot be passed by re-spelling its unused trailing bits.
	got, err := base64.RawURLEncoding.Strict().DecodeString(hb.MAC)
	if err != nil {
		return 0, errors.New("signal MAC is malformed")
	}
	matches := func(f func([]byte, string, workflows.Heartbeat) []byte) bool {
		return hmac.Equal(got, f(k.Current, node, hb)) || (len(k.Previous) > 0 && hmac.Equal(got, f(k.Previous, node, hb)))
	}
	version := V2
	if !matches(mac) {
		if hb.AgentTokenRef != "" || !matches(macV1) {
			return 0, errors.New("signal MAC does not match")
		}
		version = V1
	}
	if age := now.Sub(hb.ReceivedAt); age > MaxAge || age < -MaxSkew {
		return 0, fmt.Errorf("signal timestamp %s is outside the accepted window (%s old at most)", hb.ReceivedAt.Format(time.RFC3339), MaxAge)
	}
	return version, nil
}

// TokenRef names the agent token the API accepted a heartbeat with, for
// Heartbeat.AgentTokenRef: a truncated SHA-256 of the token ("" for no
// token). The token is 256 random bits, so its hash gives nothing away and
// may sit in workflow history; the token itself must not.
func TokenRef(token string) string {
	if token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("ironflow agent token ref\x00" + token))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// CheckToken returns why a verified heartbeat does not belong to the
// operation that now holds the node, or nil. Each operation (deploy, clean,
// rescue, ...) works with its own agent token, so a signal captured from an
// earlier operation's history and sent again into the next one names a
// token the node no longer has (docs/security.md, "Replayed signals").
func CheckToken(hb workflows.Heartbeat, current string) error {
	if subtle.ConstantTimeCompare([]byte(hb.AgentTokenRef), []byte(TokenRef(current))) != 1 {
		return errors.New("signal was accepted with another agent token than the node's current one (an earlier operation's signal sent again)")
	}
	return nil
}

// mac covers the node and every field of the heartbeat the workflow acts on,
// with the agent token's reference, the timestamp and the nonce; JSON of a
// fixed struct keeps the encoding unambiguous.
func mac(key []byte, node string, hb workflows.Heartbeat) []byte {
	covered, _ := json.Marshal(struct {
		Node, CallbackURL, AgentVersion, AgentVerifyCA, AgentStatus, AgentStatusMessage, AgentTokenRef, Nonce string
		ReceivedAt                                                                                            int64
	}{node, hb.CallbackURL, hb.AgentVersion, hb.AgentVerifyCA, hb.AgentStatus, hb.AgentStatusMessage, hb.AgentTokenRef, hb.Nonce, hb.ReceivedAt.UnixNano()})
	h := hmac.New(sha256.New, key)
	h.Write([]byte("ironflow heartbeat v2\x00"))
	h.Write(covered)
	return h.Sum(nil)
}

// macV1 is the MAC of the release before: without the token reference.
func macV1(key []byte, node string, hb workflows.Heartbeat) []byte {
	covered, _ := json.Marshal(struct {
		Node, CallbackURL, AgentVersion, AgentVerifyCA, AgentStatus, AgentStatusMessage, Nonce string
		ReceivedAt                                                                             int64
	}{node, hb.CallbackURL, hb.AgentVersion, hb.AgentVerifyCA, hb.AgentStatus, hb.AgentStatusMessage, hb.Nonce, hb.ReceivedAt.UnixNano()})
	h := hmac.New(sha256.New, key)
	h.Write([]byte("ironflow heartbeat v1\x00"))
	h.Write(covered)
	return h.Sum(nil)
}
