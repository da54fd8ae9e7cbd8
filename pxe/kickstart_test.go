package pxe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ironflow/ironflow/configdrive"
)

const testToken = "tok_3N9v-QxY.z~K"

func ksParams() KickstartParams {
	return KickstartParams{
		NodeUUID: testNode, APIURL: "http://10.99.0.1:6385", AgentToken: testToken,
		ImageURL: "http://10.99.0.1:8080/images/rootfs.tar.gz",
	}
}

// heartbeatRecorder is an API that records heartbeat requests.
type heartbeatRecorder struct {
	mu   sync.Mutex
	got  []map[string]string
	hdrs []http.Header
	path []string
}

func (h *heartbeatRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]string
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &body); err != nil {
		http.Error(w, "bad json: "+string(b), 400)
		return
	}
	h.mu.Lock()
	h.got, h.hdrs, h.path = append(h.got, body), append(h.hdrs, r.Header.Clone()), append(h.path, r.Method+" "+r.URL.Path)
	h.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// runSection runs a kickstart section with sh, as anaconda does.
func runSection(t *testing.T, body string, replace ...string) {
	t.Helper()
	body = strings.NewReplacer(replace...).Replace(body)
	out, err := exec.Command("sh", "-euc", body).CombinedOutput()
	if err != nil {
		t.Fatalf("section failed: %v\n%s\n--- section:\n%s", err, out, body)
	}
}

// TestKickstartHeartbeatsReachTheAPI runs the rendered %pre, %onerror and
// %post with sh and a real curl against a test API: the bodies are Ironic's
// heartbeat, with the token, and the header asks for API 1.72.
func TestKickstartHeartbeatsReachTheAPI(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skipf("SKIP: curl is not installed (Debian package curl): %v", err)
	}
	rec := &heartbeatRecorder{}
	api := httptest.NewServer(rec)
	t.Cleanup(api.Close)
	p := ksParams()
	p.APIURL = api.URL + "/"
	ks, err := RenderKickstart(p)
	if err != nil {
		t.Fatal(err)
	}
	sections := KickstartSections(ks)
	for _, name := range []string{"%pre", "%onerror", "%post"} {
		if len(sections[name]) != 1 {
			t.Fatalf("%s sections: %d, want 1:\n%s", name, len(sections[name]), ks)
		}
		runSection(t, sections[name][0], "/usr/bin/curl", curl)
	}
	wantStatus := []string{"start", "error", "end"}
	if len(rec.got) != 3 {
		t.Fatalf("heartbeats: %d, want 3", len(rec.got))
	}
	for i, hb := range rec.got {
		if rec.path[i] != "POST /v1/heartbeat/"+testNode {
			t.Errorf("heartbeat %d: %s", i, rec.path[i])
		}
		if v := rec.hdrs[i].Get("X-OpenStack-Ironic-API-Version"); v != "1.72" {
			t.Errorf("heartbeat %d: API version header %q", i, v)
		}
		if hb["agent_token"] != testToken || hb["agent_status"] != wantStatus[i] || hb["agent_version"] != "anaconda" ||
			hb["agent_status_message"] == "" {
			t.Errorf("heartbeat %d body %v, want status %s with the token", i, hb, wantStatus[i])
		}
		if _, ok := hb["callback_url"]; !ok {
			t.Errorf("heartbeat %d has no callback_url", i)
		}
	}
}

func TestRenderKickstartDefault(t *testing.T) {
	p := ksParams()
	p.RootPasswordHash = "$6$salt$Zm9vYmFy/hash."
	p.SSHKeys = []string{"ssh-ed25519 AAAAC3Nza operator@example"}
	ks, err := RenderKickstart(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"text\n", "cmdline\n", "reboot\n",
		"liveimg --url=http://10.99.0.1:8080/images/rootfs.tar.gz\n",
		"rootpw --iscrypted $6$salt$Zm9vYmFy/hash.\n",
		`sshkey --username=root "ssh-ed25519 AAAAC3Nza operator@example"` + "\n",
		"'http://10.99.0.1:6385/v1/heartbeat/" + testNode + "'",
	} {
		if !strings.Contains(ks, want) {
			t.Errorf("kickstart lacks %q:\n%s", want, ks)
		}
	}
	// The end heartbeat is the last thing anaconda runs.
	posts := KickstartSections(ks)["%post"]
	if last := posts[len(posts)-1]; !strings.Contains(last, `"agent_status":"end"`) {
		t.Errorf("last %%post does not send the end heartbeat:\n%s", last)
	}
	if strings.Contains(ks, "url --url") || strings.Contains(ks, "%packages") {
		t.Errorf("liveimg kickstart has a repository install:\n%s", ks)
	}

	p = ksParams()
	p.ImageIsRepo = true
	p.ImageURL = "http://10.99.0.1:8080/images/fedora/"
	ks, err = RenderKickstart(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ks, "url --url=http://10.99.0.1:8080/images/fedora/\n") || len(KickstartSections(ks)["%packages"]) != 1 ||
		strings.Contains(ks, "liveimg") || !strings.Contains(ks, "rootpw --lock\n") {
		t.Errorf("repository kickstart:\n%s", ks)
	}
}

// The config drive, built as ironflow builds it, is written by %post under
// the seed directory; its public keys become sshkey lines.
func TestRenderKickstartConfigDrive(t *testing.T) {
	var iso bytes.Buffer
	err := configdrive.Build(&iso, configdrive.Data{
		MetaData: map[string]any{"uuid": testNode, "hostname": "web-1",
			"public_keys": map[string]any{"b": "ssh-rsa AAAAB3Nza b@example\n", "a": "ssh-ed25519 AAAAC3Nza a@example"}},
		UserData: []byte("#cloud-config\nruncmd: [\"echo it's me\"]\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	files, err := ConfigDriveFiles(iso.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["openstack/latest/meta_data.json"]; !ok {
		t.Fatalf("config drive files: %v", keys(files))
	}
	p := ksParams()
	p.ConfigDrive = files
	ks, err := RenderKickstart(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`sshkey --username=root "ssh-ed25519 AAAAC3Nza a@example"`, `sshkey --username=root "ssh-rsa AAAAB3Nza b@example"`} {
		if !strings.Contains(ks, want) {
			t.Errorf("kickstart lacks %q:\n%s", want, ks)
		}
	}
	posts := KickstartSections(ks)["%post"]
	if len(posts) != 2 {
		t.Fatalf("%d %%post sections, want the config drive's and the final one:\n%s", len(posts), ks)
	}
	seed := t.TempDir()
	runSection(t, posts[0], ConfigDriveSeedDir, seed)
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(seed, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s written as %q, %v; want %q", name, got, err, want)
		}
	}
}

func TestRenderKickstartCustomTemplate(t *testing.T) {
	const custom = `# site template for {{.NodeUUID}}
text
liveimg --url={{.ImageURL}}
%pre --log=/tmp/pre.log
{{heartbeat "start" "site pre"}}
%end
%onerror
{{heartbeat "error" "site: it's broken"}}
%end
%post --nochroot
echo {{shquote .HeartbeatURL}} > /tmp/hb
{{heartbeat "end" "site done"}}
%end
`
	p := ksParams()
	p.Template = custom
	ks, err := RenderKickstart(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ks, "# site template for "+testNode) || !strings.Contains(ks, `"agent_status_message":"site: it'\''s broken"`) ||
		!strings.Contains(ks, "echo 'http://10.99.0.1:6385/v1/heartbeat/"+testNode+"' > /tmp/hb") {
		t.Errorf("custom kickstart:\n%s", ks)
	}

	cases := []struct {
		name, tmpl, want string
	}{
		{"syntax", "text\n{{if .ImageURL}\n", "parse ks_template"},
		{"unknown field", "{{.Password}}", "execute ks_template"},
		{"no post heartbeat", strings.Replace(custom, `{{heartbeat "end" "site done"}}`, "true", 1), "no %post section"},
		{"no pre", strings.Replace(custom, "%pre --log=/tmp/pre.log", "%packages", 1), "no %pre section"},
		{"no onerror", strings.Replace(custom, `{{heartbeat "error" "site: it's broken"}}`, "", 1), "no %onerror section"},
		{"no image", strings.Replace(custom, "liveimg --url={{.ImageURL}}", "", 1), "no liveimg or url command"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p.Template = tc.tmpl
			_, err := RenderKickstart(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("RenderKickstart: %v, want an error about %q", err, tc.want)
			}
			if strings.Contains(err.Error(), testToken) {
				t.Fatalf("error holds the agent token: %v", err)
			}
		})
	}
}

func TestRenderKickstartRefusesUnsafeValues(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(p *KickstartParams)
	}{
		{"node UUID", func(p *KickstartParams) { p.NodeUUID = "node-1" }},
		{"token with a quote", func(p *KickstartParams) { p.AgentToken = testToken + "'; reboot; '" }},
		{"empty token", func(p *KickstartParams) { p.AgentToken = "" }},
		{"image URL with a space", func(p *KickstartParams) { p.ImageURL = "http://x/a b" }},
		{"image URL with a line break", func(p *KickstartParams) { p.ImageURL = "http://x/a\n%pre" }},
		{"image URL scheme", func(p *KickstartParams) { p.ImageURL = "gopher://x/a" }},
		{"API URL scheme", func(p *KickstartParams) { p.APIURL = "ftp://10.99.0.1/" }},
		{"API URL with $", func(p *KickstartParams) { p.APIURL = "http://10.99.0.1/$(reboot)" }},
		{"SSH key with a line break", func(p *KickstartParams) { p.SSHKeys = []string{"ssh-rsa AAA\n%post"} }},
		{"SSH key with a quote", func(p *KickstartParams) { p.SSHKeys = []string{`ssh-rsa AAA" x`} }},
		{"password hash with a space", func(p *KickstartParams) { p.RootPasswordHash = "$6$a b" }},
		{"plain-text password", func(p *KickstartParams) { p.RootPasswordHash = "hunter2" }},
		{"config drive path", func(p *KickstartParams) { p.ConfigDrive = map[string][]byte{"../../etc/shadow": nil} }},
		{"config drive path with a space", func(p *KickstartParams) { p.ConfigDrive = map[string][]byte{"a b": nil} }},
		{"config drive meta_data", func(p *KickstartParams) {
			p.ConfigDrive = map[string][]byte{"openstack/latest/meta_data.json": []byte("{")}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := ksParams()
			tc.mutate(&p)
			ks, err := RenderKickstart(p)
			if err == nil {
				t.Fatalf("rendered:\n%s", ks)
			}
			if strings.Contains(err.Error(), testToken) {
				t.Fatalf("error holds the agent token: %v", err)
			}
		})
	}
	if _, err := RenderKickstart(ksParams()); err != nil || !errors.Is(func() error {
		p := ksParams()
		p.ImageURL = ""
		_, err := RenderKickstart(p)
		return err
	}(), errKickstartParam) {
		t.Fatalf("parameter errors are not errKickstartParam: %v", err)
	}
}

func TestHTTPKickstartRoute(t *testing.T) {
	const anaconda, agent = "3b9c1a52-6f0e-4d2b-9a47-1c5e8f2d7b60", "9d4e2b1c-0a3f-4c5d-8e6f-7a8b9c0d1e2f"
	ks, err := RenderKickstart(KickstartParams{NodeUUID: anaconda, APIURL: "http://10.99.0.1:6385",
		AgentToken: testToken, ImageURL: "http://10.99.0.1:8080/images/rootfs.tar.gz"})
	if err != nil {
		t.Fatal(err)
	}
	b := NewMemoryBackend()
	for _, bc := range []BootConfig{
		{NodeUUID: anaconda, MACs: []string{"52:54:00:12:34:01"}, Method: MethodPXE, Kind: "anaconda", Kickstart: ks},
		{NodeUUID: agent, MACs: []string{"52:54:00:12:34:02"}, Method: MethodPXE, Kind: "agent"},
	} {
		if err := b.Put(bc); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	// The test client is the anaconda node's network card, as the boot
	// host's neighbour table would say for the machine itself.
	h, err := NewHTTPHandler(HTTPConfig{Neighbors: neighborsOf(map[string]string{"127.0.0.1": "52:54:00:12:34:01"})}, b, testSlog(&logs))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cases := []struct {
		name, path string
		status     int
	}{
		{"anaconda node", "/boot/" + anaconda + "/ks.cfg", 200},
		{"upper-case UUID", "/boot/" + strings.ToUpper(anaconda) + "/ks.cfg", 200},
		{"node without a kickstart", "/boot/" + agent + "/ks.cfg", 404},
		{"node without a boot config", "/boot/00000000-0000-4000-8000-000000000000/ks.cfg", 404},
		{"not a UUID", "/boot/anaconda/ks.cfg", 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status == 200 && (string(body) != ks || resp.Header.Get("Cache-Control") != "no-store") {
				t.Errorf("body or Cache-Control (%q) differ from the stored kickstart", resp.Header.Get("Cache-Control"))
			}
		})
	}
	b.Delete(anaconda)
	if status, _ := get(t, srv.URL+"/boot/"+anaconda+"/ks.cfg"); status != 404 {
		t.Errorf("kickstart after the boot config was removed: %d, want 404", status)
	}
	if strings.Contains(logs.String(), testToken) {
		t.Errorf("the boot service logged the agent token:\n%s", logs.String())
	}
}

func testSlog(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func keys(m map[string][]byte) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	return out
}

// leasedBackend is a backend whose nodes hold DHCP leases.
type leasedBackend struct {
	*MemoryBackend
	addrs []netip.Addr
}

func (b leasedBackend) LeasedAddrs(context.Context, []string) ([]netip.Addr, error) {
	return b.addrs, nil
}

// neighborsOf is a neighbour table: client address to MAC.
func neighborsOf(table map[string]string) func(netip.Addr) (net.HardwareAddr, bool) {
	return func(a netip.Addr) (net.HardwareAddr, bool) {
		m, ok := table[a.String()]
		if !ok {
			return nil, false
		}
		hw, err := net.ParseMAC(m)
		return hw, err == nil
	}
}

// A node that holds a lease gets its kickstart (agent token, repository
// credentials, root password hash) only at its leased address. A node
// without one (proxy DHCP, another DHCP server) gets it only where the boot
// host's neighbour table resolves the client to one of the node's MACs,
// unless the operator opts out (KickstartAnyClient).
func TestKickstartOnlyToTheNodesLeasedAddress(t *testing.T) {
	const node = "3d9c8f0e-1b2a-4c5d-8e7f-6a5b4c3d2e1f"
	b := NewMemoryBackend()
	if err := b.Put(BootConfig{NodeUUID: node, MACs: []string{"52:54:00:12:34:03", "52:54:00:12:34:04"}, Method: MethodPXE, Kind: "anaconda", Kickstart: "secret ks"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		addrs     []netip.Addr
		neighbors map[string]string
		anyClient bool
		status    int
		log       string
	}{
		{"leased elsewhere", []netip.Addr{netip.MustParseAddr("10.99.0.5")}, nil, false, 404, "not the node's leased address"},
		{"leased elsewhere, neighbour says node", []netip.Addr{netip.MustParseAddr("10.99.0.5")}, map[string]string{"127.0.0.1": "52:54:00:12:34:03"}, false, 404, "leased address"},
		{"leased to the client", []netip.Addr{netip.MustParseAddr("10.99.0.5"), netip.MustParseAddr("127.0.0.1")}, nil, false, 200, ""},
		{"no lease, client unknown to the segment", nil, nil, false, 404, "not in the boot host's neighbour table"},
		{"no lease, another machine", nil, map[string]string{"127.0.0.1": "52:54:00:66:66:66"}, false, 404, "52:54:00:66:66:66 is not one of the node's ports"},
		{"no lease, the node's second port", nil, map[string]string{"127.0.0.1": "52:54:00:12:34:04"}, false, 200, ""},
		{"no lease, opted out", nil, nil, true, 200, ""},
	} {
		var logs bytes.Buffer
		cfg := HTTPConfig{KickstartAnyClient: c.anyClient, Neighbors: neighborsOf(c.neighbors)}
		h, err := NewHTTPHandler(cfg, leasedBackend{b, c.addrs}, testSlog(&logs))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		status, body := get(t, srv.URL+"/boot/"+node+"/ks.cfg")
		srv.Close()
		if status != c.status || (status == 200) != strings.Contains(body, "secret ks") {
			t.Errorf("%s: %d %q, want %d", c.name, status, body, c.status)
		}
		if c.log != "" && !strings.Contains(logs.String(), "kickstart refused") || !strings.Contains(logs.String(), c.log) {
			t.Errorf("%s: the refusal is not logged with %q:\n%s", c.name, c.log, logs.String())
		}
	}
}

// The host's own neighbour table: a machine on no segment of this host (the
// loopback address) is not in it, so the default check refuses it.
func TestKernelNeighborsDoesNotKnowLoopback(t *testing.T) {
	if hw, ok := kernelNeighbors(netip.MustParseAddr("127.0.0.1")); ok {
		t.Fatalf("loopback resolved to %s", hw)
	}
}

// kernelNeighbors reads the same table as `ip neigh`: every entry with a
// link-layer address resolves to it.
func TestKernelNeighborsAgreesWithIPNeigh(t *testing.T) {
	out, err := exec.Command("ip", "-j", "neigh", "show").Output()
	if err != nil {
		t.Skipf("SKIP: no `ip` command to compare with: %v", err)
	}
	var entries []struct {
		Dst    string   `json:"dst"`
		LLAddr string   `json:"lladdr"`
		State  []string `json:"state"`
	}
	if err := json.Unmarshal(out, &entries); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range entries {
		if e.LLAddr == "" || slices.Contains(e.State, "FAILED") || slices.Contains(e.State, "INCOMPLETE") {
			continue
		}
		a, err := netip.ParseAddr(e.Dst)
		if err != nil {
			continue
		}
		hw, ok := kernelNeighbors(a)
		if !ok || hw.String() != e.LLAddr {
			t.Errorf("%s: kernelNeighbors = %s %v, ip neigh says %s", e.Dst, hw, ok, e.LLAddr)
		}
		checked++
	}
	if checked == 0 {
		t.Skip("SKIP: the host's neighbour table has no resolved entry to compare")
	}
	t.Logf("%d neighbour entries agree with ip neigh", checked)
}
