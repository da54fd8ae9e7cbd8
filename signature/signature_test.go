package signature

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/workflows"
)

const node = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"

func signedHeartbeat(key []byte, at time.Time) workflows.Heartbeat {
	hb := workflows.Heartbeat{CallbackURL: "https://10.0.0.5:9999", AgentVersion: "10.0", ReceivedAt: at}
	Sign(key, node, &hb)
	return hb
}

func TestASignedHeartbeatVerifies(t *testing.T) {
	now := time.Now()
	k := Keys{Current: []byte("current-key-0123456789")}
	if err := Verify(k, node, signedHeartbeat(k.Current, now), now); err != nil {
		t.Fatal(err)
	}
}

func TestForgedOrAlteredHeartbeatsAreRefused(t *testing.T) {
	now := time.Now()
	k := Keys{Current: []byte("current-key-0123456789")}
	good := signedHeartbeat(k.Current, now)
	cases := map[string]func(*workflows.Heartbeat) (string, string){
		"no MAC":        func(hb *workflows.Heartbeat) (string, string) { hb.MAC = ""; return node, "no MAC" },
		"malformed MAC": func(hb *workflows.Heartbeat) (string, string) { hb.MAC = "!!"; return node, "malformed" },
		"other key": func(hb *workflows.Heartbeat) (string, string) {
			*hb = signedHeartbeat([]byte("attacker-key-0123456789"), now)
			return node, "does not match"
		},
		"callback URL": func(hb *workflows.Heartbeat) (string, string) {
			hb.CallbackURL = "http://10.0.0.66:9999"
			return node, "does not match"
		},
		"agent status": func(hb *workflows.Heartbeat) (string, string) { hb.AgentStatus = "end"; return node, "does not match" },
		"status message": func(hb *workflows.Heartbeat) (string, string) {
			hb.AgentStatusMessage = "x"
			return node, "does not match"
		},
		"verify CA": func(hb *workflows.Heartbeat) (string, string) { hb.AgentVerifyCA = "x"; return node, "does not match" },
		"timestamp": func(hb *workflows.Heartbeat) (string, string) {
			hb.ReceivedAt = hb.ReceivedAt.Add(time.Second)
			return node, "does not match"
		},
		"nonce": func(hb *workflows.Heartbeat) (string, string) { hb.Nonce = "other"; return node, "does not match" },
		"agent token ref": func(hb *workflows.Heartbeat) (string, string) {
			hb.AgentTokenRef = TokenRef("the-next-operations-token")
			return node, "does not match"
		},
		// The MAC's unused trailing bits re-spelt: one MAC, one spelling.
		"re-spelt MAC": func(hb *workflows.Heartbeat) (string, string) {
			last := hb.MAC[len(hb.MAC)-1]
			hb.MAC = hb.MAC[:len(hb.MAC)-1] + string(respell(last))
			return node, "malformed"
		},
		"another node": func(hb *workflows.Heartbeat) (string, string) {
			return "a9b5a4a6-0000-4000-8000-000000000000", "does not match"
		},
		"replayed too late": func(hb *workflows.Heartbeat) (string, string) {
			*hb = signedHeartbeat(k.Current, now.Add(-MaxAge-time.Second))
			return node, "outside"
		},
		"from the future": func(hb *workflows.Heartbeat) (string, string) {
			*hb = signedHeartbeat(k.Current, now.Add(MaxSkew+time.Second))
			return node, "outside"
		},
	}
	for name, alter := range cases {
		t.Run(name, func(t *testing.T) {
			hb := good
			n, want := alter(&hb)
			err := Verify(k, n, hb, now)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Verify = %v, want an error with %q", err, want)
			}
		})
	}
}

// Rotation: signals signed with the previous key verify while it is still
// configured as previous; once dropped, they do not.
func TestThePreviousKeyStillVerifies(t *testing.T) {
	now := time.Now()
	old, cur := []byte("previous-key-0123456789"), []byte("current-key-0123456789")
	hb := signedHeartbeat(old, now)
	if err := Verify(Keys{Current: cur, Previous: old}, node, hb, now); err != nil {
		t.Fatal(err)
	}
	if err := Verify(Keys{Current: cur}, node, hb, now); err == nil {
		t.Fatal("a heartbeat signed with a dropped key verified")
	}
}

func TestLoadReadsValueFileAndPrevious(t *testing.T) {
	if _, err := Load("", "", ""); err == nil {
		t.Fatal("no key loaded without error")
	}
	if _, err := Load("short", "", ""); err == nil {
		t.Fatal("a short key was accepted")
	}
	f := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(f, []byte("current-key-0123456789\nprevious-key-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := Load("", f, "")
	if err != nil || string(k.Current) != "current-key-0123456789" || string(k.Previous) != "previous-key-0123456789" {
		t.Fatalf("Load(file) = %q %q %v", k.Current, k.Previous, err)
	}
	k, err = Load("value-key-0123456789", f, "given-previous-0123456789")
	if err != nil || string(k.Current) != "value-key-0123456789" || string(k.Previous) != "given-previous-0123456789" {
		t.Fatalf("Load(value, file, previous) = %q %q %v", k.Current, k.Previous, err)
	}
}

// respell is another base64url character with the same upper four bits, the
// only ones of a 32-byte MAC's last character that carry data.
func respell(c byte) byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, c)
	return alphabet[i^1]
}

// A verified signal belongs to the operation whose agent token the API
// accepted it with: sent again into a later operation of the node (new
// token, or none yet), it is refused.
func TestCheckTokenBindsTheSignalToTheOperation(t *testing.T) {
	first, next := "rbEz4Mg0tM6qCzLrh9NTnMSNQi4dcoXdx4MmjZ8NNCE", "Qm9vdGVkIGFnYWluIHdpdGggYSBuZXcgdG9rZW4uLi4"
	hb := workflows.Heartbeat{AgentTokenRef: TokenRef(first)}
	if err := CheckToken(hb, first); err != nil {
		t.Fatalf("the operation's own signal refused: %v", err)
	}
	for _, cur := range []string{next, ""} {
		if err := CheckToken(hb, cur); err == nil || !strings.Contains(err.Error(), "another agent token") {
			t.Fatalf("current token %q: CheckToken = %v, want the earlier operation's signal refused", cur, err)
		}
	}
	if err := CheckToken(workflows.Heartbeat{}, ""); err != nil {
		t.Fatalf("no token on either side (tokens not required): %v", err)
	}
	if ref := TokenRef(first); strings.Contains(ref, first[:8]) || len(ref) != 22 {
		t.Fatalf("TokenRef %q should be a 16-byte hash, not the token", ref)
	}
}

// The workflow forgets signals only once the worker would refuse them as too
// old (workflows.SignalReplayWindow).
func TestTheReplayWindowCoversTheAcceptedAge(t *testing.T) {
	if workflows.SignalReplayWindow < MaxAge+MaxSkew {
		t.Fatalf("workflows.SignalReplayWindow %s < MaxAge+MaxSkew %s: a forgotten signal could be accepted again", workflows.SignalReplayWindow, MaxAge+MaxSkew)
	}
}

// signedV1 is a heartbeat as an API of the release before signs it: no
// token reference, the MAC of version 1.
func signedV1(key []byte, at time.Time) workflows.Heartbeat {
	hb := workflows.Heartbeat{CallbackURL: "https://10.0.0.5:9999", AgentVersion: "10.0", ReceivedAt: at, Nonce: "bm9uY2Utb2xkLWFwaQ"}
	hb.MAC = base64.RawURLEncoding.EncodeToString(macV1(key, node, hb))
	return hb
}

// Workers are upgraded before APIs (docs/versioning.md): a new worker
// accepts what an old API signs, as version 1, and nothing lets a signal
// claim a token reference under a version 1 MAC.
func TestAnOldAPIsSignalVerifiesAsVersion1(t *testing.T) {
	now := time.Now()
	k := Keys{Current: []byte("current-key-0123456789")}
	old := signedV1(k.Current, now)
	if v, err := VerifyVersion(k, node, old, now); err != nil || v != V1 {
		t.Fatalf("VerifyVersion(old API's signal) = %d, %v; want version 1", v, err)
	}
	if v, err := VerifyVersion(k, node, signedHeartbeat(k.Current, now), now); err != nil || v != V2 {
		t.Fatalf("VerifyVersion(new API's signal) = %d, %v; want version 2", v, err)
	}
	claimed := old
	claimed.AgentTokenRef = TokenRef("rbEz4Mg0tM6qCzLrh9NTnMSNQi4dcoXdx4MmjZ8NNCE")
	if _, err := VerifyVersion(k, node, claimed, now); err == nil {
		t.Fatal("a version 1 MAC verified with a token reference added")
	}
	altered := old
	altered.AgentStatus = "end"
	if _, err := VerifyVersion(k, node, altered, now); err == nil {
		t.Fatal("an altered version 1 signal verified")
	}
	if _, err := VerifyVersion(k, node, signedV1(k.Current, now.Add(-MaxAge-time.Second)), now); err == nil {
		t.Fatal("a stale version 1 signal verified")
	}
}
