package agent

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/klauspost/compress/gzip"
)

// LogSource is implemented by hardware that can hand over system logs for
// log.collect_system_logs (file name → content).
type LogSource interface {
	SystemLogs(ctx context.Context) map[string][]byte
}

// collectSystemLogs answers log.collect_system_logs with a gzip+base64
// tarball, as Ironic stores on a failed deploy.
func (a *Agent) collectSystemLogs(ctx context.Context, _ *command, _ json.RawMessage) (any, error) {
	files := map[string][]byte{}
	if ls, ok := a.cfg.Hardware.(LogSource); ok {
		files = ls.SystemLogs(ctx)
	}
	var cmds bytes.Buffer
	for _, c := range a.cmds.all() {
		v := c.view()
		v.CommandParams = nil
		b, _ := json.Marshal(v)
		cmds.Write(b)
		cmds.WriteByte('\n')
	}
	files["agent-commands.jsonl"] = cmds.Bytes()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	now := time.Now()
	for name, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: now}); err != nil {
			return nil, fmt.Errorf("tar %s: %w", name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return map[string]any{"system_logs": base64.StdEncoding.EncodeToString(buf.Bytes())}, nil
}
