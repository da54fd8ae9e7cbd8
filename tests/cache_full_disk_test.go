package tests

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/workflows"
)

// TestDeployThroughACacheOnAFullDisk deploys through the boot service's
// image cache on a disk (a 12 MiB tmpfs) that another file has filled, with
// a simulated agent on the real stack: the deploy fails with a last_error
// that says the cache's disk is full, and no partial image is left in the
// cache; once the space is back, the operator's retry writes the image,
// whole and intact.
func TestDeployThroughACacheOnAFullDisk(t *testing.T) {
	dir := smallDisk(t, "12m")
	// 8 MiB of the 12 that are not the cache's to evict: the 6 MiB image
	// does not fit.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	cacheDir := filepath.Join(dir, "cache")
	startCacheGroupAt(t, "full-cache", cacheDir)

	img := newImageServer(t, 6<<20)
	const mac = "52:54:00:bb:0e:01"
	uuid := enrollAgentNode(t, "full-cache-0", mac, img)
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/automated_clean", "value": false},
		{"op": "add", "path": "/instance_info/image_download_source", "value": "http"},
	}, nil); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	// The agent tries a download 3 times, 1 s apart (IPA's
	// image_download_connection_retries and _retry_interval, 9 and 10 s by
	// default): the disk stays full.
	m := startSimMachine(t, uuid, []string{mac}, sim.Config{Download: agent.DownloadConfig{Retries: 2, RetryDelay: time.Second}})
	moveTo(t, uuid, [2]string{"manage", "manageable"}, [2]string{"provide", "available"})

	n := deployAndWait(t, uuid, "deploy failed")
	last := deref(n.LastError)
	if !strings.Contains(last, "no space left") {
		t.Errorf("last_error %q does not say the image cache's disk is full", last)
	}
	t.Logf("through a full cache: %s", last)
	if parts, _ := filepath.Glob(filepath.Join(cacheDir, "*.part")); len(parts) > 0 {
		t.Errorf("partial images left in the cache: %v", parts)
	}

	// Space again: the operator retries the failed step.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := temporalClient(t).SignalWorkflow(context.Background(), workflows.WorkflowID(uuid), "", workflows.SignalRetry, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the retry to leave deploy failed", time.Minute, func() bool { return getNode(t, uuid).ProvisionState != "deploy failed" })
	n = waitState(t, uuid, "active", 2*time.Minute)
	if n.LastError != nil && *n.LastError != "" {
		t.Errorf("active with last_error %q", *n.LastError)
	}
	// The agent verified the image's sha256 as it wrote it (or the deploy
	// would have failed); the simulated disk keeps its first MiB, which
	// must be the image's.
	head := diskHead(t, m.current().Hardware(), 1<<20)
	if !bytes.Equal(head, img.data[:len(head)]) {
		t.Error("the disk's first MiB differs from the image's after the deploy through the cache")
	}
}
