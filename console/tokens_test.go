package console

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func consoleNode(t *testing.T, st *store.Store, name, addr string) string {
	t.Helper()
	ctx := context.Background()
	n := &store.Node{Name: &name, Driver: "ipmi", ConsoleInterface: "ipmitool-shellinabox"}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := st.SetConsoleEnabled(ctx, n.UUID, true, map[string]any{store.KeyConsoleHolder: "w1", store.KeyConsoleAddress: addr}); err != nil {
		t.Fatal(err)
	}
	return n.UUID
}

// TestTokensBoundToNodeKindAndTime: a token leads to its own node's
// endpoint only, for its kind only, until it expires or the node's tokens
// are revoked (the console disabled); only its hash is stored; a refusal
// of a token that names a node goes into that node's history without the
// token.
func TestTokensBoundToNodeKindAndTime(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := consoleNode(t, st, "a", "127.0.0.1:7001")
	b := consoleNode(t, st, "b", "127.0.0.1:7002")
	now := time.Now()
	tk := &Tokens{Store: st, Now: func() time.Time { return now }}
	ta, exp, err := tk.Issue(ctx, a, KindSerial)
	if err != nil || exp.Sub(now) != DefaultTokenTTL || len(ta) < 43 {
		t.Fatalf("Issue = %q, %v, %v", ta, exp, err)
	}
	tb, _, _ := tk.Issue(ctx, b, KindSerial)
	if got, err := tk.Resolve(ctx, ta, KindSerial); err != nil || got != (Target{NodeUUID: a, Kind: KindSerial, Addr: "127.0.0.1:7001"}) {
		t.Errorf("node a's token: %+v, %v", got, err)
	}
	if got, err := tk.Resolve(ctx, tb, KindSerial); err != nil || got.NodeUUID != b || got.Addr != "127.0.0.1:7002" {
		t.Errorf("node b's token: %+v, %v", got, err)
	}
	if _, err := st.GetConsoleToken(ctx, []byte(ta)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the token itself is a key of the table: %v", err)
	}
	for _, c := range []struct {
		name, token, kind string
		at                time.Time
	}{
		{"unknown", "not-a-token", KindSerial, now},
		{"empty", "", KindSerial, now},
		{"other kind", ta, KindGraphical, now},
		{"expired", ta, KindSerial, now.Add(DefaultTokenTTL)},
	} {
		tk.Now = func() time.Time { return c.at }
		if got, err := tk.Resolve(ctx, c.token, c.kind); !errors.Is(err, ErrBadToken) {
			t.Errorf("%s: Resolve = %+v, %v; want ErrBadToken", c.name, got, err)
		}
	}
	tk.Now = func() time.Time { return now }

	// A refusal is recorded in the history of the node the token names.
	tk.Rejected(ctx, ta, KindSerial, "192.0.2.7:5555", errors.New("the token expired"))
	hs, err := st.ListHistory(ctx, a)
	if err != nil || len(hs) == 0 {
		t.Fatalf("history of a: %v, %v", hs, err)
	}
	last := hs[len(hs)-1]
	if last.Severity != store.SeverityError || !strings.Contains(last.Event, "192.0.2.7:5555") || strings.Contains(last.Event, ta) {
		t.Errorf("refusal history %+v", last)
	}

	// Disabling revokes; a node whose console is off leads nowhere.
	if err := tk.Revoke(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Resolve(ctx, ta, KindSerial); !errors.Is(err, ErrBadToken) {
		t.Errorf("a revoked token resolves: %v", err)
	}
	if err := st.SetConsoleEnabled(ctx, b, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Resolve(ctx, tb, KindSerial); !errors.Is(err, ErrBadToken) {
		t.Errorf("a token of a disabled console resolves: %v", err)
	}
	n, _ := st.GetNode(ctx, b)
	if _, ok := n.DriverInternalInfo[store.KeyConsoleAddress]; ok {
		t.Errorf("disabling left the endpoint in driver_internal_info: %v", n.DriverInternalInfo)
	}
}
