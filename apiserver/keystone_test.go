package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testkit/devstack"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

// The keystone strategy against Debian's real keystone: tokens of five
// personas, Ironic's default policy route by route, the baremetal CLI with
// password auth and the service catalog, and revocation within the cache
// cap.

// ksCacheCap is the cache cap of the server the revocation subtest runs
// its own: a revoked token is refused within it.
const ksCacheCap = 2 * time.Second

// ksSharedCacheCap is the cache cap of the server the other subtests
// share: longer than the test, so that each token is validated with
// Keystone once rather than every ksCacheCap (Keystone's validation, in
// Python, was most of the test's time; docs/contributing.md).
const ksSharedCacheCap = time.Hour

type ksPersona string

// The personas: system admin and reader; the owner project's member and
// reader; the lessee project's member.
const (
	pSA ksPersona = "system-admin"
	pSR ksPersona = "system-reader"
	pOM ksPersona = "owner-member"
	pOR ksPersona = "owner-reader"
	pLM ksPersona = "lessee-member"
	// pOA, the owner project's admin, is outside the table: it creates
	// nodes of its own.
	pOA ksPersona = "owner-admin"
	// pOMgr, the owner project's manager, is in the runbook table only
	// (Ironic's runbook rules are the ones that name role:manager).
	pOMgr ksPersona = "owner-manager"
)

var ksPersonas = []ksPersona{pSA, pSR, pOM, pOR, pLM}

type ksEnv struct {
	t                 *testing.T
	k                 *devstack.Keystone
	srv               *httptest.Server
	st                *store.Store
	tokens            map[ksPersona]string
	ownerPID, lessPID string
	seq               atomic.Int64
}

func startKeystoneEnv(t *testing.T) *ksEnv {
	if !devstack.KeystoneAvailable() {
		t.Skip("SKIPPED LOUDLY: " + devstack.ErrNoKeystone.Error())
	}
	ctx := context.Background()
	k, err := devstack.StartKeystone(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	e := &ksEnv{t: t, k: k, tokens: map[ksPersona]string{}}
	e.ownerPID, err = k.CreateProject("owner-proj")
	must(err)
	e.lessPID, err = k.CreateProject("lessee-proj")
	must(err)
	svcP, err := k.CreateProject("service")
	must(err)
	user := func(name string) string {
		id, err := k.CreateUser(name, name+"-pw")
		must(err)
		return id
	}
	must(k.GrantSystemRole(user(string(pSA)), "admin"))
	must(k.GrantSystemRole(user(string(pSR)), "reader"))
	must(k.GrantProjectRole(user(string(pOM)), e.ownerPID, "member"))
	must(k.GrantProjectRole(user(string(pOR)), e.ownerPID, "reader"))
	must(k.GrantProjectRole(user(string(pLM)), e.lessPID, "member"))
	must(k.GrantProjectRole(user(string(pOA)), e.ownerPID, "admin"))
	mgr := user(string(pOMgr))
	must(k.GrantProjectRole(mgr, e.ownerPID, "manager"))
	must(k.GrantProjectRole(mgr, e.ownerPID, "member"))
	ironic := user("ironic")
	must(k.GrantProjectRole(ironic, svcP, "admin"))
	must(k.GrantProjectRole(ironic, svcP, "service"))
	for _, p := range append(ksPersonas, pOA, pOMgr) {
		scope := devstack.Scope{System: true}
		switch p {
		case pOM, pOR, pOA, pOMgr:
			scope = devstack.Scope{Project: "owner-proj"}
		case pLM:
			scope = devstack.Scope{Project: "lessee-proj"}
		}
		tok, err := k.Token(string(p), string(p)+"-pw", scope)
		must(err)
		e.tokens[p] = tok
	}

	e.st = storetest.New(t)
	e.srv = e.newServer(t, e.st, e.keystoneConfig(ksSharedCacheCap, ""))
	return e
}

// keystoneConfig is the service user's keystone settings with a cache
// cap and a policy file (zero and empty: the defaults).
func (e *ksEnv) keystoneConfig(cacheCap time.Duration, policyFile string) KeystoneConfig {
	return KeystoneConfig{AuthURL: e.k.URL, Username: "ironic", Password: "ironic-pw", ProjectName: "service",
		CacheCap: cacheCap, PolicyFile: policyFile}
}

// newServer is an API server on st with the keystone strategy, closed
// when t ends.
func (e *ksEnv) newServer(t *testing.T, st *store.Store, kc KeystoneConfig) *httptest.Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.AuthStrategy = AuthKeystone
	cfg.Keystone = kc
	h, err := New(cfg, st, newFakeEngine(st), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// useServer sends e's requests to srv until t ends.
func (e *ksEnv) useServer(t *testing.T, srv *httptest.Server) {
	saved := e.srv
	e.srv = srv
	t.Cleanup(func() { e.srv = saved })
}

func (e *ksEnv) req(token, method, path string, body any) resp {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	r, _ := http.NewRequest(method, e.srv.URL+path, rd)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(headerVersion, "latest")
	if token != "" {
		r.Header.Set("X-Auth-Token", token)
	}
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: data}
}

// create makes an object as the system admin and returns its uuid.
func (e *ksEnv) create(path string, body map[string]any) string {
	e.t.Helper()
	r := e.req(e.tokens[pSA], "POST", path, body)
	if r.status != http.StatusCreated {
		e.t.Fatalf("create %s: %d %s", path, r.status, r.body)
	}
	return r.json(e.t)["uuid"].(string)
}

func (e *ksEnv) mac() string {
	n := e.seq.Add(1)
	return fmt.Sprintf("02:4b:53:%02x:%02x:%02x", (n>>16)&0xff, (n>>8)&0xff, n&0xff)
}

// fixture is a node with one of each object hanging from it.
type ksFixture struct{ node, port, portgroup, connector, target string }

func (e *ksEnv) fixture(owner, lessee string, objects bool) ksFixture {
	e.t.Helper()
	body := map[string]any{"driver": "fake-hardware", "owner": owner}
	if lessee != "" {
		body["lessee"] = lessee
	}
	f := ksFixture{node: e.create("/v1/nodes", body)}
	if objects {
		f.port = e.create("/v1/ports", map[string]any{"address": e.mac(), "node_uuid": f.node})
		f.portgroup = e.create("/v1/portgroups", map[string]any{"address": e.mac(), "node_uuid": f.node})
		f.connector = e.create("/v1/volume/connectors", map[string]any{"node_uuid": f.node, "type": "iqn", "connector_id": fmt.Sprintf("iqn.2026-12.org.ironflow:%d", e.seq.Add(1))})
		f.target = e.create("/v1/volume/targets", map[string]any{"node_uuid": f.node, "volume_type": "iscsi", "boot_index": 0, "volume_id": fmt.Sprintf("vol-%d", e.seq.Add(1))})
	}
	return f
}

// Who may, per Ironic's default policy (ironic/common/policy.py), named by
// the composite check strings there. The project personas are taken on a
// node their project owns (owner-member, owner-reader) or leases
// (lessee-member).
var (
	sysOrProjectReader             = []ksPersona{pSA, pSR, pOM, pOR, pLM} // SYSTEM_OR_PROJECT_READER
	sysOrProjectMember             = []ksPersona{pSA, pOM, pLM}           // SYSTEM_OR_PROJECT_MEMBER
	sysOrOwnerMemberAndLesseeAdmin = []ksPersona{pSA, pOM}                // SYSTEM_OR_OWNER_MEMBER_AND_LESSEE_ADMIN
	sysMemberOrOwnerAdmin          = []ksPersona{pSA}                     // SYSTEM_MEMBER_OR_OWNER_ADMIN
	sysMemberOrOwnerMember         = []ksPersona{pSA, pOM}                // SYSTEM_MEMBER_OR_OWNER_MEMBER
	sysOrOwnerReader               = []ksPersona{pSA, pSR, pOM, pOR}      // SYSTEM_OR_OWNER_READER
	sysAdminOrOwnerAdmin           = []ksPersona{pSA}                     // SYSTEM_ADMIN_OR_OWNER_ADMIN
	sysMemberOrOwnerLesseeAdmin    = []ksPersona{pSA}                     // SYSTEM_MEMBER_OR_OWNER_LESSEE_ADMIN
	sysAdmin                       = []ksPersona{pSA}                     // SYSTEM_ADMIN
	sysMember                      = []ksPersona{pSA}                     // SYSTEM_MEMBER
	sysReader                      = []ksPersona{pSA, pSR}                // SYSTEM_READER
	apiReader                      = []ksPersona{pSA, pSR, pOM, pOR, pLM} // API_READER (lists, filtered)
	nodeCreate                     = []ksPersona{pSA}                     // SYSTEM_ADMIN or SYSTEM_SERVICE
)

// How a denied caller is answered on a node of another project.
type ksHide int

const (
	hideNone      ksHide = iota // not about one node: 403 everywhere
	hideNode                    // "Node X could not be found."
	hidePort                    // "Port X could not be found."
	hidePortgroup               // "Port Group X could not be found."
	hideConnector
	hideTarget
)

type ksRow struct {
	method, path string // path placeholders: {node} {port} {portgroup} {connector} {target}
	body         any
	rule         string // the rule a denied caller is told about
	allow        []ksPersona
	hide         ksHide
}

// ksRows are the route table's authenticated operations (routes.go) as
// requests: the path with the fixture's placeholders, the request body
// (ksBodies), who may (ksWho, Ironic's policy.py) and the 404 that hides an
// object of another project, from how the route is authorized
// (check_node_policy_and_retrieve hides a node the caller may not see with
// 404; check_port_policy_and_retrieve hides the port; check_list_policy
// filters lists). Runbooks have their own table (ksRunbookTable).
func ksRows(t *testing.T) []ksRow {
	t.Helper()
	var rows []ksRow
	for _, rt := range (&server{}).routeTable() {
		if rt.auth != authUser {
			continue
		}
		path := ksPath(rt.path)
		for _, o := range rt.ops {
			rr := o.policy
			if ksRunbookRoute(rr) || ksAllocationRoute(rr) || ksRolloutRoute(rr) {
				continue
			}
			if rr.kind == onNodePatch {
				for _, p := range ksNodePatches {
					rows = append(rows, ksRow{o.method, path, p.body, p.rule, ksWhoMay(t, p.rule), hideNode})
				}
				continue
			}
			row := ksRow{method: o.method, path: path, body: ksBodies[o.method+" "+rt.path], rule: rr.rule, hide: ksHides[rr.kind]}
			switch rr.kind {
			case onNodeList: // everyone, filtered
				row.rule, row.allow = "", apiReader
			case onNodeDelete:
				// delete:self_owned_node is tried next, and named.
				row.rule, row.allow = "baremetal:node:delete:self_owned_node", ksWhoMay(t, rr.rule)
			case onGlobal:
				// No node to match a project against: only the
				// system personas can pass.
				for _, p := range ksWhoMay(t, rr.rule) {
					if p == pSA || p == pSR {
						row.allow = append(row.allow, p)
					}
				}
			default:
				row.allow = ksWhoMay(t, rr.rule)
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// The keystone rows' data names routes and rules of the table: a body
// or a rule left behind by a changed route would go unused.
func TestKeystoneRowsUseTheirData(t *testing.T) {
	ops, rules := map[string]bool{}, map[string]bool{}
	for _, rt := range (&server{}).routeTable() {
		for _, o := range rt.ops {
			ops[o.method+" "+rt.path] = rt.auth == authUser
		}
	}
	for _, row := range ksRows(t) {
		rules[row.rule] = true
	}
	for k := range ksBodies {
		if !ops[k] {
			t.Errorf("ksBodies: %s is no authenticated route of the table", k)
		}
	}
	for r := range ksWho {
		// node:delete's caller is told about delete:self_owned_node.
		if !rules[r] && r != "baremetal:node:delete" {
			t.Errorf("ksWho: no row is told about %s", r)
		}
	}
}

// ksRunbookRoute: the runbook routes, checked by RunbookByPersona.
func ksRunbookRoute(rr routeRule) bool {
	switch rr.kind {
	case onRunbook, onRunbookPatch, onRunbookCreate, onRunbookTraits:
		return true
	}
	return strings.HasPrefix(rr.list, "baremetal:runbook:")
}

// ksHides is the 404 each way of authorizing a route answers for another
// project's object; the others answer 403.
var ksHides = map[routeKind]ksHide{
	onNode: hideNode, onNodeSubList: hideNode, onNodeDelete: hideNode, onNodePatch: hideNode, onNodeProvision: hideNode,
	onPort: hidePort, onPortgroup: hidePortgroup, onPortgroupSubList: hidePortgroup,
	onConnector: hideConnector, onVolumeTarget: hideTarget,
}

// ksParams are the values of the path parameters that name no fixture
// object ("drivers/name": :name below /v1/drivers).
var ksParams = map[string]string{
	"chassis": "6c1f1c55-0f0b-4b8a-8a77-3b1d0c9e7a01", "ident": "CUSTOM_KS", "trait": "CUSTOM_KS", "setting": "ProcCores",
	"event": "0d2b9c4e-6f25-4a77-9b3c-5ee1d1a0c0de", "vif": "0f7f2b3a-7d1e-4c55-9f0e-5a1b2c3d4e5f",
	"drivers/name": "ipmi", "conductors/name": "ironflow", "indicator": "led@system", "method": "no_such_method",
}

// ksPath is a route pattern with the fixture's placeholders ({node},
// {port}, {portgroup}, {connector}, {target}) and ksParams' values.
func ksPath(pattern string) string {
	parts := strings.Split(pattern, "/")
	for i, p := range parts {
		name, ok := strings.CutPrefix(p, ":")
		switch {
		case !ok:
		case name == "node" || name == "port" || name == "portgroup":
			parts[i] = "{" + name + "}"
		case name == "uuid": // below connectors or targets
			parts[i] = "{" + strings.TrimSuffix(parts[i-1], "s") + "}"
		case ksParams[parts[2]+"/"+name] != "":
			parts[i] = ksParams[parts[2]+"/"+name]
		default:
			parts[i] = ksParams[name]
		}
	}
	return strings.Join(parts, "/")
}

// ksBodies are the request bodies of the operations that take one.
var (
	ksExtraPatch = []map[string]any{{"op": "add", "path": "/extra/k", "value": "v"}}
	ksBodies     = map[string]any{
		"POST /v1/nodes":                             map[string]any{"driver": "fake-hardware"},
		"PUT /v1/nodes/:node/states/provision":       map[string]any{"target": "manage"},
		"PUT /v1/nodes/:node/states/power":           map[string]any{"target": "power on"},
		"PUT /v1/nodes/:node/maintenance":            map[string]any{"reason": "ks"},
		"PUT /v1/nodes/:node/management/boot_device": map[string]any{"boot_device": "pxe"},
		"POST /v1/nodes/:node/vmedia":                map[string]any{"device_type": "cdrom", "image_url": "http://127.0.0.1/x.iso"},
		"PUT /v1/nodes/:node/traits":                 map[string]any{"traits": []string{"CUSTOM_KS"}},
		"PUT /v1/nodes/:node/states/raid":            map[string]any{"logical_disks": []any{}},
		"PUT /v1/nodes/:node/states/boot_mode":       map[string]any{"target": "uefi"},
		"PUT /v1/nodes/:node/states/secure_boot":     map[string]any{"target": true},
		"POST /v1/nodes/:node/vifs":                  map[string]any{"id": "0f7f2b3a-7d1e-4c55-9f0e-5a1b2c3d4e5f"},
		"POST /v1/ports":                             map[string]any{"address": "{mac}", "node_uuid": "{node}"},
		"PATCH /v1/ports/:port":                      ksExtraPatch,
		"POST /v1/portgroups":                        map[string]any{"address": "{mac}", "node_uuid": "{node}"},
		"PATCH /v1/portgroups/:portgroup":            ksExtraPatch,
		"POST /v1/volume/connectors":                 map[string]any{"node_uuid": "{node}", "type": "iqn", "connector_id": "iqn.2026-12.org.ironflow:{mac}"},
		"PATCH /v1/volume/connectors/:uuid":          ksExtraPatch,
		"POST /v1/volume/targets":                    map[string]any{"node_uuid": "{node}", "volume_type": "iscsi", "boot_index": 1, "volume_id": "{mac}"},
		"PATCH /v1/volume/targets/:uuid":             ksExtraPatch,
		"POST /v1/chassis":                           map[string]any{"description": "ks"},
		"PATCH /v1/chassis/:chassis":                 ksExtraPatch,
		"POST /v1/deploy_templates":                  map[string]any{"name": "CUSTOM_KS"},
		"PATCH /v1/deploy_templates/:ident":          []map[string]any{},
		"POST /v1/events": map[string]any{"events": []any{map[string]any{"event": "network.bind_port",
			"port_id": "0f7f2b3a-7d1e-4c55-9f0e-5a1b2c3d4e5f", "mac_address": "{mac}", "status": "ACTIVE"}}},
		"PUT /v1/nodes/:node/management/indicators/:indicator": map[string]any{"state": "on"},
		"PUT /v1/nodes/:node/states/console":                   map[string]any{"enabled": false},
	}
)

// ksNodePatches: a node patch needs the rules of the fields it changes
// (Ironic's _authorize_patch_and_get_node).
var ksNodePatches = []struct {
	body any
	rule string
}{
	{[]map[string]any{{"op": "add", "path": "/extra/k", "value": "v"}}, "baremetal:node:update_extra"},
	{[]map[string]any{{"op": "add", "path": "/driver_info/k", "value": "v"}}, "baremetal:node:update:driver_info"},
	{[]map[string]any{{"op": "add", "path": "/instance_info/k", "value": "v"}}, "baremetal:node:update_instance_info"},
	{[]map[string]any{{"op": "add", "path": "/instance_name", "value": "web-1"}}, "baremetal:node:update_instance_info"},
	{[]map[string]any{{"op": "replace", "path": "/name", "value": "ks-renamed"}}, "baremetal:node:update:name"},
	{[]map[string]any{{"op": "replace", "path": "/owner", "value": "someone"}}, "baremetal:node:update:owner"},
	{[]map[string]any{{"op": "replace", "path": "/deploy_interface", "value": "direct"}}, "baremetal:node:update:driver_interfaces"},
	{[]map[string]any{{"op": "replace", "path": "/description", "value": "x"}}, "baremetal:node:update"},
	// A system-only rule: a project's token is InvalidScope (403).
	{[]map[string]any{{"op": "replace", "path": "/automated_clean", "value": false}}, "baremetal:node:disable_cleaning"},
}

// ksWho is who may, rule by rule, as ironic/common/policy.py's defaults
// say (written from Ironic, not from policy_defaults.go: the two are
// checked against each other through keystone).
var ksWho = map[string][]ksPersona{
	"baremetal:node:create":                             nodeCreate,
	"baremetal:node:get":                                sysOrProjectReader,
	"baremetal:node:update_extra":                       sysOrProjectMember,
	"baremetal:node:update:driver_info":                 sysMemberOrOwnerMember,
	"baremetal:node:update_instance_info":               sysOrOwnerMemberAndLesseeAdmin,
	"baremetal:node:update:name":                        sysMemberOrOwnerMember,
	"baremetal:node:update:owner":                       sysMember,
	"baremetal:node:update:driver_interfaces":           sysMemberOrOwnerAdmin,
	"baremetal:node:update":                             sysOrProjectMember,
	"baremetal:node:disable_cleaning":                   sysAdmin,
	"baremetal:node:delete":                             sysAdmin,
	"baremetal:node:validate":                           sysOrOwnerMemberAndLesseeAdmin,
	"baremetal:node:get_states":                         sysOrProjectReader,
	"baremetal:node:set_provision_state":                sysOrOwnerMemberAndLesseeAdmin,
	"baremetal:node:set_power_state":                    sysOrProjectMember,
	"baremetal:node:get_console":                        sysMemberOrOwnerMember,
	"baremetal:node:set_console_state":                  sysMemberOrOwnerMember,
	"baremetal:node:set_maintenance":                    sysOrOwnerMemberAndLesseeAdmin,
	"baremetal:node:clear_maintenance":                  sysOrOwnerMemberAndLesseeAdmin,
	"baremetal:node:get_boot_device":                    sysMemberOrOwnerAdmin,
	"baremetal:node:set_boot_device":                    sysMemberOrOwnerAdmin,
	"baremetal:node:inject_nmi":                         sysMemberOrOwnerAdmin,
	"baremetal:node:get_indicator_state":                sysOrProjectReader,
	"baremetal:node:set_indicator_state":                sysMemberOrOwnerMember,
	"baremetal:node:history:get":                        sysOrOwnerReader,
	"baremetal:node:inventory:get":                      sysOrOwnerReader,
	"baremetal:node:vmedia:attach":                      sysOrProjectMember,
	"baremetal:node:vmedia:detach":                      sysOrProjectMember,
	"baremetal:node:traits:list":                        sysOrProjectReader,
	"baremetal:node:traits:set":                         sysMemberOrOwnerAdmin,
	"baremetal:node:traits:delete":                      sysMemberOrOwnerAdmin,
	"baremetal:node:set_raid_state":                     sysMemberOrOwnerMember,
	"baremetal:node:set_boot_mode":                      sysOrProjectMember,
	"baremetal:node:set_secure_boot":                    sysOrProjectMember,
	"baremetal:node:bios:get":                           sysOrProjectReader,
	"baremetal:node:firmware:get":                       sysOrProjectReader,
	"baremetal:node:vif:list":                           sysOrProjectReader,
	"baremetal:node:vendor_passthru":                    sysAdmin,
	"baremetal:node:vif:attach":                         sysOrOwnerMemberAndLesseeAdmin,
	"baremetal:node:vif:detach":                         sysOrOwnerMemberAndLesseeAdmin,
	"baremetal:port:create":                             sysAdminOrOwnerAdmin,
	"baremetal:port:get":                                sysOrProjectReader,
	"baremetal:port:update":                             sysMemberOrOwnerAdmin,
	"baremetal:port:delete":                             sysAdminOrOwnerAdmin,
	"baremetal:portgroup:create":                        sysAdminOrOwnerAdmin,
	"baremetal:portgroup:get":                           sysOrProjectReader,
	"baremetal:portgroup:update":                        sysMemberOrOwnerAdmin,
	"baremetal:portgroup:delete":                        sysAdminOrOwnerAdmin,
	"baremetal:volume:create":                           sysMemberOrOwnerLesseeAdmin,
	"baremetal:volume:get":                              sysOrProjectReader,
	"baremetal:volume:update":                           sysOrOwnerMemberAndLesseeAdmin,
	"baremetal:volume:delete":                           sysMemberOrOwnerLesseeAdmin,
	"baremetal:chassis:get":                             sysReader,
	"baremetal:chassis:create":                          sysAdmin,
	"baremetal:chassis:update":                          sysMember,
	"baremetal:chassis:delete":                          sysAdmin,
	"baremetal:shards:get":                              sysReader,
	"baremetal:inspection_rule:get":                     sysReader,
	"baremetal:inspection_rule:create":                  sysAdmin,
	"baremetal:inspection_rule:update":                  sysAdmin,
	"baremetal:inspection_rule:delete":                  sysAdmin,
	"baremetal:deploy_template:get":                     sysReader,
	"baremetal:deploy_template:create":                  sysAdmin,
	"baremetal:deploy_template:update":                  sysAdmin,
	"baremetal:deploy_template:delete":                  sysAdmin,
	"baremetal:driver:get":                              sysReader,
	"baremetal:driver:get_properties":                   sysReader,
	"baremetal:driver:get_raid_logical_disk_properties": sysReader,
	"baremetal:conductor:get":                           sysReader,
	"baremetal:events:post":                             sysAdmin,
	"baremetal:driver:vendor_passthru":                  sysAdmin,
}

func ksWhoMay(t *testing.T, rule string) []ksPersona {
	t.Helper()
	who, ok := ksWho[rule]
	if !ok {
		t.Fatalf("rule %s has no entry in ksWho: who may, as Ironic's policy.py says?", rule)
	}
	return who
}

func TestKeystone(t *testing.T) {
	e := startKeystoneEnv(t)

	t.Run("PublicAndUnauthenticated", func(t *testing.T) {
		for _, p := range []string{"/", "/v1"} {
			if r := e.req("", "GET", p, nil); r.status != 200 {
				t.Errorf("GET %s without a token: %d, want 200 (public as in Ironic)", p, r.status)
			}
		}
		// The agent's endpoints take no Keystone token.
		if r := e.req("", "GET", "/v1/lookup?addresses=02:4b:53:ff:ff:ff", nil); r.status == 401 {
			t.Errorf("lookup without a token: 401, want the agent endpoint open")
		}
		for _, tok := range []string{"", "not-a-token"} {
			r := e.req(tok, "GET", "/v1/nodes", nil)
			if r.status != 401 {
				t.Fatalf("token %q: %d %s, want 401", tok, r.status, r.body)
			}
			if got, want := r.header.Get("WWW-Authenticate"), fmt.Sprintf(`Keystone uri="%s"`, e.k.URL); got != want {
				t.Errorf("WWW-Authenticate %q, want %q", got, want)
			}
			var body struct{ Error struct{ Code int } }
			if err := json.Unmarshal(r.body, &body); err != nil || body.Error.Code != 401 {
				t.Errorf("401 body %s: want keystonemiddleware's error JSON", r.body)
			}
		}
	})

	t.Run("RouteByPersona", func(t *testing.T) {
		covered := map[string]bool{}
		cases := 0
		rows := ksRows(t)
		for _, row := range rows {
			for _, p := range ksPersonas {
				for _, rel := range []string{"own", "other"} {
					e.checkRow(t, row, p, rel)
					cases++
				}
			}
			covered[row.method+" "+routePattern(row.path)] = true
		}
		for _, row := range ksRunbookTable {
			covered[row.method+" "+routePattern(row.path)] = true
		}
		covered["GET /v1/runbooks"], covered["POST /v1/runbooks"] = true, true // RunbookByPersona
		// AllocationByPersona.
		for _, r := range ksAllocationRoutes {
			covered[r] = true
		}
		// RolloutByPersona.
		for _, rt := range (&server{}).routeTable() {
			for _, o := range rt.ops {
				if ksRolloutRoute(o.policy) {
					covered[o.method+" "+routePattern(rt.path)] = true
				}
			}
		}
		for _, r := range registeredRoutes(t) {
			if !covered[r] {
				t.Errorf("route %s has no row in ksRows", r)
			}
		}
		t.Logf("%d rows, %d requests", len(rows), cases)
	})

	t.Run("RunbookByPersona", e.runbookByPersona)
	t.Run("AllocationByPersona", e.allocationByPersona)
	t.Run("RolloutByPersona", e.rolloutByPersona)

	t.Run("ListsAndFilters", func(t *testing.T) {
		owned := e.fixture(e.ownerPID, "", false)
		leased := e.fixture("ks-someone-else", e.lessPID, false)
		other := e.fixture("ks-someone-else", "", false)
		// seen follows the list's pages (the route table above leaves
		// more nodes than one page holds).
		seen := func(p ksPersona, q string) []string {
			var ids []string
			for marker := ""; ; {
				sep := "?"
				if q != "" {
					sep = "&"
				}
				path := "/v1/nodes" + q
				if marker != "" {
					path += sep + "marker=" + marker
				}
				r := e.req(e.tokens[p], "GET", path, nil)
				if r.status != 200 {
					t.Fatalf("%s list%s: %d %s", p, q, r.status, r.body)
				}
				var l struct {
					Nodes []struct{ UUID string }
					Next  string
				}
				_ = json.Unmarshal(r.body, &l)
				for _, n := range l.Nodes {
					ids = append(ids, n.UUID)
				}
				if l.Next == "" || len(l.Nodes) == 0 {
					return ids
				}
				marker = l.Nodes[len(l.Nodes)-1].UUID
			}
		}
		has := func(ids []string, want ...string) bool {
			for _, w := range want {
				if !slices.Contains(ids, w) {
					return false
				}
			}
			return true
		}
		if ids := seen(pSR, ""); !has(ids, owned.node, leased.node, other.node) {
			t.Errorf("system reader sees %v, want all three", ids)
		}
		if ids := seen(pOM, ""); !has(ids, owned.node) || slices.Contains(ids, leased.node) || slices.Contains(ids, other.node) {
			t.Errorf("owner member sees %v, want its own node only", ids)
		}
		if ids := seen(pLM, ""); !has(ids, leased.node) || slices.Contains(ids, owned.node) || slices.Contains(ids, other.node) {
			t.Errorf("lessee member sees %v, want the leased node only", ids)
		}
		if ids := seen(pSR, "?owner="+e.ownerPID); !has(ids, owned.node) || slices.Contains(ids, other.node) {
			t.Errorf("?owner= as system reader: %v", ids)
		}
		if ids := seen(pSR, "?lessee="+e.lessPID); !has(ids, leased.node) || slices.Contains(ids, owned.node) {
			t.Errorf("?lessee= as system reader: %v", ids)
		}
		if r := e.req(e.tokens[pOM], "GET", "/v1/nodes?owner=ks-someone-else", nil); r.status != 403 {
			t.Errorf("owner member asking for another owner's nodes: %d, want 403", r.status)
		}
	})

	// Ironic's node_sanitize: below baremetal:node:get:filter_threshold the
	// per-field rules redact; a lessee is not an owner reader.
	t.Run("LesseeSeesRedactedFields", func(t *testing.T) {
		id := e.create("/v1/nodes", map[string]any{"driver": "fake-hardware", "owner": e.ownerPID, "lessee": e.lessPID,
			"driver_info": map[string]any{"fake_address": "10.20.30.40"}})
		get := func(p ksPersona, path string) map[string]any {
			r := e.req(e.tokens[p], "GET", path, nil)
			if r.status != 200 {
				t.Fatalf("%s GET %s: %d %s", p, path, r.status, r.body)
			}
			return r.json(t)
		}
		want := map[string]any{"content": "** Redacted - requires baremetal:node:get:driver_info permission. **"}
		for _, n := range []map[string]any{get(pLM, "/v1/nodes/"+id), nodeList(get(pLM, "/v1/nodes/detail")).get(id)} {
			if got := n["driver_info"]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("lessee member: driver_info %v, want %v", got, want)
			}
			if got := n["last_error"]; got != "** Value Redacted - Requires baremetal:node:get:last_error permission. **" {
				t.Errorf("lessee member: last_error %v", got)
			}
		}
		for _, p := range []ksPersona{pOM, pOR, pSR} {
			if di, _ := get(p, "/v1/nodes/"+id)["driver_info"].(map[string]any); di["fake_address"] != "10.20.30.40" {
				t.Errorf("%s: driver_info %v, want it shown", p, di)
			}
		}
	})

	// [api]project_admin_can_manage_own_nodes: a project admin creates
	// nodes its project owns, and deletes them.
	t.Run("ProjectAdminOwnsWhatItCreates", func(t *testing.T) {
		r := e.req(e.tokens[pOA], "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware"})
		if r.status != 201 || r.json(t)["owner"] != e.ownerPID {
			t.Fatalf("owner admin creates a node: %d %s, want 201 owned by %s", r.status, r.body, e.ownerPID)
		}
		id := r.json(t)["uuid"].(string)
		if r := e.req(e.tokens[pOA], "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "owner": "ks-someone-else"}); r.status != 403 {
			t.Errorf("owner admin creates another project's node: %d, want 403", r.status)
		}
		if r := e.req(e.tokens[pOM], "DELETE", "/v1/nodes/"+id, nil); r.status != 403 {
			t.Errorf("owner member deletes: %d, want 403", r.status)
		}
		if r := e.req(e.tokens[pOA], "DELETE", "/v1/nodes/"+id, nil); r.status != 204 {
			t.Errorf("owner admin deletes its node: %d %s, want 204", r.status, r.body)
		}
	})

	// Ironic's automatic_lessee_source = instance: Nova's project_id in
	// instance_info becomes the lessee at deploy, and leaves at teardown.
	// A provision verb's history event names the project of the token
	// that sent it (API 1.113).
	t.Run("HistoryProject", func(t *testing.T) {
		serveUpTo(t, v113NodeHistoryProject)
		node := e.fixture(e.ownerPID, "", false).node
		if r := e.req(e.tokens[pOM], "PUT", "/v1/nodes/"+node+"/states/provision", map[string]any{"target": "manage"}); r.status != 202 {
			t.Fatalf("manage as the owner's member: %d %s", r.status, r.body)
		}
		r := e.req(e.tokens[pSA], "GET", "/v1/nodes/"+node+"/history?detail=True", nil)
		events, _ := r.json(t)["history"].([]any)
		if r.status != 200 || len(events) == 0 {
			t.Fatalf("history: %d %s", r.status, r.body)
		}
		if got := events[len(events)-1].(map[string]any)["project"]; got != e.ownerPID {
			t.Errorf("the manage event's project %v, want %s", got, e.ownerPID)
		}
	})

	t.Run("AutomaticLessee", func(t *testing.T) {
		ctx := context.Background()
		id := e.create("/v1/nodes", map[string]any{"driver": "fake-hardware", "owner": e.ownerPID,
			"instance_info": map[string]any{"project_id": e.lessPID, "image_source": "http://127.0.0.1/img.qcow2"}})
		if _, err := e.st.SetProvisionState(ctx, id, nil, "available", nil, nil); err != nil {
			t.Fatal(err)
		}
		if r := e.req(e.tokens[pSA], "PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "active"}); r.status != 202 {
			t.Fatalf("deploy: %d %s", r.status, r.body)
		}
		n, err := e.st.GetNode(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if n.Lessee == nil || *n.Lessee != e.lessPID || n.DriverInternalInfo["automatic_lessee"] != true {
			t.Fatalf("after deploy: lessee %v, driver_internal_info %v; want %s, automatic_lessee", n.Lessee, n.DriverInternalInfo, e.lessPID)
		}
		if r := e.req(e.tokens[pLM], "GET", "/v1/nodes/"+id, nil); r.status != 200 {
			t.Errorf("the project of the instance reads its node: %d", r.status)
		}
		if _, err := e.st.SetProvisionState(ctx, id, nil, "active", nil, nil); err != nil {
			t.Fatal(err)
		}
		if r := e.req(e.tokens[pSA], "PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "deleted"}); r.status != 202 {
			t.Fatalf("undeploy: %d %s", r.status, r.body)
		}
		if n, _ = e.st.GetNode(ctx, id); n.Lessee != nil {
			t.Errorf("after teardown: lessee %v, want none", *n.Lessee)
		}
	})

	t.Run("PolicyFile", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(file, []byte(`"baremetal:node:get": "role:admin and system_scope:all"`+"\n"+
			`"baremetal:node:update_owner_provisioned": "!"`+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		st := storetest.New(t)
		e.useServer(t, e.newServer(t, st, e.keystoneConfig(0, file)))
		n := e.fixture(e.ownerPID, "", false)
		if r := e.req(e.tokens[pSR], "GET", "/v1/nodes/"+n.node, nil); r.status != 404 {
			t.Errorf("system reader with node:get overridden to system admin: %d, want 404", r.status)
		}
		if r := e.req(e.tokens[pSA], "GET", "/v1/nodes/"+n.node, nil); r.status != 200 {
			t.Errorf("system admin: %d", r.status)
		}
		// The owner of a provisioned node changes only under
		// baremetal:node:update_owner_provisioned (Ironic's node patch),
		// here nobody's; an available node's owner changes as before.
		setOwner := []map[string]any{{"op": "replace", "path": "/owner", "value": "ks-new-owner"}}
		if r := e.req(e.tokens[pSA], "PATCH", "/v1/nodes/"+n.node, setOwner); r.status != 200 {
			t.Errorf("system admin sets the owner of an enrolled node: %d %s", r.status, r.body)
		}
		active := provision.Active
		if _, err := st.SetProvisionState(context.Background(), n.node, nil, active, nil, nil); err != nil {
			t.Fatal(err)
		}
		want := "Access was denied to the following resource: baremetal:node:update_owner_provisioned"
		if r := e.req(e.tokens[pSA], "PATCH", "/v1/nodes/"+n.node, setOwner); r.status != 403 || r.faultstring(t) != want {
			t.Errorf("system admin sets the owner of an active node: %d %s, want 403 %q", r.status, r.body, want)
		}
	})

	t.Run("BaremetalCLI", func(t *testing.T) {
		if _, err := os.Stat(baremetalCLI); err != nil {
			t.Skip("SKIPPED LOUDLY: no baremetal CLI (python3-ironicclient)")
		}
		if err := e.k.RegisterService("ironic", "baremetal", e.srv.URL); err != nil {
			t.Fatal(err)
		}
		owned := e.fixture(e.ownerPID, "", false)
		other := e.fixture("ks-someone-else", "", false)
		run := func(user, project string, system bool, args ...string) (string, string, int) {
			cmd := exec.Command("/usr/bin/python3", append([]string{baremetalCLI}, args...)...)
			env := []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "OS_AUTH_TYPE=password", "OS_AUTH_URL=" + e.k.URL,
				"OS_USERNAME=" + user, "OS_PASSWORD=" + user + "-pw", "OS_USER_DOMAIN_NAME=Default",
				"OS_IDENTITY_API_VERSION=3", "OS_INTERFACE=public", "OS_REGION_NAME=RegionOne"}
			if system {
				env = append(env, "OS_SYSTEM_SCOPE=all")
			} else {
				env = append(env, "OS_PROJECT_NAME="+project, "OS_PROJECT_DOMAIN_NAME=Default")
			}
			cmd.Env = env
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			return out.String(), errb.String(), code
		}
		out, errs, code := run(string(pOM), "owner-proj", false, "node", "list", "-f", "value", "-c", "UUID")
		if code != 0 || !strings.Contains(out, owned.node) || strings.Contains(out, other.node) {
			t.Fatalf("owner member: baremetal node list: exit %d, out %q, err %q; want its node only", code, out, errs)
		}
		if out, errs, code := run(string(pOM), "owner-proj", false, "node", "show", owned.node, "-f", "value", "-c", "owner"); code != 0 || strings.TrimSpace(out) != e.ownerPID {
			t.Errorf("owner member: node show own: exit %d %q %q", code, out, errs)
		}
		if _, errs, code := run(string(pOM), "owner-proj", false, "node", "show", other.node); code == 0 || !strings.Contains(errs, "could not be found") {
			t.Errorf("owner member: node show other project's node: exit %d, %q; want not found", code, errs)
		}
		if out, errs, code := run(string(pSR), "", true, "node", "list", "--limit", "0", "-f", "value", "-c", "UUID"); /* every page: the route table leaves more nodes than one holds */ code != 0 || !strings.Contains(out, other.node) || !strings.Contains(out, owned.node) {
			t.Errorf("system reader: node list: exit %d %q %q", code, out, errs)
		}
	})

	t.Run("RevokedTokenRefusedWithinCacheCap", func(t *testing.T) {
		e.useServer(t, e.newServer(t, e.st, e.keystoneConfig(ksCacheCap, "")))
		tok, err := e.k.Token(string(pOM), string(pOM)+"-pw", devstack.Scope{Project: "owner-proj"})
		if err != nil {
			t.Fatal(err)
		}
		if r := e.req(tok, "GET", "/v1/nodes", nil); r.status != 200 {
			t.Fatalf("fresh token: %d %s", r.status, r.body)
		}
		if err := e.k.Revoke(tok); err != nil {
			t.Fatal(err)
		}
		revoked := time.Now()
		for {
			r := e.req(tok, "GET", "/v1/nodes", nil)
			if r.status == 401 {
				t.Logf("revoked token refused %v after revocation (cap %v)", time.Since(revoked).Round(time.Millisecond), ksCacheCap)
				break
			}
			if time.Since(revoked) > ksCacheCap+time.Second {
				t.Fatalf("revoked token still accepted %v after revocation: %d", time.Since(revoked), r.status)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// nodeList is a decoded node list; get finds one node in it.
type nodeList map[string]any

func (l nodeList) get(id string) map[string]any {
	nodes, _ := l["nodes"].([]any)
	for _, n := range nodes {
		if m, _ := n.(map[string]any); m["uuid"] == id {
			return m
		}
	}
	return nil
}

// ksProjectFallback: rules Ironic tries again for a project-scoped caller
// (node.py's post: create:self_owned_node), whose name the 403 then gives.
var ksProjectFallback = map[string]string{"baremetal:node:create": "baremetal:node:create:self_owned_node"}

// checkRow sends row's request as persona p, on a fresh node its project
// owns or leases (rel "own") or on another project's node ("other").
func (e *ksEnv) checkRow(t *testing.T, row ksRow, p ksPersona, rel string) {
	t.Helper()
	owner, lessee := e.ownerPID, ""
	if p == pLM {
		owner, lessee = "ks-someone-else", e.lessPID
	}
	if rel == "other" {
		owner, lessee = "ks-someone-else", ""
	}
	f := e.fixture(owner, lessee, strings.Contains(row.path, "{") || row.body != nil)
	mac := e.mac()
	repl := strings.NewReplacer("{node}", f.node, "{port}", f.port, "{portgroup}", f.portgroup,
		"{connector}", f.connector, "{target}", f.target, "{mac}", mac)
	path := repl.Replace(row.path)
	var body any
	if row.body != nil {
		b, _ := json.Marshal(row.body)
		_ = json.Unmarshal([]byte(repl.Replace(string(b))), &body)
	}
	r := e.req(e.tokens[p], row.method, path, body)
	name := fmt.Sprintf("%s %s %s on %s node", p, row.method, row.path, rel)
	if row.body != nil {
		name += fmt.Sprintf(" %v", row.body)
	}
	system := p == pSA || p == pSR
	allowed := slices.Contains(row.allow, p)
	hidden := rel == "other" && !system && row.hide != hideNone
	if row.rule == "" { // a list: everyone allowed, filtered
		allowed, hidden = true, false
	}
	switch {
	case hidden:
		what := map[ksHide]string{hideNode: "Node", hidePort: "Port", hidePortgroup: "Port Group",
			hideConnector: "Volume connector", hideTarget: "Volume target"}[row.hide]
		id := map[ksHide]string{hideNode: f.node, hidePort: f.port, hidePortgroup: f.portgroup,
			hideConnector: f.connector, hideTarget: f.target}[row.hide]
		if want := fmt.Sprintf("%s %s could not be found.", what, id); r.status != 404 || r.faultstring(t) != want {
			t.Errorf("%s: %d %s, want 404 %q (Ironic hides it)", name, r.status, r.body, want)
		}
	case allowed:
		// Denied is 401, the policy's 403 or the hidden node's 404; a
		// handler's own 403 or 404 (Operation not permitted, no such
		// history event) means the policy let the request through.
		denied := r.status == 401 ||
			r.status == 403 && strings.HasPrefix(r.faultstring(t), "Access was denied") ||
			r.status == 404 && r.faultstring(t) == fmt.Sprintf("Node %s could not be found.", f.node)
		if denied {
			t.Errorf("%s: %d %s, want allowed by %s", name, r.status, r.body, row.rule)
		}
	default:
		rule := row.rule
		if fallback, ok := ksProjectFallback[rule]; ok && !system {
			rule = fallback
		}
		if want, ok := ksInvalidScope(rule); ok && !system {
			// oslo.policy's InvalidScope, answered 403 (Ironic: 500).
			if r.status != 403 || r.faultstring(t) != want {
				t.Errorf("%s: %d %s, want 403 %q", name, r.status, r.body, want)
			}
			return
		}
		if want := "Access was denied to the following resource: " + rule; r.status != 403 || r.faultstring(t) != want {
			t.Errorf("%s: %d %s, want 403 %q", name, r.status, r.body, want)
		}
	}
}

// ksInvalidScope is the text of oslo.policy's InvalidScope for a
// project-scoped token on rule, when Ironic's rule is system-scoped only.
func ksInvalidScope(rule string) (string, bool) {
	for _, r := range append(slices.Clip(ironicDefaultRules), ironflowDefaultRules...) {
		if r.name == rule && slices.Equal(r.scopes, []string{"system"}) {
			return fmt.Sprintf(`"%s": "%s" requires a scope of ['system'], request was made with project scope.`, r.name, r.check), true
		}
	}
	return "", false
}

// routePattern turns a keystone table path back into its route pattern.
func routePattern(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		switch {
		case s == "{node}" || s == "{port}" || s == "{portgroup}":
			parts[i] = ":" + strings.Trim(s, "{}")
		case s == "{connector}" || s == "{target}" || s == "{inspection_rule}" || s == "{rollout}":
			parts[i] = ":uuid"
		case i == 3 && (parts[2] == "chassis" && s != "detail"):
			parts[i] = ":chassis"
		case i == 3 && (parts[2] == "deploy_templates" || parts[2] == "runbooks"):
			parts[i] = ":ident"
		case i == 3 && (parts[2] == "drivers" || parts[2] == "conductors"):
			parts[i] = ":name"
		case i == 5 && parts[4] == "history":
			parts[i] = ":event"
		case i == 5 && parts[4] == "traits":
			parts[i] = ":trait"
		case i == 5 && parts[4] == "vifs":
			parts[i] = ":vif"
		case i == 5 && parts[4] == "bios":
			parts[i] = ":setting"
		case i == 6 && parts[5] == "indicators":
			parts[i] = ":indicator"
		case i == 5 && parts[4] == "vendor_passthru" && s != "methods":
			parts[i] = ":method"
		}
	}
	return strings.Join(parts, "/")
}

// registeredRoutes are the authenticated routes gin serves, as
// "METHOD pattern".
func registeredRoutes(t *testing.T) []string {
	s := &server{cfg: DefaultConfig(), log: quietLogger(), hbGate: newSignalGate()}
	s.routes()
	authenticated := map[string]bool{}
	for _, rt := range s.table {
		for _, o := range rt.ops {
			authenticated[o.method+" "+rt.path] = rt.auth == authUser
		}
	}
	var out []string
	for _, r := range s.router.Routes() {
		if k := r.Method + " " + r.Path; authenticated[k] {
			out = append(out, k)
		}
	}
	return out
}

// Every authenticated route has a rule: under the keystone strategy a
// route without one is refused to everyone.
func TestEveryRouteHasAPolicyRule(t *testing.T) {
	rules := map[string]routeRule{}
	for _, rt := range (&server{}).routeTable() {
		for _, o := range rt.ops {
			rules[o.method+" "+rt.path] = o.policy
		}
	}
	for _, r := range registeredRoutes(t) {
		if rules[r] == (routeRule{}) {
			t.Errorf("route %s has no policy rule in the route table (routes.go)", r)
		}
	}
}

// The check-string language: Ironic's composite rules and a few edge cases.
func TestPolicyCheckStrings(t *testing.T) {
	e, err := newPolicyEngine("")
	if err != nil {
		t.Fatal(err)
	}
	owner := policyTarget{"node.owner": "p1"}
	member := &creds{ProjectID: "p1", Roles: []string{"member", "reader"}}
	lessee := &creds{ProjectID: "p2", Roles: []string{"member", "reader"}}
	leased := policyTarget{"node.owner": "p1", "node.lessee": "p2"}
	service := &creds{ProjectID: "s", ProjectName: "service", Roles: []string{"service"}}
	for _, c := range []struct {
		rule string
		cr   *creds
		t    policyTarget
		want bool
	}{
		{"baremetal:node:get", member, owner, true},
		{"baremetal:node:get", lessee, owner, false},
		{"baremetal:node:get", lessee, leased, true},
		{"baremetal:node:update:driver_info", lessee, leased, false},
		{"baremetal:node:update:driver_info", member, leased, true},
		{"baremetal:node:delete", member, owner, false},
		{"baremetal:node:update:owner", service, nil, true}, // SYSTEM_MEMBER has rule:service_role
		{"baremetal:node:create", service, nil, false},      // SYSTEM_ADMIN or SYSTEM_SERVICE
		{"baremetal:chassis:get", member, nil, false},       // system scope only
		{"show_password", &creds{SystemScope: "all", Roles: []string{"admin"}}, nil, false},
	} {
		if got := e.allowed(c.rule, c.cr, c.t); got != c.want {
			t.Errorf("%s for %+v on %v: %v, want %v", c.rule, c.cr, c.t, got, c.want)
		}
	}
	for _, bad := range []string{"role:admin and", "(role:admin", "nocolon"} {
		if _, err := parseCheck(bad); err == nil {
			t.Errorf("parseCheck(%q): no error", bad)
		}
	}
}

// A project-scoped token on a system-only rule is oslo.policy's
// InvalidScope: the exception's text (the default check string, whatever a
// policy file says) as a 403, where Ironic answers 500; a system token
// is checked as before.
func TestProjectTokenOnSystemOnlyRuleIsInvalidScope(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(`"baremetal:chassis:get": "@"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	project := &creds{ProjectID: "p1", Roles: []string{"admin", "member", "reader"}}
	want := `"baremetal:chassis:get": "(role:reader and system_scope:all) or (role:service and system_scope:all) or rule:service_role" requires a scope of ['system'], request was made with project scope.`
	for _, pf := range []string{"", file} {
		e, err := newPolicyEngine(pf)
		if err != nil {
			t.Fatal(err)
		}
		var ae *apiError
		if err := e.authorize("baremetal:chassis:get", project, nil); !errors.As(err, &ae) || ae.status != 403 || ae.msg != want {
			t.Errorf("policy file %q: project token on chassis:get: %v, want 403 %q", pf, err, want)
		}
		if err := e.authorize("baremetal:chassis:get", &creds{SystemScope: "all", Roles: []string{"reader"}}, nil); err != nil {
			t.Errorf("policy file %q: system reader on chassis:get: %v", pf, err)
		}
	}
	e, _ := newPolicyEngine("")
	if err := e.authorize("baremetal:node:get", project, policyTarget{"node.owner": "p2"}); err == nil || !isForbidden(err) {
		t.Errorf("project token on a system-and-project rule: %v, want 403", err)
	}
}
