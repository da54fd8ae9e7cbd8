package tests

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/agent/sim"
)

// nodeHistories is the text of every event of every workflow run of the
// node, its payloads as stored (no codec, no key).
func nodeHistories(t *testing.T, c client.Client, uuid string) (runs int, text string) {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("NodeUUID = '%s'", uuid), NextPageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.GetExecutions() {
			runs++
			it := c.GetWorkflowHistory(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				// Payload data are the JSON bytes as recorded; String()
				// shows them as they are, ASCII kept.
				b.WriteString(ev.String())
				b.WriteByte('\n')
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return runs, b.String()
		}
	}
}

// TestConfigDriveSecretsStayOutOfWorkflowHistory deploys with a config
// drive holding marker secrets (admin_pass, an SSH key, user_data): every
// payload of every workflow history of the node is read without a key and
// none holds a marker or the stored drive; then a 60 MiB config drive
// (gzip+base64, as Ironic takes it) deploys through the simulated agent.
func TestConfigDriveSecretsStayOutOfWorkflowHistory(t *testing.T) {
	img := newImageServer(t, 4<<20)
	const mac = "52:54:00:bb:00:16"
	uuid := enrollAgentNode(t, "secret-drive-0", mac, img)
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{{"op": "add", "path": "/automated_clean", "value": false}}, nil); code != 200 {
		t.Fatalf("set automated_clean: %d", code)
	}
	startSimMachine(t, uuid, []string{mac}, sim.Config{})
	moveTo(t, uuid, [2]string{"manage", "manageable"}, [2]string{"provide", "available"})

	markers := []string{"MARKER-admin-pass-8f3a", "MARKER-ssh-key-19c2", "MARKER-user-data-77d1"}
	cd := map[string]any{
		"meta_data": map[string]any{"hostname": "secret-0", "admin_pass": markers[0],
			"public_keys": map[string]any{"0": "ssh-ed25519 AAAAC3Nza " + markers[1]}},
		"user_data": "#cloud-config\npassword: " + markers[2] + "\n",
	}
	if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active", "configdrive": cd}, nil); code != 202 {
		t.Fatalf("deploy: %d", code)
	}
	waitState(t, uuid, "active", 180*time.Second)
	st := openStore(t)
	stored, err := st.GetNode(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	drive, _ := stored.InstanceInfo["configdrive"].(string)
	if len(drive) < 64 {
		t.Fatalf("config drive not stored with the node: %q", drive)
	}
	c := temporalClient(t)
	runs, text := nodeHistories(t, c, uuid)
	if runs < 3 || !strings.Contains(text, "DeployNode") {
		t.Fatalf("read %d workflow runs of the node, want manage, provide and deploy", runs)
	}
	for _, m := range append(markers, drive[:64]) {
		if strings.Contains(text, m) {
			t.Errorf("workflow history holds %q", m)
		}
	}
	t.Logf("%d workflow runs, %d bytes of history: no marker", runs, len(text))

	// 60 MiB as sent: 45 MiB that do not compress, gzipped, base64.
	raw := make([]byte, 45<<20)
	_, _ = rand.Read(raw)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write(raw)
	_ = w.Close()
	big := base64.StdEncoding.EncodeToString(gz.Bytes())
	if len(big) < 60<<20 {
		t.Fatalf("test config drive is %d bytes", len(big))
	}
	var body map[string]any
	if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "rebuild", "configdrive": big}, &body); code != 202 {
		t.Fatalf("rebuild with a %d-byte config drive: %d %v", len(big), code, body)
	}
	waitState(t, uuid, "active", 300*time.Second)
	if stored, err = st.GetNode(context.Background(), uuid); err != nil {
		t.Fatal(err)
	}
	if got, _ := stored.InstanceInfo["configdrive"].(string); got != big {
		t.Errorf("the rebuild's config drive is not the one stored (%d bytes, want %d)", len(got), len(big))
	}
	if _, text := nodeHistories(t, c, uuid); strings.Contains(text, big[:64]) {
		t.Errorf("workflow history holds the 60 MiB config drive")
	}

	// Above the API's 64 MiB: 413, never 500.
	huge := strings.Repeat("A", 65<<20)
	if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "rebuild", "configdrive": huge}, &body); code != 413 {
		t.Errorf("rebuild with a 65 MiB config drive: %d %v", code, body)
	}
}
