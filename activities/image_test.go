package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/glance"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

const (
	activeImage      = "0b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a11"
	deactivatedImage = "0b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a12"
)

// fakeGlance answers GET /v2/images/{id} for two images.
func fakeGlance(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/v2/images/")
		status := map[string]string{activeImage: "active", deactivatedImage: "deactivated"}[id]
		if status == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": id, "status": status, "disk_format": "qcow2", "container_format": "bare",
			"size": 1024, "checksum": strings.Repeat("c", 32), "os_hash_algo": "sha512", "os_hash_value": strings.Repeat("ab", 64)})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func glanceActivities(t *testing.T, auth string) (*Activities, *store.Store) {
	g := fakeGlance(t)
	gc, err := glance.New(glance.Config{URL: g.URL, Auth: auth, User: "u", Password: "secret-pw"})
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.New(t)
	return New(st, Config{BootURL: "http://10.0.0.1:8080", Glance: gc, GlanceAuth: auth}, slog.New(slog.NewTextHandler(io.Discard, nil))), st
}

func deployingNode(t *testing.T, st *store.Store, ii map[string]any) *store.Node {
	n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.Deploying, InstanceInfo: ii}
	if err := st.CreateNode(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestTheAgentGetsTheCacheURLAndGlancesChecksumAndFormat(t *testing.T) {
	a, st := glanceActivities(t, glance.AuthHTTPBasic)
	n := deployingNode(t, st, map[string]any{"image_source": "glance://" + activeImage, "image_checksum": "stale"})
	ii, err := a.agentImageInfo(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"image_source": "http://10.0.0.1:8080/cache/" + n.UUID + "/image", "image_os_hash_algo": "sha512",
		"image_os_hash_value": strings.Repeat("ab", 64), "image_disk_format": "qcow2"}
	for k, v := range want {
		if ii[k] != v {
			t.Errorf("instance_info[%s] = %v, want %v", k, ii[k], v)
		}
	}
	if _, ok := ii["image_checksum"]; ok {
		t.Error("the node's own image_checksum was kept next to Glance's")
	}
	if b, _ := json.Marshal(ii); strings.Contains(string(b), "secret-pw") {
		t.Fatalf("Glance's password reached the agent: %s", b)
	}
	if n.InstanceInfo["image_source"] != "glance://"+activeImage {
		t.Fatal("the stored instance_info was changed")
	}
}

func TestDirectGlanceDownloads(t *testing.T) {
	a, st := glanceActivities(t, glance.AuthNone)
	n := deployingNode(t, st, map[string]any{"image_source": activeImage, "image_download_source": "direct"})
	ii, err := a.agentImageInfo(context.Background(), n)
	if err != nil || !strings.HasSuffix(fmt.Sprint(ii["image_source"]), "/v2/images/"+activeImage+"/file") {
		t.Fatalf("direct without auth: %v %v", ii["image_source"], err)
	}
	// With credentials, the agent would need them: refused.
	a, st = glanceActivities(t, glance.AuthHTTPBasic)
	n = deployingNode(t, st, map[string]any{"image_source": activeImage, "image_download_source": "direct"})
	if _, err := a.agentImageInfo(context.Background(), n); !nonRetryable(err) {
		t.Fatalf("direct with http_basic: %v", err)
	}
	// Plain URLs stay as they are (direct by default).
	n = deployingNode(t, st, map[string]any{"image_source": "http://images/disk.raw"})
	if ii, err := a.agentImageInfo(context.Background(), n); err != nil || ii["image_source"] != "http://images/disk.raw" {
		t.Fatalf("plain URL: %v %v", ii, err)
	}
}

func nonRetryable(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.NonRetryable()
}

func TestPrepareBootRefusesAnUndeployableGlanceImageBeforeTheAgentBoots(t *testing.T) {
	a, st := glanceActivities(t, glance.AuthNone)
	for id, want := range map[string]string{
		deactivatedImage:                       "Image " + deactivatedImage + " is unacceptable: The image is required to be in an active state (it is deactivated)",
		"0b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a13": "Image 0b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a13 could not be found",
	} {
		n := deployingNode(t, st, map[string]any{"image_source": id})
		err := a.PrepareBoot(context.Background(), workflows.BootInput{Node: workflows.NodeInfo{UUID: n.UUID, MACs: []string{"52:54:00:00:00:01"}}, Kind: workflows.BootAgent})
		if !nonRetryable(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a refusal with %q", id, err, want)
		}
		if bc, err := st.GetBootConfig(context.Background(), n.UUID); err == nil && bc != nil {
			t.Errorf("%s: a boot configuration was written for a refused image", id)
		}
	}
}
