package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// TestLoggerIsSlogDefault: the configured format and level reach code that
// logs through slog.Default() (as the BMC drivers do), not only the logger
// handed around.
func TestLoggerIsSlogDefault(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })

	t.Run("json at warn", func(t *testing.T) {
		t.Setenv("IRONFLOW_LOG_FORMAT", "json")
		t.Setenv("IRONFLOW_LOG_LEVEL", "warn")
		var buf bytes.Buffer
		installLogger(&buf)
		log := slog.Default().With("bmc", "https://10.0.0.9", "driver", "redfish")
		log.Info("below the level")
		log.Warn("session refused")
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 1 {
			t.Fatalf("want the one warning, got %q", buf.String())
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
			t.Fatalf("slog.Default() did not write JSON: %q: %v", lines[0], err)
		}
		if rec["msg"] != "session refused" || rec["level"] != "WARN" || rec["driver"] != "redfish" {
			t.Fatalf("record %v", rec)
		}
	})
	t.Run("text at debug", func(t *testing.T) {
		t.Setenv("IRONFLOW_LOG_FORMAT", "")
		t.Setenv("IRONFLOW_LOG_LEVEL", "debug")
		var buf bytes.Buffer
		installLogger(&buf)
		slog.Debug("power state read", "driver", "ipmi")
		if got := buf.String(); !strings.Contains(got, "level=DEBUG") || !strings.Contains(got, `msg="power state read" driver=ipmi`) {
			t.Fatalf("slog.Default() wrote %q, want a text record at debug", got)
		}
	})
}
