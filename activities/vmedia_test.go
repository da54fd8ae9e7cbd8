package activities_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// TestVirtualMediaThroughRedfish: the API 1.89 activities insert an image
// into the virtual CD of ironflow's virtual BMC over Redfish and eject it;
// the BMC's own view (VirtualMedia/Cd) shows each change. No VM runs: the
// BMC records the media for the machine's next start.
func TestVirtualMediaThroughRedfish(t *testing.T) {
	iso := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("an ISO image, as far as a virtual CD cares"))
	}))
	t.Cleanup(iso.Close)
	bmcURL := virtualMediaBMC(t, "52:54:00:dd:01:01")

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
	cd := func() map[string]any {
		t.Helper()
		req, _ := http.NewRequest("GET", bmcURL+"/redfish/v1/Managers/vm0/VirtualMedia/Cd", nil)
		req.SetBasicAuth("admin", "password")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	node := workflows.NodeInfo{UUID: n.UUID, Driver: "redfish"}
	image := iso.URL + "/boot.iso"
	if err := a.AttachVirtualMedia(ctx, workflows.VirtualMediaInput{Node: node, DeviceType: "cdrom", ImageURL: image}); err != nil {
		t.Fatalf("attach: %v", err)
	}
	if m := cd(); m["Inserted"] != true || m["Image"] != image {
		t.Fatalf("after attach the BMC shows %v %v", m["Inserted"], m["Image"])
	}
	if err := a.DetachVirtualMedia(ctx, workflows.VirtualMediaInput{Node: node}); err != nil {
		t.Fatalf("detach: %v", err)
	}
	if m := cd(); m["Inserted"] != false {
		t.Fatalf("after detach the BMC shows Inserted %v", m["Inserted"])
	}
}
