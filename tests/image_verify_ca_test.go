package tests

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/workflows"
)

// newTLSImageServer is newImageServer over HTTPS, with a certificate of a
// CA of its own that nothing trusts; caFile is that CA's PEM on disk, as
// an operator puts it on the conductor.
func newTLSImageServer(t *testing.T, size int) (img *imageServer, caFile string) {
	t.Helper()
	img = newImageServer(t, size)
	tlsSrv := httptest.NewTLSServer(img.Config.Handler)
	t.Cleanup(tlsSrv.Close)
	img.Server = tlsSrv
	caFile = filepath.Join(t.TempDir(), "image-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: img.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return img, caFile
}

// startCacheGroup runs an `ironflow pxe` with an image cache (in cacheDir)
// and a worker that points agents at it, in place of the lab's worker,
// until the test ends; extra flags go to both.
func startCacheGroup(t *testing.T, group string, extra ...string) (bootURL, cacheDir string) {
	t.Helper()
	return startCacheGroupAt(t, group, t.TempDir(), extra...)
}

// startCacheGroupAt is startCacheGroup with the image cache in cacheDir.
func startCacheGroupAt(t *testing.T, group, cacheDir string, extra ...string) (bootURL, _ string) {
	t.Helper()
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	bootURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	pxe, err := lab.Spawn("ironflow-pxe-"+group, append(append(lab.PXEArgs(), "--boot-listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--image-cache-dir", cacheDir, "--image-cache-size", "256MiB"), extra...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pxe.Kill)
	lab.KillWorker()
	w, err := lab.Spawn("ironflow-worker", append(append(lab.WorkerArgs(), "--boot-url", bootURL), extra...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Kill()
		if err := lab.StartWorker(); err != nil {
			t.Errorf("restart the lab's worker: %v", err)
		}
	})
	waitFor(t, "the boot service", 30*time.Second, func() bool {
		return exec.Command("curl", "-sf", bootURL+"/health").Run() == nil
	})
	return bootURL, cacheDir
}

// TestImageVerifyCA deploys from an HTTPS image server whose CA is the
// node's driver_info/image_verify_ca, with simulated agents on the real
// stack: the agent fetching the image itself (direct) and through the boot
// service's cache (http). Without the setting the deploy fails with a
// last_error naming it; with it set, the operator's retry deploys.
func TestImageVerifyCA(t *testing.T) {
	img, caFile := newTLSImageServer(t, 4<<20)
	startCacheGroup(t, "verify-ca")
	for i, source := range []string{"direct", "http"} {
		t.Run(source, func(t *testing.T) {
			mac := fmt.Sprintf("52:54:00:bb:0c:%02x", i+1)
			uuid := enrollAgentNode(t, "verify-ca-"+source, mac, img)
			if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
				{"op": "add", "path": "/automated_clean", "value": false},
				{"op": "add", "path": "/instance_info/image_download_source", "value": source},
			}, nil); code != 200 {
				t.Fatalf("patch: %d", code)
			}
			startSimMachine(t, uuid, []string{mac}, sim.Config{})
			moveTo(t, uuid, [2]string{"manage", "manageable"}, [2]string{"provide", "available"})
			n := deployAndWait(t, uuid, "deploy failed")
			if le := deref(n.LastError); !strings.Contains(le, "certificate is not trusted") || !strings.Contains(le, "driver_info/image_verify_ca") {
				t.Fatalf("last_error %q should say the certificate is not trusted and name driver_info/image_verify_ca", le)
			}
			if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
				{"op": "add", "path": "/driver_info/image_verify_ca", "value": caFile},
			}, nil); code != 200 {
				t.Fatalf("set image_verify_ca: %d", code)
			}
			before := img.downloads.Load()
			if err := temporalClient(t).SignalWorkflow(context.Background(), workflows.WorkflowID(uuid), "", workflows.SignalRetry, nil); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the retry to leave deploy failed", 60*time.Second, func() bool { return getNode(t, uuid).ProvisionState != "deploy failed" })
			n = waitState(t, uuid, "active", 2*time.Minute)
			if n.LastError != nil {
				t.Errorf("last_error kept after the retry: %q", *n.LastError)
			}
			if got := img.downloads.Load() - before; got != 1 {
				t.Errorf("the image server served %d downloads for the retry, want 1", got)
			}
		})
	}
}
