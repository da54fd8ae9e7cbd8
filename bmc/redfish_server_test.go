package bmc

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordedBMC serves a recorded vendor Redfish service from testdata with
// enough state to be driven: PATCH of Boot, ComputerSystem.Reset,
// InsertMedia/EjectMedia (and PATCH of VirtualMedia), and a SessionService
// that hands out X-Auth-Tokens and counts live sessions. Quirks and faults
// seen on real BMCs are switched on per test.
type recordedBMC struct {
	t    *testing.T
	srv  *httptest.Server
	user string
	pass string

	mu       sync.Mutex
	docs     map[string]map[string]any
	sessions map[string]string // token -> session URI
	created  int               // sessions ever created
	actions  []string          // what the BMC was asked to do, in order
	served   map[int]int       // responses by status
	basicOK  int               // requests authenticated with basic auth

	// quirks of real BMCs
	noSessions       bool // no SessionService (basic auth only)
	onceToContinuous bool // BootSourceOverrideEnabled Once kept as Continuous
	rejectBootMode   bool // 400 on BootSourceOverrideMode
	ignoreGraceful   bool // GracefulShutdown accepted, nothing happens
	powerLag         int  // system GETs before a reset shows in PowerState
	failInsertAfter  int  // inserts right after an eject that answer 500
	pending          string
	lagLeft          int
	justEjected      bool

	tls bool // serve HTTPS with httptest's own certificate

	// faults
	fail503 int           // the next N authenticated requests answer 503
	forbid  int           // the next N authenticated requests answer 403
	slow    time.Duration // authenticated requests stall this long (or until the client gives up)
	// forbidPath answers 403 for this one document, as BMCs do for
	// resources a role may not read.
	forbidPath string

	headers []any // the HttpHeaders of each subscription created, in order
}

const (
	testBMCUser = "ironflow"
	testBMCPass = "s3cret-Pa55"
)

// startBMC serves testdata/redfish/<dir>, edited by the layout's function.
func startBMC(t *testing.T, dir string, edit func(b *recordedBMC)) *recordedBMC {
	t.Helper()
	b := &recordedBMC{t: t, user: testBMCUser, pass: testBMCPass, docs: map[string]map[string]any{},
		sessions: map[string]string{}, served: map[int]int{}}
	root := filepath.Join("testdata", "redfish", dir)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "index.json" {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		key := "/redfish/v1"
		if rel != "." {
			key += "/" + filepath.ToSlash(rel)
		}
		b.docs[key] = doc
		return nil
	})
	if err != nil {
		t.Fatalf("load %s: %v", root, err)
	}
	if edit != nil {
		edit(b)
	}
	if b.noSessions {
		delete(b.docs["/redfish/v1"], "SessionService")
		delete(b.docs["/redfish/v1"], "Links")
		for k := range b.docs {
			if strings.HasPrefix(k, "/redfish/v1/SessionService") {
				delete(b.docs, k)
			}
		}
	}
	if b.tls {
		b.srv = httptest.NewTLSServer(b)
	} else {
		b.srv = httptest.NewServer(b)
	}
	t.Cleanup(b.srv.Close)
	return b
}

// info is the driver_info for this BMC, with waits short enough for tests.
func (b *recordedBMC) info(extra map[string]any) map[string]any {
	m := map[string]any{
		"redfish_address":                   b.srv.URL,
		"redfish_username":                  b.user,
		"redfish_password":                  b.pass,
		"redfish_timeout":                   "5s",
		"redfish_connection_retry_interval": "5ms",
		KeyPowerPollInterval:                "1ms",
		KeyPowerStateTimeout:                "5s",
		KeySoftPowerOffTimeout:              "50ms",
	}
	maps.Copy(m, extra)
	return m
}

func (b *recordedBMC) doc(path string) map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.docs[path]
	if !ok {
		b.t.Fatalf("test BMC has no document %s", path)
	}
	raw, _ := json.Marshal(d)
	var cp map[string]any
	_ = json.Unmarshal(raw, &cp)
	return cp
}

func (b *recordedBMC) set(path, key string, v any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.docs[path][key] = v
}

func (b *recordedBMC) liveSessions() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sessions)
}

func (b *recordedBMC) sessionsCreated() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.created
}

// expireSessions drops every session, as a BMC does after its session
// timeout or a reset of the management controller.
func (b *recordedBMC) expireSessions() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sessions = map[string]string{}
}

func (b *recordedBMC) actionLog() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.actions)
}

func (b *recordedBMC) status(code int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.served[code]
}

func (b *recordedBMC) setFault(fail503 int, slow time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fail503, b.slow = fail503, slow
}

func redfishErr(w http.ResponseWriter, status int, id, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": "Base.1.8.GeneralError", "message": "A general error has occurred. See ExtendedInfo for more information.",
		"@Message.ExtendedInfo": []map[string]any{{"MessageId": id, "Message": msg}},
	}})
}

func (b *recordedBMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w, code: 200}
	b.serve(rec, r)
	b.mu.Lock()
	b.served[rec.code]++
	b.mu.Unlock()
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) { s.code = code; s.ResponseWriter.WriteHeader(code) }

func (b *recordedBMC) serve(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	var body map[string]any
	if r.Body != nil && (r.Method == http.MethodPost || r.Method == http.MethodPatch) {
		_ = json.NewDecoder(r.Body).Decode(&body)
	}

	// The service root is readable without credentials (Redfish spec).
	if r.Method == http.MethodGet && p == "/redfish/v1" {
		b.writeDoc(w, p)
		return
	}
	if r.Method == http.MethodPost && p == "/redfish/v1/SessionService/Sessions" && !b.noSessions {
		b.login(w, body)
		return
	}
	if !b.authorized(r) {
		redfishErr(w, http.StatusUnauthorized, "Base.1.8.NoValidSession", "There is no valid session established with the implementation.")
		return
	}

	b.mu.Lock()
	slow := b.slow
	fail := b.fail503 > 0
	if fail {
		b.fail503--
	}
	forbid := b.forbid > 0 && r.Method != http.MethodDelete
	if forbid {
		b.forbid--
	}
	forbid = forbid || (b.forbidPath != "" && p == b.forbidPath)
	b.mu.Unlock()
	if forbid {
		redfishErr(w, http.StatusForbidden, "Base.1.8.InsufficientPrivilege", "There are insufficient privileges for the account or credentials associated with the current session to perform the requested operation.")
		return
	}
	if slow > 0 {
		select {
		case <-time.After(slow):
		case <-r.Context().Done():
			return
		}
	}
	if fail {
		redfishErr(w, http.StatusServiceUnavailable, "Base.1.8.ServiceTemporarilyUnavailable", "The service is temporarily unavailable. Retry in 1 seconds.")
		return
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case r.Method == http.MethodDelete && strings.HasPrefix(p, "/redfish/v1/SessionService/Sessions/"):
		for tok, uri := range b.sessions {
			if uri == p {
				delete(b.sessions, tok)
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		redfishErr(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "The resource at the URI "+p+" was not found.")
	case r.Method == http.MethodGet:
		if p == b.systemPath() && b.pending != "" {
			if b.lagLeft--; b.lagLeft < 0 {
				b.docs[p]["PowerState"] = b.pending
				b.pending = ""
			}
		}
		b.writeDocLocked(w, p)
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/Actions/ComputerSystem.Reset"):
		b.reset(w, strings.TrimSuffix(p, "/Actions/ComputerSystem.Reset"), body)
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/Actions/VirtualMedia.InsertMedia"):
		vm := strings.TrimSuffix(p, "/Actions/VirtualMedia.InsertMedia")
		if b.justEjected && b.failInsertAfter > 0 {
			b.failInsertAfter--
			b.actions = append(b.actions, "InsertMedia refused")
			redfishErr(w, http.StatusInternalServerError, "IDRAC.2.8.VRM0021", "Virtual Media is detached or Virtual Media devices are already in use.")
			return
		}
		b.insert(w, vm, body)
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/Actions/VirtualMedia.EjectMedia"):
		b.eject(w, strings.TrimSuffix(p, "/Actions/VirtualMedia.EjectMedia"))
	case r.Method == http.MethodPatch && body["IndicatorLED"] != nil:
		// A system's or a chassis' light (redfish_management_test.go).
		doc, ok := b.docs[p]
		if !ok || doc["IndicatorLED"] == nil {
			redfishErr(w, http.StatusBadRequest, "Base.1.8.PropertyUnknown", "IndicatorLED is not a property of "+p)
			return
		}
		doc["IndicatorLED"] = body["IndicatorLED"]
		b.actions = append(b.actions, fmt.Sprintf("IndicatorLED %s %v", p, body["IndicatorLED"]))
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/EventService/Subscriptions"):
		b.subscribe(w, p, body, r.Header.Get("Content-Type"))
	case r.Method == http.MethodDelete && strings.Contains(p, "/EventService/Subscriptions/"):
		b.unsubscribe(w, p)
	case r.Method == http.MethodPatch && p == b.systemPath():
		b.patchBoot(w, p, body)
	case r.Method == http.MethodPatch && strings.Contains(p, "/VirtualMedia/"):
		if _, ok := b.docs[p]; !ok {
			redfishErr(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "not found: "+p)
			return
		}
		if ins, _ := body["Inserted"].(bool); ins {
			b.insert(w, p, body)
		} else {
			b.eject(w, p)
		}
	default:
		redfishErr(w, http.StatusMethodNotAllowed, "Base.1.8.OperationNotAllowed", r.Method+" "+p+" is not allowed")
	}
}

func (b *recordedBMC) systemPath() string {
	for k, d := range b.docs {
		if strings.HasPrefix(k, "/redfish/v1/Systems/") && d["PowerState"] != nil {
			return k
		}
	}
	return ""
}

func (b *recordedBMC) writeDoc(w http.ResponseWriter, p string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writeDocLocked(w, p)
}

func (b *recordedBMC) writeDocLocked(w http.ResponseWriter, p string) {
	d, ok := b.docs[p]
	if !ok {
		redfishErr(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "The resource at the URI "+p+" was not found.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(d)
}

func (b *recordedBMC) authorized(r *http.Request) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		_, ok := b.sessions[tok]
		return ok
	}
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Basic ") {
		raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "Basic "))
		if string(raw) == b.user+":"+b.pass {
			b.basicOK++
			return true
		}
	}
	return false
}

func (b *recordedBMC) login(w http.ResponseWriter, body map[string]any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if body["UserName"] != b.user || body["Password"] != b.pass {
		redfishErr(w, http.StatusUnauthorized, "Base.1.8.ResourceAtUriUnauthorized", "While accessing the resource at /redfish/v1/SessionService/Sessions, the service received an authorization error.")
		return
	}
	b.created++
	tok := fmt.Sprintf("token-%d", b.created)
	uri := fmt.Sprintf("/redfish/v1/SessionService/Sessions/%d", b.created)
	b.sessions[tok] = uri
	w.Header().Set("X-Auth-Token", tok)
	w.Header().Set("Location", uri)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"@odata.id": uri, "Id": fmt.Sprint(b.created), "UserName": b.user})
}

func (b *recordedBMC) reset(w http.ResponseWriter, sys string, body map[string]any) {
	doc, ok := b.docs[sys]
	if !ok {
		redfishErr(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "not found: "+sys)
		return
	}
	rt, _ := body["ResetType"].(string)
	allowed := doc["Actions"].(map[string]any)["#ComputerSystem.Reset"].(map[string]any)["ResetType@Redfish.AllowableValues"].([]any)
	if !slices.Contains(allowed, any(rt)) {
		redfishErr(w, http.StatusBadRequest, "Base.1.8.ActionParameterValueNotInList", fmt.Sprintf("The value %s for the parameter ResetType is not in the list of acceptable values.", rt))
		return
	}
	b.actions = append(b.actions, "Reset "+rt)
	cur, _ := doc["PowerState"].(string)
	next := cur
	switch rt {
	case "On", "ForceOn", "ForceRestart", "GracefulRestart", "PowerCycle":
		next = "On"
	case "ForceOff":
		next = "Off"
	case "GracefulShutdown":
		if !b.ignoreGraceful {
			next = "Off"
		}
	case "PushPowerButton":
		next = map[string]string{"On": "Off", "Off": "On"}[cur]
	}
	if b.powerLag > 0 && next != cur {
		b.pending, b.lagLeft = next, b.powerLag
	} else {
		doc["PowerState"] = next
	}
	w.WriteHeader(http.StatusNoContent)
}

func (b *recordedBMC) patchBoot(w http.ResponseWriter, sys string, body map[string]any) {
	doc := b.docs[sys]
	patch, ok := body["Boot"].(map[string]any)
	if !ok {
		redfishErr(w, http.StatusBadRequest, "Base.1.8.PropertyUnknown", "only Boot may be patched here")
		return
	}
	boot := doc["Boot"].(map[string]any)
	allowed, _ := boot["BootSourceOverrideTarget@Redfish.AllowableValues"].([]any)
	if t, ok := patch["BootSourceOverrideTarget"]; ok && allowed != nil && !slices.Contains(allowed, t) {
		redfishErr(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList", fmt.Sprintf("The value %v for the property BootSourceOverrideTarget is not in the list of acceptable values.", t))
		return
	}
	if _, ok := patch["BootSourceOverrideMode"]; ok && b.rejectBootMode {
		redfishErr(w, http.StatusBadRequest, "Base.1.8.PropertyNotWritable", "The property BootSourceOverrideMode is a read only property and cannot be assigned a value.")
		return
	}
	for k, v := range patch {
		if k == "BootSourceOverrideEnabled" && v == "Once" && b.onceToContinuous {
			v = "Continuous"
		}
		boot[k] = v
	}
	b.actions = append(b.actions, fmt.Sprintf("Boot %v/%v/%v", boot["BootSourceOverrideTarget"], boot["BootSourceOverrideEnabled"], boot["BootSourceOverrideMode"]))
	w.WriteHeader(http.StatusNoContent)
}

func (b *recordedBMC) insert(w http.ResponseWriter, vm string, body map[string]any) {
	doc, ok := b.docs[vm]
	if !ok {
		redfishErr(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "not found: "+vm)
		return
	}
	if ins, _ := doc["Inserted"].(bool); ins {
		redfishErr(w, http.StatusConflict, "Base.1.8.ResourceInUse", "The change to the requested resource failed because the resource is in use or in transition.")
		return
	}
	doc["Image"] = body["Image"]
	doc["Inserted"] = true
	if wp, ok := body["WriteProtected"]; ok {
		doc["WriteProtected"] = wp
	}
	b.justEjected = false
	b.actions = append(b.actions, fmt.Sprintf("InsertMedia %s %v", vm, body["Image"]))
	w.WriteHeader(http.StatusNoContent)
}

func (b *recordedBMC) eject(w http.ResponseWriter, vm string) {
	doc, ok := b.docs[vm]
	if !ok {
		redfishErr(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "not found: "+vm)
		return
	}
	doc["Image"] = ""
	doc["Inserted"] = false
	b.justEjected = true
	b.actions = append(b.actions, "EjectMedia "+vm)
	w.WriteHeader(http.StatusNoContent)
}

// subscribe adds an EventDestination to the collection at col, as the DMTF
// mockup server does: the next free Id, 201 with its Location. The
// HttpHeaders it was given are kept in the test's record (b.headers), and
// never shown, as the EventDestination schema requires of responses.
func (b *recordedBMC) subscribe(w http.ResponseWriter, col string, body map[string]any, ctype string) {
	dest, _ := body["Destination"].(string)
	if dest == "" {
		redfishErr(w, http.StatusBadRequest, "Base.1.8.PropertyMissing", "The property Destination is a required property and must be included in the request.")
		return
	}
	if proto, _ := body["Protocol"].(string); proto != "Redfish" {
		redfishErr(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList", fmt.Sprintf("The value %v for the property Protocol is not in the list of acceptable values.", body["Protocol"]))
		return
	}
	id := 1
	for b.docs[fmt.Sprintf("%s/%d", col, id)] != nil {
		id++
	}
	uri := fmt.Sprintf("%s/%d", col, id)
	doc := map[string]any{"@odata.id": uri, "@odata.type": "#EventDestination.v1_13_0.EventDestination",
		"Id": fmt.Sprint(id), "Name": "EventSubscription " + fmt.Sprint(id), "SubscriptionType": "RedfishEvent"}
	for _, k := range []string{"Destination", "EventTypes", "Context", "Protocol"} {
		if v, ok := body[k]; ok {
			doc[k] = v
		}
	}
	b.docs[uri] = doc
	b.headers = append(b.headers, body["HttpHeaders"])
	members, _ := b.docs[col]["Members"].([]any)
	b.docs[col]["Members"] = append(members, map[string]any{"@odata.id": uri})
	b.docs[col]["Members@odata.count"] = len(members) + 1
	b.actions = append(b.actions, "Subscribe "+dest)
	w.Header().Set("Location", uri)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(doc)
}

func (b *recordedBMC) unsubscribe(w http.ResponseWriter, p string) {
	if b.docs[p] == nil {
		redfishErr(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "The resource at the URI "+p+" was not found.")
		return
	}
	delete(b.docs, p)
	col := p[:strings.LastIndex(p, "/")]
	members, _ := b.docs[col]["Members"].([]any)
	kept := []any{}
	for _, m := range members {
		if m.(map[string]any)["@odata.id"] != p {
			kept = append(kept, m)
		}
	}
	b.docs[col]["Members"], b.docs[col]["Members@odata.count"] = kept, len(kept)
	b.actions = append(b.actions, "Unsubscribe "+p)
	w.WriteHeader(http.StatusNoContent)
}
