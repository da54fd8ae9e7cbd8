package activities_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// TestReadVirtualMediaThroughRedfish: the API 1.93 activity reads the
// virtual CD of ironflow's virtual BMC over Redfish as attach and detach
// leave it; an IPMI node has no virtual media to read.
func TestReadVirtualMediaThroughRedfish(t *testing.T) {
	bmcURL := virtualMediaBMC(t, "52:54:00:dd:93:01")
	iso := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("iso")) }))
	t.Cleanup(iso.Close)

	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{Conductor: "c1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "redfish", ProvisionState: provision.Manageable, DriverInfo: map[string]any{
		"redfish_address": bmcURL, "redfish_system_id": "/redfish/v1/Systems/vm0",
		"redfish_username": "admin", "redfish_password": "password",
	}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	node := workflows.NodeInfo{UUID: n.UUID, Driver: "redfish"}
	cd := func() workflows.VirtualMediaDevice {
		t.Helper()
		devs, err := a.ReadVirtualMedia(ctx, workflows.VirtualMediaInput{Node: node})
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		for _, d := range devs {
			if slices.Contains(d.MediaTypes, "CD") || slices.Contains(d.MediaTypes, "DVD") {
				return d
			}
		}
		t.Fatalf("no CD among %+v", devs)
		return workflows.VirtualMediaDevice{}
	}
	if d := cd(); d.Inserted {
		t.Fatalf("before attach: %+v", d)
	}
	image := iso.URL + "/read.iso"
	if err := a.AttachVirtualMedia(ctx, workflows.VirtualMediaInput{Node: node, DeviceType: "cdrom", ImageURL: image}); err != nil {
		t.Fatalf("attach: %v", err)
	}
	if d := cd(); !d.Inserted || d.Image != image {
		t.Fatalf("after attach: %+v", d)
	}
	if err := a.DetachVirtualMedia(ctx, workflows.VirtualMediaInput{Node: node}); err != nil {
		t.Fatalf("detach: %v", err)
	}
	if d := cd(); d.Inserted {
		t.Fatalf("after detach: %+v", d)
	}

	ipmi := &store.Node{Driver: "ipmi", ProvisionState: provision.Manageable, DriverInfo: map[string]any{
		"ipmi_address": "127.0.0.1", "ipmi_username": "admin", "ipmi_password": "password",
	}}
	if err := st.CreateNode(ctx, ipmi); err != nil {
		t.Fatal(err)
	}
	_, err := a.ReadVirtualMedia(ctx, workflows.VirtualMediaInput{Node: workflows.NodeInfo{UUID: ipmi.UUID, Driver: "ipmi"}})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != workflows.ErrTypeBMCUnsupported {
		t.Fatalf("ipmi read: %v, want %s", err, workflows.ErrTypeBMCUnsupported)
	}
}
