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
	"strings"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// Glance is Debian's glance-api as a test fixture: SQLite, the file store,
// the unauthenticated paste pipeline (every request is an admin), bound to
// 127.0.0.1 on a free port. It needs the glance-api package
// (scripts/install-deps.sh test).
type Glance struct {
	URL  string // http://127.0.0.1:<port>
	Dir  string
	proc *embedded.Process
}

// GlanceAvailable reports whether glance-api is installed.
func GlanceAvailable() bool {
	_, err1 := exec.LookPath("glance-api")
	_, err2 := exec.LookPath("glance-manage")
	return err1 == nil && err2 == nil
}

// StartGlance writes a configuration into dir, syncs the database and
// starts glance-api, returning once it answers its healthcheck.
func StartGlance(ctx context.Context, dir string) (*Glance, error) {
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"images", "staging", "tasks", "lock"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	paste := "/etc/glance/glance-api-paste.ini"
	if _, err := os.Stat(paste); err != nil {
		paste = "/usr/share/glance-common/glance-api-paste.ini"
	}
	conf := fmt.Sprintf(`[DEFAULT]
bind_host = 127.0.0.1
bind_port = %d
workers = 0
log_file = %[2]s/glance-api.log
enabled_backends = fs:file

[database]
connection = sqlite:///%[2]s/glance.sqlite

[paste_deploy]
flavor =
config_file = %[3]s

[glance_store]
default_backend = fs

[fs]
filesystem_store_datadir = %[2]s/images

[os_glance_staging_store]
filesystem_store_datadir = %[2]s/staging

[os_glance_tasks_store]
filesystem_store_datadir = %[2]s/tasks

[oslo_concurrency]
lock_path = %[2]s/lock
`, port, dir, paste)
	cfg := filepath.Join(dir, "glance-api.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "glance-manage", "--config-file", cfg, "db_sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("glance-manage db_sync: %w: %s", err, out)
	}
	p, err := embedded.StartProcess("glance-api", filepath.Join(dir, "stdout.log"), exec.Command("glance-api", "--config-file", cfg))
	if err != nil {
		return nil, err
	}
	g := &Glance{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Dir: dir, proc: p}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(g.URL + "/healthcheck")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return g, nil
			}
		}
		if !p.Running() || time.Now().After(deadline) {
			p.Kill()
			return nil, fmt.Errorf("glance-api did not start: %s%s", p.Tail(2000), embedded.Tail(filepath.Join(dir, "glance-api.log"), 2000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop ends glance-api.
func (g *Glance) Stop() { g.proc.Stop(5 * time.Second) }

// CreateImage registers an image and uploads its data; it returns its ID.
func (g *Glance) CreateImage(name, diskFormat string, data []byte) (string, error) {
	return g.Create(ImageSpec{Name: name, DiskFormat: diskFormat, Data: data})
}

// CreateQueued registers an image without data (status queued).
func (g *Glance) CreateQueued(name, diskFormat string) (string, error) {
	return g.Create(ImageSpec{Name: name, DiskFormat: diskFormat})
}

// ImageSpec is an image to register.
type ImageSpec struct {
	Name, DiskFormat string
	// ContainerFormat defaults to bare.
	ContainerFormat string
	// Properties are the image's extra properties (kernel_id, ramdisk_id,
	// img_type, ...).
	Properties map[string]string
	// Data is uploaded after the image is registered; nil leaves it queued.
	Data []byte
}

// Create registers an image as spec says and uploads its data, if any; it
// returns the image's ID.
func (g *Glance) Create(spec ImageSpec) (string, error) {
	rec := map[string]string{}
	for k, v := range spec.Properties {
		rec[k] = v
	}
	rec["name"], rec["disk_format"], rec["container_format"] = spec.Name, spec.DiskFormat, spec.ContainerFormat
	if spec.ContainerFormat == "" {
		rec["container_format"] = "bare"
	}
	body, _ := json.Marshal(rec)
	req, _ := http.NewRequest("POST", g.URL+"/v2/images", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	var img struct {
		ID string `json:"id"`
	}
	if err := g.do(req, 201, &img); err != nil {
		return "", fmt.Errorf("create image: %w", err)
	}
	if spec.Data == nil {
		return img.ID, nil
	}
	req, _ = http.NewRequest("PUT", g.URL+"/v2/images/"+img.ID+"/file", bytes.NewReader(spec.Data))
	req.Header.Set("Content-Type", "application/octet-stream")
	if err := g.do(req, 204, nil); err != nil {
		return "", fmt.Errorf("upload image %s: %w", img.ID, err)
	}
	return img.ID, nil
}

// Deactivate and Reactivate an image (admin actions).
func (g *Glance) Deactivate(id string) error { return g.action(id, "deactivate") }

// Reactivate an image.
func (g *Glance) Reactivate(id string) error { return g.action(id, "reactivate") }

func (g *Glance) action(id, what string) error {
	req, _ := http.NewRequest("POST", g.URL+"/v2/images/"+id+"/actions/"+what, nil)
	return g.do(req, 204, nil)
}

// Delete an image.
func (g *Glance) Delete(id string) error {
	req, _ := http.NewRequest("DELETE", g.URL+"/v2/images/"+id, nil)
	return g.do(req, 204, nil)
}

// StoredFile is where the file store keeps an image's data (a test that
// overwrites it makes Glance serve bytes that no longer match os_hash_value,
// which Glance itself never lets an API client change).
func (g *Glance) StoredFile(id string) string { return filepath.Join(g.Dir, "images", id) }

func (g *Glance) do(req *http.Request, want int, out any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// ErrNoGlance: glance-api is not installed.
var ErrNoGlance = errors.New("glance-api is not installed (scripts/install-deps.sh test)")
