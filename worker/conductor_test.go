package worker

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// TestAnnounceHeartbeatsAndRegistersAgain: a worker registers with the
// registry's hardware types, its heartbeats move updated_at, it registers
// again when its row is removed, and stop marks it offline.
func TestAnnounceHeartbeatsAndRegistersAgain(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	stop, err := Announce(ctx, st, Conductor{Hostname: "hb", ConductorGroups: []string{"rack1", "rack2"}, Interval: 30 * time.Millisecond},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.GetConductor(ctx, "hb")
	if err != nil || !first.Online || len(first.ConductorGroups) != 2 || len(first.Drivers) != len(hardware.Names()) {
		t.Fatalf("registered %+v, %v", first, err)
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 5s", what)
			}
		}
	}
	wait("a heartbeat", func() bool {
		c, err := st.GetConductor(ctx, "hb")
		return err == nil && c.UpdatedAt.After(first.UpdatedAt)
	})
	if _, err := st.Pool().Exec(ctx, "DELETE FROM conductors WHERE hostname = 'hb'"); err != nil {
		t.Fatal(err)
	}
	wait("registered again", func() bool {
		c, err := st.GetConductor(ctx, "hb")
		return err == nil && c.Online
	})
	stop()
	stop() // a second stop does nothing
	if c, err := st.GetConductor(ctx, "hb"); err != nil || c.Online {
		t.Errorf("after stop: %+v, %v", c, err)
	}
	if _, err := Announce(ctx, st, Conductor{}, nil); err == nil {
		t.Error("a conductor without a hostname was registered")
	}
}
