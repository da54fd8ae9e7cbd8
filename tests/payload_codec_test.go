package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/api/workflowservice/v1"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/payload"
	"github.com/ironflow/ironflow/worker"
)

var (
	labCodecOnce sync.Once
	labCodecVal  *payload.Codec
	labCodecErr  error
)

// labCodec is the payload codec of the stack's key.
func labCodec(t testing.TB) *payload.Codec {
	t.Helper()
	labCodecOnce.Do(func() { labCodecVal, labCodecErr = lab.Codec() })
	if labCodecErr != nil {
		t.Fatal(labCodecErr)
	}
	return labCodecVal
}

// codecUIOrigin is the Web UI origin the lab's codec server grants.
const codecUIOrigin = "http://127.0.0.1:8233"

var (
	codecServerOnce           sync.Once
	codecEndpoint, codecBasic string
	codecServerErr            error
)

// labCodecServer is an `ironflow codec-server` for the lab's key, as an
// operator runs it beside the Web UI (http_basic, one operator), started
// once for the package: its endpoint and the operator's Authorization
// header, for the Web UI's calls and `temporal … --codec-endpoint`.
func labCodecServer(t testing.TB) (endpoint, authorization string) {
	t.Helper()
	codecServerOnce.Do(func() {
		hash, _ := bcrypt.GenerateFromPassword([]byte("codec-op-pw"), bcrypt.MinCost)
		dir, err := os.MkdirTemp("", "ironflow-codec-")
		if err != nil {
			codecServerErr = err
			return
		}
		// The server reads the file once, at start.
		defer os.RemoveAll(dir)
		htpasswd := filepath.Join(dir, "htpasswd")
		if codecServerErr = os.WriteFile(htpasswd, []byte("operator:"+string(hash)+"\n"), 0o600); codecServerErr != nil {
			return
		}
		port, err := embedded.FreePort("127.0.0.1")
		if err != nil {
			codecServerErr = err
			return
		}
		listen := fmt.Sprintf("127.0.0.1:%d", port)
		p, err := lab.Spawn("ironflow-codec-server", []string{"codec-server", "--listen", listen,
			"--auth-strategy", "http_basic", "--htpasswd-file", htpasswd, "--codec-cors-origins", codecUIOrigin})
		if err != nil {
			codecServerErr = err
			return
		}
		if codecServerErr = lab.WaitHTTP(context.Background(), "http://"+listen+"/", p); codecServerErr != nil {
			return
		}
		codecEndpoint = "http://" + listen
		codecBasic = "Basic " + base64.StdEncoding.EncodeToString([]byte("operator:codec-op-pw"))
	})
	if codecServerErr != nil {
		t.Fatalf("codec server: %v", codecServerErr)
	}
	return codecEndpoint, codecBasic
}

// exportedHistory is one workflow run as `temporal workflow show --output
// json` prints it.
type exportedHistory struct {
	workflowID, runID string
	raw               []byte
	history           *historypb.History
}

// exportHistories prints every workflow run of the node with the real
// temporal CLI, without a codec.
func exportHistories(t *testing.T, uuid string) []exportedHistory {
	t.Helper()
	bin, err := embedded.FindTemporalCLI("")
	if err != nil {
		t.Fatal(err)
	}
	c := temporalClient(t)
	var out []exportedHistory
	var token []byte
	for {
		resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("NodeUUID = '%s'", uuid), NextPageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.GetExecutions() {
			h := exportedHistory{workflowID: e.GetExecution().GetWorkflowId(), runID: e.GetExecution().GetRunId()}
			cmd := exec.Command(bin, "workflow", "show", "--address", lab.Temporal.Address(),
				"--workflow-id", h.workflowID, "--run-id", h.runID, "--output", "json", "--no-json-shorthand-payloads")
			if h.raw, err = cmd.Output(); err != nil {
				t.Fatalf("temporal workflow show %s: %v", h.workflowID, err)
			}
			h.history = new(historypb.History)
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(h.raw, h.history); err != nil {
				t.Fatalf("read the exported history of %s: %v", h.workflowID, err)
			}
			out = append(out, h)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out
		}
	}
}

// eventPayloads are the payloads of every event (search attributes apart),
// one list per event, as the Web UI sends them to the codec server.
func eventPayloads(t *testing.T, h *historypb.History) [][]*commonpb.Payload {
	t.Helper()
	var out [][]*commonpb.Payload
	for _, ev := range h.GetEvents() {
		var ps []*commonpb.Payload
		if err := proxy.VisitPayloads(context.Background(), ev, proxy.VisitPayloadsOptions{
			SkipSearchAttributes: true,
			Visitor: func(_ *proxy.VisitPayloadsContext, p []*commonpb.Payload) ([]*commonpb.Payload, error) {
				ps = append(ps, p...)
				return p, nil
			},
		}); err != nil {
			t.Fatal(err)
		}
		if len(ps) > 0 {
			out = append(out, ps)
		}
	}
	return out
}

// TestPayloadCodecHidesHistoryFromAnyoneWithoutTheKey deploys a node whose
// deploy step arguments hold a marker secret (they do enter workflow
// history: the DeployNode input and the steps the workflow records) and
// whose config drive holds more (they do not: PostgreSQL keeps the drive).
// Every workflow history of the node is exported with the real temporal
// CLI; every payload, base64-decoded without the key, is encrypted and holds
// no marker. Through the codec server, as the Web UI calls it, an operator
// reads the step marker; without credentials the server answers 401.
// Finally the exported, encrypted histories replay with the key.
func TestPayloadCodecHidesHistoryFromAnyoneWithoutTheKey(t *testing.T) {
	img := newImageServer(t, 4<<20)
	const mac = "52:54:00:cd:ec:01"
	uuid := enrollAgentNode(t, "codec-0", mac, img)
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{{"op": "add", "path": "/automated_clean", "value": false}}, nil); code != 200 {
		t.Fatalf("set automated_clean: %d", code)
	}
	startSimMachine(t, uuid, []string{mac}, sim.Config{})
	moveTo(t, uuid, [2]string{"manage", "manageable"}, [2]string{"provide", "available"})

	const stepMarker = "MARKER-step-arg-3b9d"
	driveMarkers := []string{"MARKER-codec-admin-pass-a1", "MARKER-codec-ssh-key-b2", "MARKER-codec-user-data-c3"}
	cd := map[string]any{
		"meta_data": map[string]any{"hostname": "codec-0", "admin_pass": driveMarkers[0],
			"public_keys": map[string]any{"0": "ssh-ed25519 AAAAC3Nza " + driveMarkers[1]}},
		"user_data": "#cloud-config\npassword: " + driveMarkers[2] + "\n",
	}
	// tear_down_agent at its own priority, with an argument it ignores: the
	// request, with its argument, is the workflow's input.
	steps := []map[string]any{{"interface": "deploy", "step": "tear_down_agent", "priority": 40,
		"args": map[string]any{"bios_admin_password": stepMarker}}}
	var body map[string]any
	if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active", "configdrive": cd, "deploy_steps": steps}, &body); code != 202 {
		t.Fatalf("deploy: %d %v", code, body)
	}
	waitState(t, uuid, "active", 180*time.Second)

	histories := exportHistories(t, uuid)
	if len(histories) < 3 {
		t.Fatalf("exported %d workflow runs of the node, want manage, provide and deploy", len(histories))
	}
	all := append([]string{stepMarker}, driveMarkers...)
	encrypted, size := 0, 0
	deployFound := false
	for _, h := range histories {
		size += len(h.raw)
		deployFound = deployFound || bytes.Contains(h.raw, []byte("DeployNode"))
		for _, m := range all {
			if bytes.Contains(h.raw, []byte(m)) {
				t.Errorf("%s: the exported history holds %q in plain text", h.workflowID, m)
			}
		}
		for _, ps := range eventPayloads(t, h.history) {
			for _, p := range ps {
				if !payload.Encrypted(p) {
					if traceContextOnly(p.GetData()) {
						// The tracing interceptor's header (docs/tracing.md):
						// a W3C trace context, trace and span IDs only.
						continue
					}
					t.Errorf("%s: a payload is not encrypted: metadata %v, data %q", h.workflowID, p.GetMetadata(), p.GetData())
					continue
				}
				encrypted++
				// The payload's bytes, base64-decoded from the export:
				// ciphertext, without the marker or its inner encoding.
				for _, m := range append(all, "json/plain") {
					if bytes.Contains(p.GetData(), []byte(m)) {
						t.Errorf("%s: an encrypted payload shows %q", h.workflowID, m)
					}
				}
			}
		}
	}
	if !deployFound || encrypted < 10 {
		t.Fatalf("read %d encrypted payloads (DeployNode among the runs: %v): the test checked next to nothing", encrypted, deployFound)
	}
	t.Logf("%d workflow runs, %d bytes exported, %d payloads, all encrypted, no marker", len(histories), size, encrypted)

	// With the key, an export opens without a codec server (the VM tests
	// read histories so).
	var opened bytes.Buffer
	for _, h := range histories {
		dec, err := payload.DecodeHistoryJSON(context.Background(), labCodec(t), h.raw)
		if err != nil {
			t.Fatalf("%s: open the export with the key: %v", h.workflowID, err)
		}
		var back historypb.History
		if err := protojson.Unmarshal(dec, &back); err != nil {
			t.Fatal(err)
		}
		for _, ps := range eventPayloads(t, &back) {
			for _, p := range ps {
				if payload.Encrypted(p) {
					t.Errorf("%s: a payload stayed encrypted", h.workflowID)
				}
				opened.Write(p.GetData())
			}
		}
	}
	if !bytes.Contains(opened.Bytes(), []byte(stepMarker)) {
		t.Errorf("the export opened with the key lacks %q", stepMarker)
	}

	// The codec server, as an operator runs it beside the Web UI.
	endpoint, auth := labCodecServer(t)
	uiCall := func(method, path, authorization string, body []byte) (int, http.Header, []byte) {
		req, _ := http.NewRequest(method, endpoint+path, bytes.NewReader(body))
		req.Header.Set("Origin", codecUIOrigin)
		if method == http.MethodOptions {
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,x-namespace")
		} else {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Namespace", "default")
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	if code, h, _ := uiCall(http.MethodOptions, "/decode", "", nil); code != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != codecUIOrigin {
		t.Errorf("the Web UI's preflight: %d %v", code, h)
	}
	first, _ := protojson.Marshal(&commonpb.Payloads{Payloads: eventPayloads(t, histories[0].history)[0]})
	if code, _, b := uiCall(http.MethodPost, "/decode", "", first); code != http.StatusUnauthorized {
		t.Errorf("decode without credentials: %d %s", code, b)
	}
	if code, _, b := uiCall(http.MethodPost, "/decode", "Basic "+base64.StdEncoding.EncodeToString([]byte("operator:wrong")), first); code != http.StatusUnauthorized {
		t.Errorf("decode with a wrong password: %d %s", code, b)
	}
	var decoded strings.Builder
	for _, h := range histories {
		for _, ps := range eventPayloads(t, h.history) {
			body, _ := protojson.Marshal(&commonpb.Payloads{Payloads: ps})
			code, hdr, b := uiCall(http.MethodPost, "/decode", auth, body)
			if code != http.StatusOK || hdr.Get("Access-Control-Allow-Origin") != codecUIOrigin {
				t.Fatalf("%s: decode: %d %v %s", h.workflowID, code, hdr, b)
			}
			var out commonpb.Payloads
			if err := protojson.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Payloads) != len(ps) {
				t.Fatalf("%d payloads decoded, %d sent", len(out.Payloads), len(ps))
			}
			for _, dp := range out.Payloads {
				if payload.Encrypted(dp) {
					t.Fatalf("%s: the codec server left a payload encrypted", h.workflowID)
				}
				decoded.Write(dp.GetData())
				decoded.WriteByte('\n')
			}
		}
	}
	if !strings.Contains(decoded.String(), stepMarker) {
		t.Errorf("the decoded payloads lack the deploy step's argument %q", stepMarker)
	}
	for _, m := range driveMarkers {
		if strings.Contains(decoded.String(), m) {
			t.Errorf("the config drive's %q is in workflow history (decoded)", m)
		}
	}
	// The temporal CLI through the same endpoint.
	bin, _ := embedded.FindTemporalCLI("")
	out, err := exec.Command(bin, "workflow", "show", "--address", lab.Temporal.Address(), "--workflow-id", histories[0].workflowID,
		"--output", "json", "--codec-endpoint", endpoint, "--codec-auth", auth).CombinedOutput()
	if err != nil {
		t.Fatalf("temporal workflow show --codec-endpoint: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte(payload.EncodingEncrypted)) || bytes.Contains(out, []byte(base64.StdEncoding.EncodeToString([]byte(payload.EncodingEncrypted)))) {
		t.Errorf("temporal workflow show --codec-endpoint still shows encrypted payloads")
	}

	// ironflow timeline reads the local activities' encrypted markers with
	// the key, and says what it cannot show without it.
	withKey, err := exec.Command(lab.Bin, "timeline", "--temporal-address", lab.Temporal.Address(), "--payload-key", lab.PayloadKey, uuid).CombinedOutput()
	if err != nil || !strings.Contains(string(withKey), "(local)") {
		t.Errorf("ironflow timeline --payload-key: %v\n%s", err, withKey)
	}
	withoutKey, err := exec.Command(lab.Bin, "timeline", "--temporal-address", lab.Temporal.Address(), uuid).CombinedOutput()
	if err != nil || strings.Contains(string(withoutKey), "(local)") || !strings.Contains(string(withoutKey), "markers are encrypted") {
		t.Errorf("ironflow timeline without the key: %v\n%s", err, withoutKey)
	}

	// The encrypted histories replay with the key: the worker reads what it
	// wrote.
	r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{
		DataConverter: payload.DataConverter(labCodec(t)), FailureConverter: payload.FailureConverter(payload.DataConverter(labCodec(t))),
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, fn := range worker.Workflows() {
		r.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: name})
	}
	for _, h := range histories {
		if err := r.ReplayWorkflowHistory(nil, h.history); err != nil {
			t.Errorf("replay the encrypted history of %s: %v", h.workflowID, err)
		}
	}
}

// traceContextOnly reports whether a payload is nothing but a W3C trace
// context, as the tracing interceptor puts in a workflow's headers: the
// payload codec does not seal headers, and this one carries no data of the
// node's.
func traceContextOnly(data []byte) bool {
	var m map[string]string
	if err := json.Unmarshal(data, &m); err != nil || len(m) == 0 {
		return false
	}
	for k, v := range m {
		switch k {
		case "traceparent":
			if !traceparentRE.MatchString(v) {
				return false
			}
		case "tracestate":
			if v != "" {
				return false
			}
		default:
			return false
		}
	}
	return true
}

var traceparentRE = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)
