package bmc

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
)

const (
	testStorage = "/redfish/v1/Systems/437XR1138R2/Storage/1"
	testVolumes = testStorage + "/Volumes"
)

// startRAIDBMC is DMTF's system with a Storage controller of four drives,
// shaped as DMTF's Storage mockup, and a Volumes collection that POST and
// DELETE change.
func startRAIDBMC(t *testing.T) *recordedBMC {
	b := startBMC(t, "dmtf-public-rackmount1", func(b *recordedBMC) {
		b.docs["/redfish/v1/Systems/437XR1138R2"]["Storage"] = map[string]any{"@odata.id": "/redfish/v1/Systems/437XR1138R2/Storage"}
		b.docs["/redfish/v1/Systems/437XR1138R2/Storage"] = map[string]any{"Members": []any{map[string]any{"@odata.id": testStorage}}}
		var drives []any
		for _, id := range []string{"35D38F11ACEF7BD3", "3F5A8C54207B7233", "32ADF365C6C1B7BD", "3D58ECBC375FD9F2"} {
			drives = append(drives, map[string]any{"@odata.id": "/redfish/v1/Chassis/1U/Drives/" + id})
		}
		b.docs[testStorage] = map[string]any{"Id": "1", "Drives": drives, "Volumes": map[string]any{"@odata.id": testVolumes}}
		b.docs[testVolumes] = map[string]any{"Members": []any{}}
	})
	inner := b.srv.Config.Handler
	n := 0
	b.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimSuffix(r.URL.Path, "/")
		switch {
		case r.Method == http.MethodPost && p == testVolumes && b.authorized(r):
			var body map[string]any
			_ = json.NewDecoder(r.Body).Decode(&body)
			n++
			uri := testVolumes + "/" + string(rune('0'+n))
			body["@odata.id"] = uri
			if body["Name"] == nil {
				body["Name"] = "Volume " + string(rune('0'+n))
			}
			body["Identifiers"] = []any{map[string]any{"DurableNameFormat": "NAA", "DurableName": "600508B1001C321CCA06EB7CD84793" + string(rune('0'+n)) + "D"}}
			b.mu.Lock()
			b.docs[uri] = body
			col := b.docs[testVolumes]
			col["Members"] = append(col["Members"].([]any), map[string]any{"@odata.id": uri})
			b.actions = append(b.actions, "create "+body["RAIDType"].(string))
			b.mu.Unlock()
			w.Header().Set("Location", uri)
			w.WriteHeader(http.StatusCreated)
		case r.Method == http.MethodDelete && strings.HasPrefix(p, testVolumes+"/") && b.authorized(r):
			b.mu.Lock()
			delete(b.docs, p)
			col := b.docs[testVolumes]
			var keep []any
			for _, m := range col["Members"].([]any) {
				if m.(map[string]any)["@odata.id"] != p {
					keep = append(keep, m)
				}
			}
			col["Members"] = append([]any{}, keep...)
			b.actions = append(b.actions, "delete "+p)
			b.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		default:
			inner.ServeHTTP(w, r)
		}
	})
	return b
}

func raidDriver(t *testing.T, b *recordedBMC) RAID {
	d, err := New("redfish", b.info(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d.(RAID)
}

// A RAID-1 volume takes the two first free drives and its size; a second
// one the next free ones; delete removes them; a level the free drives
// cannot hold is refused naming why.
func TestRedfishVolumesCreateAndDelete(t *testing.T) {
	b := startRAIDBMC(t)
	r := raidDriver(t, b)
	ctx := context.Background()
	v, err := r.CreateVolume(ctx, VolumeSpec{Name: "root", RAIDLevel: "1", SizeGB: 100})
	if err != nil {
		t.Fatal(err)
	}
	if v.RAIDType != "RAID1" || v.CapacityBytes != 100<<30 || strings.Join(v.Drives, ",") != "35D38F11ACEF7BD3,3F5A8C54207B7233" || v.Controller != "1" || v.Name != "root" {
		t.Fatalf("volume %+v", v)
	}
	if v.RootDeviceHint["wwn"] != "0x600508b1001c321cca06eb7cd847931d" {
		t.Fatalf("root device hint of the NAA volume: %v", v.RootDeviceHint)
	}
	doc := b.doc(v.URI)
	if doc["RAIDType"] != "RAID1" || doc["CapacityBytes"] != float64(100<<30) || len(doc["Links"].(map[string]any)["Drives"].([]any)) != 2 {
		t.Fatalf("POSTed volume %v", doc)
	}
	v2, err := r.CreateVolume(ctx, VolumeSpec{RAIDLevel: "0"})
	if err != nil || strings.Join(v2.Drives, ",") != "32ADF365C6C1B7BD" {
		t.Fatalf("second volume %+v %v", v2, err)
	}
	if _, ok := b.doc(v2.URI)["CapacityBytes"]; ok {
		t.Fatal("a MAX volume was given a capacity")
	}
	if _, err := r.CreateVolume(ctx, VolumeSpec{RAIDLevel: "5"}); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "1 has 1 free drives, RAID 5 needs 3") {
		t.Fatalf("RAID 5 on one free drive: %v", err)
	}
	vols, err := r.Volumes(ctx)
	if err != nil || len(vols) != 2 || vols[1].RootDeviceHint["wwn"] != "0x600508b1001c321cca06eb7cd847932d" {
		t.Fatalf("volumes %+v %v", vols, err)
	}
	for _, v := range vols {
		if err := r.DeleteVolume(ctx, v.URI); err != nil {
			t.Fatal(err)
		}
	}
	if vols, _ := r.Volumes(ctx); len(vols) != 0 {
		t.Fatalf("after delete: %+v", vols)
	}
}

// HPE's recording has an empty Storage collection (its controllers are
// under SmartStorage): no volumes, and creation refused clearly.
func TestRedfishVolumesOnHPEStorage(t *testing.T) {
	b := startBMC(t, "hpe-ilo-dl325", nil)
	r := raidDriver(t, b)
	vols, err := r.Volumes(context.Background())
	if err != nil || len(vols) != 0 {
		t.Fatalf("volumes %+v %v", vols, err)
	}
	if _, err := r.CreateVolume(context.Background(), VolumeSpec{RAIDLevel: "1"}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("create on no controller: %v", err)
	}
}

// Only world wide names make a hint; a UUID or a malformed name does not.
func TestVolumeHint(t *testing.T) {
	for _, c := range []struct {
		ids  []rfIdentifier
		want string
	}{
		{[]rfIdentifier{{DurableNameFormat: "UUID", DurableName: "3f2d..."}, {DurableNameFormat: "EUI", DurableName: "00:25:38:B5:81:A0:1F:2E"}}, "0x002538b581a01f2e"},
		{[]rfIdentifier{{DurableNameFormat: "NAA", DurableName: "0x5000C500A1B2C3D4"}}, "0x5000c500a1b2c3d4"},
		{[]rfIdentifier{{DurableNameFormat: "NAA", DurableName: "not-hex"}}, ""},
		{[]rfIdentifier{{DurableNameFormat: "UUID", DurableName: "0e3a9f3c-4a4f-4b5e-9c1e-2f8b7a6d5c4b"}}, ""},
		{nil, ""},
	} {
		got, _ := volumeHint(c.ids)["wwn"].(string)
		if got != c.want {
			t.Errorf("%+v: hint %q, want %q", c.ids, got, c.want)
		}
	}
}
