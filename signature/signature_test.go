package signature

import (
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
