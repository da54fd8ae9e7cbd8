package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

// TestDevTemporalServicesFlag: --temporal-services takes all or split, and
// split only with --temporal cluster (the dev server is one process).
func TestDevTemporalServicesFlag(t *testing.T) {
	api := addAPIFlags(newSettings("dev"))
	log := slog.New(slog.DiscardHandler)
	for _, c := range []struct{ kind, services, want string }{
		{"cluster", "four", "want all or split"},
		{"dev", "split", "needs --temporal cluster"},
	} {
		_, _, err := devTemporalCluster(context.Background(), c.kind, c.services, true, nil, t.TempDir(), 7233, -1, "", api, log)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--temporal %s --temporal-services %s: %v, want %q", c.kind, c.services, err, c.want)
		}
	}
	stop, _, err := devTemporalCluster(context.Background(), "dev", "all", true, nil, t.TempDir(), 7233, -1, "", api, log)
	if err != nil {
		t.Fatalf("--temporal dev: %v", err)
	}
	stop()
}
