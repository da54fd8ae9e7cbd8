package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// fakeEngine stands in for Temporal in unit tests. With instant set it
// applies a provision verb's end state in the store at once, as a fake
// driver's workflow would; running holds the nodes a "workflow" holds.
type fakeEngine struct {
	st      *store.Store
	instant bool

	mu      sync.Mutex
	running map[string]bool
	// consoleBusy holds the nodes whose console change is still running.
	consoleBusy map[string]bool
	provisions  []provision.Request
	consoles    []workflows.ConsoleRequest
	powers      []workflows.PowerRequest
	boots       []workflows.BootDeviceRequest
	vmedia      []workflows.VirtualMediaRequest
	// allocations are the allocations StartAllocation was asked to fill.
	allocations []string
	// vmediaErr, when set, is what ChangeVirtualMedia returns.
	vmediaErr error
	manages   []workflows.ManagementRequest
	// manageErr, when set, is what Manage returns; indicators is what a
	// read answers.
	manageErr  error
	indicators []workflows.Indicator
	signals    []sentSignal
	// signalErr, when set, is what Signal returns for a running node.
	signalErr error
	// abortEnds makes an abort signal end the node's "workflow", as a
	// workflow waiting for an operator ends on abort.
	abortEnds bool
	// runningCalls counts the lock checks (Running) asked.
	runningCalls int
	// passthru are the vendor methods asked, each with the node's
	// driver_internal_info when it was asked.
	passthru []passthruCall
}

type passthruCall struct {
	req      workflows.VendorPassthruRequest
	internal map[string]any
}

type sentSignal struct {
	node, name string
	arg        any
}

func newFakeEngine(st *store.Store) *fakeEngine {
	return &fakeEngine{st: st, running: map[string]bool{}}
}

// verbEndState is where a verb leaves a node when everything succeeds.
var verbEndState = map[provision.Verb]provision.State{
	"manage": "manageable", "provide": "available", "active": "active", "deploy": "active",
	"rebuild": "active", "deleted": "available", "undeploy": "available", "inspect": "manageable",
	"clean": "manageable",
}

func (e *fakeEngine) StartProvision(ctx context.Context, req provision.Request) error {
	e.mu.Lock()
	if e.running[req.NodeUUID] {
		e.mu.Unlock()
		return ErrNodeLocked
	}
	e.provisions = append(e.provisions, req)
	e.mu.Unlock()
	if e.instant {
		if end, ok := verbEndState[req.Verb]; ok {
			if _, err := e.st.SetProvisionState(ctx, req.NodeUUID, nil, end, nil, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// StartAllocation records the allocation; the unit tests fill none.
func (e *fakeEngine) SetConsole(ctx context.Context, req workflows.ConsoleRequest) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	// As TemporalEngine: the console's own workflow, not the node's
	// lock, serializes console changes.
	if e.consoleBusy[req.NodeUUID] {
		return ErrNodeLocked
	}
	e.consoles = append(e.consoles, req)
	return nil
}

func (e *fakeEngine) StartAllocation(ctx context.Context, allocationUUID string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.allocations = append(e.allocations, allocationUUID)
	return nil
}

func (e *fakeEngine) StartPower(ctx context.Context, req workflows.PowerRequest) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running[req.NodeUUID] {
		return ErrNodeLocked
	}
	e.powers = append(e.powers, req)
	return nil
}

func (e *fakeEngine) SetBootDevice(ctx context.Context, req workflows.BootDeviceRequest) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running[req.NodeUUID] {
		return ErrNodeLocked
	}
	e.boots = append(e.boots, req)
	return nil
}

func (e *fakeEngine) ChangeVirtualMedia(ctx context.Context, req workflows.VirtualMediaRequest) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running[req.NodeUUID] {
		return ErrNodeLocked
	}
	e.vmedia = append(e.vmedia, req)
	return e.vmediaErr
}

// ReadVirtualMedia answers what the fake machine's CD holds: the last
// attach the engine saw, unless a detach came after it.
func (e *fakeEngine) ReadVirtualMedia(ctx context.Context, req workflows.VirtualMediaRequest) ([]workflows.VirtualMediaDevice, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.vmediaErr != nil {
		return nil, e.vmediaErr
	}
	dev := workflows.VirtualMediaDevice{MediaTypes: []string{"CD", "DVD"}}
	for _, r := range e.vmedia {
		if r.NodeUUID == req.NodeUUID {
			dev.Inserted, dev.Image = r.Attach, r.ImageURL
		}
	}
	return []workflows.VirtualMediaDevice{dev}, nil
}

func (e *fakeEngine) Manage(ctx context.Context, req workflows.ManagementRequest) ([]workflows.Indicator, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running[req.NodeUUID] {
		return nil, ErrNodeLocked
	}
	e.manages = append(e.manages, req)
	if e.manageErr != nil {
		return nil, e.manageErr
	}
	if req.Action == workflows.ManagementReadIndicators {
		return e.indicators, nil
	}
	return nil, nil
}

// VendorPassthru records the request and what the node's
// driver_internal_info held then; it runs nothing (the vendor passthru
// tests that reach a BMC run on the real stack, tests/vendor_passthru_test.go).
func (e *fakeEngine) VendorPassthru(ctx context.Context, req workflows.VendorPassthruRequest) (any, error) {
	n, err := e.st.GetNode(ctx, req.NodeUUID)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running[req.NodeUUID] {
		return nil, ErrNodeLocked
	}
	e.passthru = append(e.passthru, passthruCall{req, n.DriverInternalInfo})
	return map[string]any{"Id": "1"}, nil
}

func (e *fakeEngine) Signal(ctx context.Context, nodeUUID, name string, arg any) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.running[nodeUUID] {
		return ErrNoWorkflow
	}
	if e.signalErr != nil {
		return e.signalErr
	}
	e.signals = append(e.signals, sentSignal{nodeUUID, name, arg})
	if e.abortEnds && name == workflows.SignalAbort {
		e.running[nodeUUID] = false
	}
	return nil
}

func (e *fakeEngine) Running(ctx context.Context, nodeUUID string) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runningCalls++
	return e.running[nodeUUID], nil
}

func (e *fakeEngine) hold(node string, on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running[node] = on
}

// env is one API under test on a fresh database.
type env struct {
	t   testing.TB
	st  *store.Store
	eng *fakeEngine
	h   http.Handler
	srv *httptest.Server
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newEnv(t testing.TB, mutate ...func(*Config)) *env {
	t.Helper()
	st := storetest.New(t)
	eng := newFakeEngine(st)
	cfg := DefaultConfig()
	for _, m := range mutate {
		m(&cfg)
	}
	h, err := New(cfg, st, eng, quietLogger())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{t: t, st: st, eng: eng, h: h, srv: srv}
}

// resp is a response read whole.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("decode %d body %q: %v", r.status, r.body, err)
	}
	return m
}

// faultstring decodes Ironic's double-encoded error body.
func (r resp) faultstring(t testing.TB) string {
	t.Helper()
	var inner map[string]any
	if err := json.Unmarshal([]byte(r.json(t)["error_message"].(string)), &inner); err != nil {
		t.Fatalf("decode error_message of %q: %v", r.body, err)
	}
	if s, ok := inner["faultstring"].(string); ok {
		return s
	}
	return inner["description"].(string)
}

// do sends a request with microversion version ("" sends no header).
func (e *env) do(method, path, version string, body any) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if version != "" {
		req.Header.Set(headerVersion, version)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: data}
}

// createNode makes a node through the API and returns its body.
func (e *env) createNode(body map[string]any) map[string]any {
	e.t.Helper()
	r := e.do("POST", "/v1/nodes", "1.78", body)
	if r.status != http.StatusCreated {
		e.t.Fatalf("create node: %d %s", r.status, r.body)
	}
	return r.json(e.t)
}

// setState puts a node straight into a provision state in the store.
func (e *env) setState(uuid string, state provision.State) {
	e.t.Helper()
	if _, err := e.st.SetProvisionState(context.Background(), uuid, nil, state, nil, nil); err != nil {
		e.t.Fatalf("set state %s: %v", state, err)
	}
}

func (e *env) node(uuid string) *store.Node {
	e.t.Helper()
	n, err := e.st.GetNode(context.Background(), uuid)
	if err != nil {
		e.t.Fatalf("get node: %v", err)
	}
	return n
}
