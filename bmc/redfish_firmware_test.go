package bmc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// updateBMC adds an UpdateService that runs tasks to a recorded BMC: an
// update starts a Task that completes after polls GETs and then shows the
// new version on the component it targeted.
type updateBMC struct {
	*recordedBMC
	mu sync.Mutex
	// polls a task answers Running before it ends.
	polls int
	// outcome of the task: "" completes, "fail" ends in Exception, "stall"
	// never ends.
	outcome string
	// fail5xx: the task answers 500 this many times after its first poll.
	fail5xx  int
	posted   []map[string]any
	pushed   []string // multipart parts: UpdateParameters and the file's bytes
	taskSeen int
	newVer   string
}

func startUpdateBMC(t *testing.T, dir string, edit func(b *recordedBMC)) *updateBMC {
	u := &updateBMC{recordedBMC: startBMC(t, dir, edit), polls: 2, newVer: "2.0.0-flashed"}
	inner := u.recordedBMC
	u.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u.handle(w, r) {
			return
		}
		inner.ServeHTTP(w, r)
	})
	return u
}

const testTaskURI = "/redfish/v1/TaskService/Tasks/77"

func (u *updateBMC) handle(w http.ResponseWriter, r *http.Request) bool {
	p := strings.TrimSuffix(r.URL.Path, "/")
	u.recordedBMC.mu.Lock()
	us := u.docs["/redfish/v1/UpdateService"]
	u.recordedBMC.mu.Unlock()
	actions, _ := us["Actions"].(map[string]any)
	simple, _ := actions["#UpdateService.SimpleUpdate"].(map[string]any)
	switch {
	case r.Method == http.MethodPost && simple != nil && p == simple["target"]:
		if !u.authorized(r) {
			return false
		}
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		u.mu.Lock()
		u.posted = append(u.posted, body)
		u.mu.Unlock()
		u.startTask(w, body["Targets"])
		return true
	case r.Method == http.MethodPost && p == us["MultipartHttpPushUri"]:
		if !u.authorized(r) {
			return false
		}
		mr, err := r.MultipartReader()
		if err != nil {
			redfishErr(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", err.Error())
			return true
		}
		var targets any
		for {
			part, err := mr.NextPart()
			if err != nil {
				break
			}
			b, _ := io.ReadAll(part)
			u.mu.Lock()
			u.pushed = append(u.pushed, part.FormName()+"="+string(b))
			u.mu.Unlock()
			if part.FormName() == "UpdateParameters" {
				var params map[string]any
				_ = json.Unmarshal(b, &params)
				targets = params["Targets"]
			}
		}
		u.startTask(w, targets)
		return true
	case r.Method == http.MethodGet && p == testTaskURI:
		if !u.authorized(r) {
			return false
		}
		u.pollTask(w)
		return true
	}
	return false
}

func (u *updateBMC) startTask(w http.ResponseWriter, targets any) {
	task := map[string]any{"@odata.id": testTaskURI, "@odata.type": "#Task.v1_7_0.Task", "Id": "77",
		"TaskState": "Running", "TaskStatus": "OK", "PercentComplete": 0, "targets": targets}
	u.recordedBMC.mu.Lock()
	u.docs[testTaskURI] = task
	u.recordedBMC.mu.Unlock()
	w.Header().Set("Location", testTaskURI+"/Monitor")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(task)
}

func (u *updateBMC) pollTask(w http.ResponseWriter) {
	u.mu.Lock()
	u.taskSeen++
	seen := u.taskSeen
	if seen > 1 && u.fail5xx > 0 {
		u.fail5xx--
		u.mu.Unlock()
		redfishErr(w, http.StatusInternalServerError, "Base.1.8.InternalError", "The request failed due to an internal service error.")
		return
	}
	u.mu.Unlock()
	u.recordedBMC.mu.Lock()
	task := u.docs[testTaskURI]
	if seen > u.polls && u.outcome != "stall" {
		if u.outcome == "fail" {
			task["TaskState"], task["TaskStatus"] = "Exception", "Critical"
			task["Messages"] = []any{map[string]any{"MessageId": "Update.1.0.ApplyFailed", "Message": "The installation of the image failed: signature verification failed."}}
		} else {
			task["TaskState"], task["PercentComplete"] = "Completed", 100
			u.flash(task["targets"])
		}
	} else {
		task["PercentComplete"] = 100 * seen / (u.polls + 1)
	}
	u.recordedBMC.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(task)
}

// flash changes the version the targets name (the recordedBMC's lock held).
func (u *updateBMC) flash(targets any) {
	list, _ := targets.([]any)
	for _, t := range list {
		s, _ := t.(string)
		switch {
		case strings.HasSuffix(s, "/BIOS"):
			for k, d := range u.docs {
				if strings.HasPrefix(k, "/redfish/v1/Systems/") && d["BiosVersion"] != nil {
					d["BiosVersion"] = u.newVer
				}
			}
		case strings.HasSuffix(s, "/BMC"):
			for k, d := range u.docs {
				if strings.HasPrefix(k, "/redfish/v1/Managers/") && d["FirmwareVersion"] != nil {
					d["FirmwareVersion"] = u.newVer
				}
			}
		}
		if d, ok := u.docs[s]; ok {
			d["Version"] = u.newVer
		}
	}
}

func newFirmwareDriver(t *testing.T, b *recordedBMC) Firmware {
	t.Helper()
	d, err := New("redfish", b.info(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	fw, ok := d.(Firmware)
	if !ok {
		t.Fatal("the redfish driver does not implement Firmware")
	}
	return fw
}

// waitTask polls the task to its end, as the workflow does.
func waitTask(t *testing.T, fw Firmware, task FirmwareTask, max int) (FirmwareTaskStatus, []error) {
	t.Helper()
	var errs []error
	for i := 0; i < max; i++ {
		st, err := fw.FirmwareTaskStatus(context.Background(), task.URI)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st.Done {
			return st, errs
		}
	}
	return FirmwareTaskStatus{State: "never ended"}, errs
}

func versions(t *testing.T, fw Firmware) map[string]string {
	t.Helper()
	comps, err := fw.FirmwareComponents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range comps {
		out[c.Component] = c.Version
	}
	return out
}

// TestFirmwareInventoryOfRecordedLayouts: the versions Ironic caches (the
// system's BiosVersion, the manager's FirmwareVersion, the adapters'
// FirmwarePackageVersion) read from the DMTF and HPE recordings.
func TestFirmwareInventoryOfRecordedLayouts(t *testing.T) {
	for _, c := range []struct {
		dir  string
		edit func(b *recordedBMC)
		want map[string]string
	}{
		{"dmtf-public-rackmount1", func(b *recordedBMC) {
			// DMTF's chassis has no adapters: one as its NetworkAdapter mockup shows it.
			b.docs["/redfish/v1/Chassis/1U"]["NetworkAdapters"] = map[string]any{"@odata.id": "/redfish/v1/Chassis/1U/NetworkAdapters"}
			b.docs["/redfish/v1/Chassis/1U/NetworkAdapters"] = map[string]any{"Members": []any{map[string]any{"@odata.id": "/redfish/v1/Chassis/1U/NetworkAdapters/9fa725a1"}}}
			b.docs["/redfish/v1/Chassis/1U/NetworkAdapters/9fa725a1"] = map[string]any{"Id": "9fa725a1", "Manufacturer": "Contoso",
				"Model": "Contoso 2-port 10G", "SerialNumber": "29E00111", "Controllers": []any{map[string]any{"FirmwarePackageVersion": "7.4.10"}}}
		}, map[string]string{"bios": "P79 v1.45 (12/06/2017)", "bmc": "1.45.455b66-rev4", "nic:9fa725a1": "7.4.10"}},
		{"hpe-ilo-dl325", nil, map[string]string{"bios": "A43 v2.52 (10/29/2021)", "bmc": "iLO 5 v2.46"}},
	} {
		t.Run(c.dir, func(t *testing.T) {
			b := startBMC(t, c.dir, c.edit)
			got := versions(t, newFirmwareDriver(t, b))
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("components = %v, want %v", got, c.want)
			}
		})
	}
}

// TestFirmwareIdentityOfRecordedLayouts: what identifies each component's
// hardware (Ironic's API 1.114): the manager's Model for the BMC, an
// adapter's Manufacturer, Model and SerialNumber for its NIC, nothing for
// the BIOS.
func TestFirmwareIdentityOfRecordedLayouts(t *testing.T) {
	for _, c := range []struct {
		dir  string
		edit func(b *recordedBMC)
		want map[string]FirmwareComponent
	}{
		{"dmtf-public-rackmount1", func(b *recordedBMC) {
			b.docs["/redfish/v1/Chassis/1U"]["NetworkAdapters"] = map[string]any{"@odata.id": "/redfish/v1/Chassis/1U/NetworkAdapters"}
			b.docs["/redfish/v1/Chassis/1U/NetworkAdapters"] = map[string]any{"Members": []any{map[string]any{"@odata.id": "/redfish/v1/Chassis/1U/NetworkAdapters/9fa725a1"}}}
			b.docs["/redfish/v1/Chassis/1U/NetworkAdapters/9fa725a1"] = map[string]any{"Id": "9fa725a1", "Manufacturer": "Contoso",
				"Model": "Contoso 2-port 10G", "SerialNumber": "29E00111", "Controllers": []any{map[string]any{"FirmwarePackageVersion": "7.4.10"}}}
		}, map[string]FirmwareComponent{
			"bios":         {Component: "bios", Version: "P79 v1.45 (12/06/2017)"},
			"bmc":          {Component: "bmc", Version: "1.45.455b66-rev4", Model: "Joo Janta 200"},
			"nic:9fa725a1": {Component: "nic:9fa725a1", Version: "7.4.10", Vendor: "Contoso", Model: "Contoso 2-port 10G", SerialNumber: "29E00111"},
		}},
		{"hpe-ilo-dl325", nil, map[string]FirmwareComponent{
			"bios": {Component: "bios", Version: "A43 v2.52 (10/29/2021)"},
			"bmc":  {Component: "bmc", Version: "iLO 5 v2.46", Model: "iLO 5"},
		}},
	} {
		t.Run(c.dir, func(t *testing.T) {
			b := startBMC(t, c.dir, c.edit)
			comps, err := newFirmwareDriver(t, b).FirmwareComponents(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]FirmwareComponent{}
			for _, fc := range comps {
				got[fc.Component] = fc
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("components = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestSimpleUpdateRunsATaskToTheNewVersion: DMTF's UpdateService gets
// SimpleUpdate with the image and the inventory's BIOS as target; the task
// is followed to Completed and the BIOS version read back has changed.
func TestSimpleUpdateRunsATaskToTheNewVersion(t *testing.T) {
	b := startUpdateBMC(t, "dmtf-public-rackmount1", nil)
	fw := newFirmwareDriver(t, b.recordedBMC)
	task, err := fw.StartFirmwareUpdate(context.Background(), FirmwareUpdate{Component: "bios", URL: "http://images.example/bios-2.0.bin"})
	if err != nil {
		t.Fatal(err)
	}
	if task.URI != testTaskURI || task.Done {
		t.Fatalf("task = %+v, want the Task document's URI %s", task, testTaskURI)
	}
	want := map[string]any{"ImageURI": "http://images.example/bios-2.0.bin", "Targets": []any{"/redfish/v1/UpdateService/FirmwareInventory/BIOS"}}
	if len(b.posted) != 1 || fmt.Sprint(b.posted[0]) != fmt.Sprint(want) {
		t.Fatalf("SimpleUpdate bodies = %v, want one %v", b.posted, want)
	}
	st, errs := waitTask(t, fw, task, 10)
	if !st.Done || st.Failed || st.State != "Completed" || len(errs) > 0 {
		t.Fatalf("task ended %+v (errors %v), want Completed", st, errs)
	}
	if v := versions(t, fw)["bios"]; v != b.newVer {
		t.Fatalf("bios version after the update = %q, want %q", v, b.newVer)
	}
}

// TestFailedTaskReportsItsMessages: a task in Exception ends failed with
// the BMC's message.
func TestFailedTaskReportsItsMessages(t *testing.T) {
	b := startUpdateBMC(t, "dmtf-public-rackmount1", nil)
	b.outcome = "fail"
	fw := newFirmwareDriver(t, b.recordedBMC)
	task, err := fw.StartFirmwareUpdate(context.Background(), FirmwareUpdate{Component: "bmc", URL: "http://images.example/bmc.bin"})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := waitTask(t, fw, task, 10)
	if !st.Done || !st.Failed || st.State != "Exception" {
		t.Fatalf("task ended %+v, want a failed Exception", st)
	}
	if !slices.Contains(st.Messages, "The installation of the image failed: signature verification failed.") {
		t.Fatalf("messages = %q, want the BMC's", st.Messages)
	}
	if v := versions(t, fw)["bmc"]; v == b.newVer {
		t.Fatalf("bmc version changed to %q by a failed update", v)
	}
}

// TestStalledTaskNeverEnds: a task that stays Running is reported running
// at every poll (the workflow's timeout ends it), never done.
func TestStalledTaskNeverEnds(t *testing.T) {
	b := startUpdateBMC(t, "dmtf-public-rackmount1", nil)
	b.outcome = "stall"
	fw := newFirmwareDriver(t, b.recordedBMC)
	task, err := fw.StartFirmwareUpdate(context.Background(), FirmwareUpdate{Component: "bios", URL: "http://images.example/b.bin"})
	if err != nil {
		t.Fatal(err)
	}
	st, errs := waitTask(t, fw, task, 8)
	if st.Done || len(errs) > 0 {
		t.Fatalf("stalled task = %+v (errors %v), want never done", st, errs)
	}
}

// TestServerErrorsMidUpdateAreTransient: 500s while the task runs (a BMC
// busy flashing) are busy errors the caller may retry, and the task is
// still followed to its end.
func TestServerErrorsMidUpdateAreTransient(t *testing.T) {
	b := startUpdateBMC(t, "dmtf-public-rackmount1", nil)
	b.fail5xx = 4 // more than the driver's own 3 attempts
	fw := newFirmwareDriver(t, b.recordedBMC)
	task, err := fw.StartFirmwareUpdate(context.Background(), FirmwareUpdate{Component: "bios", URL: "http://images.example/b.bin"})
	if err != nil {
		t.Fatal(err)
	}
	st, errs := waitTask(t, fw, task, 10)
	if len(errs) == 0 {
		t.Fatal("no error surfaced for 4 answers of 500 in a row")
	}
	for _, e := range errs {
		if !Retryable(e) {
			t.Fatalf("error %v is not retryable", e)
		}
	}
	if !st.Done || st.Failed {
		t.Fatalf("task ended %+v, want Completed after the 500s", st)
	}
}

// TestMultipartPushWhereNoSimpleUpdate: a service that offers only
// MultipartHttpPushUri (as newer iLO firmware does) gets the image
// downloaded and pushed with UpdateParameters naming the target.
func TestMultipartPushWhereNoSimpleUpdate(t *testing.T) {
	image := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ILO-FIRMWARE-IMAGE"))
	}))
	t.Cleanup(image.Close)
	b := startUpdateBMC(t, "hpe-ilo-dl325", func(b *recordedBMC) {
		b.docs["/redfish/v1/UpdateService"] = map[string]any{
			"@odata.id": "/redfish/v1/UpdateService", "ServiceEnabled": true,
			"MultipartHttpPushUri": "/redfish/v1/UpdateService/upload",
			"FirmwareInventory":    map[string]any{"@odata.id": "/redfish/v1/UpdateService/FirmwareInventory"},
		}
		b.docs["/redfish/v1/UpdateService/FirmwareInventory"] = map[string]any{"Members": []any{
			map[string]any{"@odata.id": "/redfish/v1/UpdateService/FirmwareInventory/1"}}}
		b.docs["/redfish/v1/UpdateService/FirmwareInventory/1"] = map[string]any{"Id": "1", "Name": "iLO 5", "Version": "2.46"}
	})
	fw := newFirmwareDriver(t, b.recordedBMC)
	task, err := fw.StartFirmwareUpdate(context.Background(), FirmwareUpdate{Component: "bmc", URL: image.URL + "/ilo5_250.bin"})
	if err != nil {
		t.Fatal(err)
	}
	if task.URI != testTaskURI {
		t.Fatalf("task = %+v", task)
	}
	if len(b.pushed) != 2 || !strings.HasPrefix(b.pushed[0], "UpdateParameters=") || b.pushed[1] != "UpdateFile=ILO-FIRMWARE-IMAGE" {
		t.Fatalf("pushed parts = %q", b.pushed)
	}
	if st, _ := waitTask(t, fw, task, 10); !st.Done || st.Failed {
		t.Fatalf("task ended %+v", st)
	}
}

// TestNoUpdateServiceIsUnsupported: a service without the actions refuses
// clearly, not retryably.
func TestNoUpdateServiceIsUnsupported(t *testing.T) {
	b := startBMC(t, "dmtf-public-rackmount1", func(b *recordedBMC) {
		b.docs["/redfish/v1/UpdateService"] = map[string]any{"@odata.id": "/redfish/v1/UpdateService"}
	})
	_, err := newFirmwareDriver(t, b).StartFirmwareUpdate(context.Background(), FirmwareUpdate{Component: "bios", URL: "http://x/y"})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "neither SimpleUpdate nor MultipartHttpPushUri") {
		t.Fatalf("err = %v, want ErrUnsupported naming the missing actions", err)
	}
}

// Only the registries' reset messages say that the update waits for the
// host's reset.
func TestResetMessage(t *testing.T) {
	for id, want := range map[string]bool{
		"Base.1.16.0.ResetRequired": true, "Update.1.1.0.AwaitToActivate": true,
		"Update.1.0.UpdateSuccessful": false, "Base.1.8.Success": false, "ResetRequired": false, "": false,
		"Oem.1.0.ResetRequired": false,
	} {
		if got := resetMessage(id); got != want {
			t.Errorf("resetMessage(%q) = %v, want %v", id, got, want)
		}
	}
}
