package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// Keystone is Debian's keystone (python3-keystone) as a test fixture:
// SQLite in WAL mode (the default journal gives random "database is
// locked" errors on writes), fernet tokens, keystone-wsgi-public's own
// server on 127.0.0.1 and a free port, the bootstrap admin with password
// AdminPassword. Passwords are hashed with bcrypt's fewest rounds (4,
// keystone's [identity]password_hash_rounds; 12 by default): every user
// created and every password log-in hashes, and the tests do not test
// the hash's strength.
type Keystone struct {
	URL           string // http://127.0.0.1:<port>/v3
	Dir           string
	AdminPassword string
	proc          *embedded.Process
	adminToken    string
}

// ErrNoKeystone: keystone is not installed.
var ErrNoKeystone = errors.New("keystone is not installed (scripts/install-deps.sh test: python3-keystone)")

// KeystoneAvailable reports whether keystone-manage and
// keystone-wsgi-public are installed.
func KeystoneAvailable() bool {
	_, err1 := exec.LookPath("keystone-manage")
	_, err2 := exec.LookPath("keystone-wsgi-public")
	return err1 == nil && err2 == nil
}

// StartKeystone configures keystone in dir, bootstraps it and serves it,
// returning once it answers /v3.
func StartKeystone(ctx context.Context, dir string) (*Keystone, error) {
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"fernet-keys", "credential-keys"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	conf := fmt.Sprintf(`[DEFAULT]
log_file = %[1]s/keystone.log

[database]
connection = sqlite:///%[1]s/keystone.sqlite

[identity]
password_hash_rounds = 4

[token]
provider = fernet

[fernet_tokens]
key_repository = %[1]s/fernet-keys

[fernet_receipts]
key_repository = %[1]s/fernet-keys

[credential]
key_repository = %[1]s/credential-keys
`, dir)
	cfg := filepath.Join(dir, "keystone.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/v3", port)
	k := &Keystone{URL: url, Dir: dir, AdminPassword: "ironflow-admin-secret"}
	manage := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "keystone-manage", append([]string{"--config-file", cfg}, args...)...)
		// keystone-manage prints a harmless eventlet traceback at exit; only
		// the exit status counts.
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("keystone-manage %s: %w: %s", args[0], err, out)
		}
		return nil
	}
	for _, args := range [][]string{
		{"db_sync"},
		{"fernet_setup", "--keystone-user", "root", "--keystone-group", "root"},
		{"credential_setup", "--keystone-user", "root", "--keystone-group", "root"},
		{"bootstrap", "--bootstrap-password", k.AdminPassword, "--bootstrap-admin-url", url,
			"--bootstrap-internal-url", url, "--bootstrap-public-url", url, "--bootstrap-region-id", "RegionOne"},
	} {
		if err := manage(args...); err != nil {
			return nil, err
		}
	}
	wal := exec.CommandContext(ctx, "/usr/bin/python3", "-c",
		"import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA journal_mode=WAL')", filepath.Join(dir, "keystone.sqlite"))
	if out, err := wal.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("keystone: WAL mode: %w: %s", err, out)
	}
	cmd := exec.Command("keystone-wsgi-public", "--host", "127.0.0.1", "--port", fmt.Sprint(port))
	cmd.Env = append(os.Environ(), "OS_KEYSTONE_CONFIG_FILES="+cfg)
	p, err := embedded.StartProcess("keystone", filepath.Join(dir, "stdout.log"), cmd)
	if err != nil {
		return nil, err
	}
	k.proc = p
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if !p.Running() || time.Now().After(deadline) {
			p.Kill()
			return nil, fmt.Errorf("keystone did not start: %s%s", p.Tail(2000), embedded.Tail(filepath.Join(dir, "keystone.log"), 2000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	tok, err := k.Token("admin", k.AdminPassword, Scope{Project: "admin"})
	if err != nil {
		k.Stop()
		return nil, err
	}
	k.adminToken = tok
	return k, nil
}

// Stop ends keystone.
func (k *Keystone) Stop() { k.proc.Stop(5 * time.Second) }

// Scope is a token's scope: a project (by name, domain Default) or the
// system.
type Scope struct {
	Project string
	System  bool
}

// Token logs user in with its password and returns the token.
func (k *Keystone) Token(user, password string, scope Scope) (string, error) {
	sc := map[string]any{"system": map[string]bool{"all": true}}
	if !scope.System {
		sc = map[string]any{"project": map[string]any{"name": scope.Project, "domain": map[string]string{"name": "Default"}}}
	}
	body := map[string]any{"auth": map[string]any{
		"identity": map[string]any{"methods": []string{"password"}, "password": map[string]any{
			"user": map[string]any{"name": user, "domain": map[string]string{"name": "Default"}, "password": password}}},
		"scope": sc,
	}}
	resp, err := k.call("POST", "/auth/tokens", "", body, 201, nil)
	if err != nil {
		return "", fmt.Errorf("keystone: token for %s: %w", user, err)
	}
	return resp.Header.Get("X-Subject-Token"), nil
}

// Revoke revokes token (DELETE /v3/auth/tokens).
func (k *Keystone) Revoke(token string) error {
	req, _ := http.NewRequest("DELETE", k.URL+"/auth/tokens", nil)
	req.Header.Set("X-Auth-Token", k.adminToken)
	req.Header.Set("X-Subject-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 204 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("keystone: revoke: %s: %s", resp.Status, b)
	}
	return nil
}

// CreateProject creates a project in domain Default and returns its ID.
func (k *Keystone) CreateProject(name string) (string, error) {
	var out struct{ Project struct{ ID string } }
	_, err := k.call("POST", "/projects", k.adminToken, map[string]any{"project": map[string]any{"name": name, "domain_id": "default"}}, 201, &out)
	return out.Project.ID, err
}

// CreateUser creates a user in domain Default and returns its ID.
func (k *Keystone) CreateUser(name, password string) (string, error) {
	var out struct{ User struct{ ID string } }
	_, err := k.call("POST", "/users", k.adminToken, map[string]any{"user": map[string]any{"name": name, "password": password, "domain_id": "default"}}, 201, &out)
	return out.User.ID, err
}

// RoleID finds a role by name, creating it when it does not exist
// (bootstrap makes admin, member and reader).
func (k *Keystone) RoleID(name string) (string, error) {
	var list struct{ Roles []struct{ ID string } }
	if _, err := k.call("GET", "/roles?name="+name, k.adminToken, nil, 200, &list); err != nil {
		return "", err
	}
	if len(list.Roles) > 0 {
		return list.Roles[0].ID, nil
	}
	var out struct{ Role struct{ ID string } }
	_, err := k.call("POST", "/roles", k.adminToken, map[string]any{"role": map[string]string{"name": name}}, 201, &out)
	return out.Role.ID, err
}

// GrantProjectRole gives user role on project.
func (k *Keystone) GrantProjectRole(userID, projectID, role string) error {
	rid, err := k.RoleID(role)
	if err != nil {
		return err
	}
	_, err = k.call("PUT", "/projects/"+projectID+"/users/"+userID+"/roles/"+rid, k.adminToken, nil, 204, nil)
	return err
}

// GrantSystemRole gives user role on the system.
func (k *Keystone) GrantSystemRole(userID, role string) error {
	rid, err := k.RoleID(role)
	if err != nil {
		return err
	}
	_, err = k.call("PUT", "/system/users/"+userID+"/roles/"+rid, k.adminToken, nil, 204, nil)
	return err
}

// RegisterService adds a service of type typ with public, internal and
// admin endpoints at url to the catalog.
func (k *Keystone) RegisterService(name, typ, url string) error {
	var svc struct{ Service struct{ ID string } }
	if _, err := k.call("POST", "/services", k.adminToken, map[string]any{"service": map[string]string{"name": name, "type": typ}}, 201, &svc); err != nil {
		return err
	}
	for _, iface := range []string{"public", "internal", "admin"} {
		ep := map[string]any{"endpoint": map[string]string{"service_id": svc.Service.ID, "interface": iface, "url": url, "region_id": "RegionOne"}}
		if _, err := k.call("POST", "/endpoints", k.adminToken, ep, 201, nil); err != nil {
			return err
		}
	}
	return nil
}

func (k *Keystone) call(method, path, token string, body any, want int, out any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, k.URL+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, err
		}
	}
	return resp, nil
}
