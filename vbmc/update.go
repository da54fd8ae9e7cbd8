package vbmc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The UpdateService: SimpleUpdate with an image URL and Targets naming one
// VM's firmware inventory member ({vm}-BIOS or {vm}-BMC) or the VM's
// system (then the BIOS) starts a Task that runs update_seconds (config;
// default DefaultUpdateSeconds) and then changes the member's version to
// the image's file name without its extension. The image is not fetched.
// An image whose file name contains "invalid" ends the task in Exception
// with a signature message, as a BMC refusing an unsigned image does. A
// BMC update makes the service answer 503 for bmc_reset_seconds after it
// completes, as a management controller resetting itself does. Versions
// persist in the VM's state directory (firmware.json), so that they
// outlive the vbmc process.
//
// A BIOS image flashed while the VM runs is applied at the host's next
// reset, as a server's BIOS is: its task stays Running at 100% with the
// Base registry's ResetRequired message, the new version waits in
// firmware-pending.json, and the VM's next start or reset (machine.go)
// applies it; the task then completes.

// DefaultUpdateSeconds is how long a SimpleUpdate task runs by default.
const DefaultUpdateSeconds = 3

const (
	updateServicePath = redfishRoot + "/UpdateService"
	inventoryPath     = updateServicePath + "/FirmwareInventory"
	taskServicePath   = redfishRoot + "/TaskService"
	tasksPath         = taskServicePath + "/Tasks"
)

// Default versions of a VM that was never updated.
var defaultFirmware = map[string]string{"BIOS": "ironflow-vbmc-bios-1.0", "BMC": "1.0"}

type updateTask struct {
	id, vm, component, image string
	start, end               time.Time
	state, status            string
	messages                 []string
	// awaitingReset: flashed, applied at the host's next reset.
	awaitingReset bool
	version       string
}

func (m *Machine) pendingFirmwareFile() string { return filepath.Join(m.dir, "firmware-pending.json") }

// pendingFirmware is the version waiting for the host's reset, by
// component.
func (m *Machine) pendingFirmware() map[string]string {
	out := map[string]string{}
	if b, err := os.ReadFile(m.pendingFirmwareFile()); err == nil {
		_ = json.Unmarshal(b, &out)
	}
	return out
}

func (m *Machine) setPendingFirmware(component, version string) error {
	p := m.pendingFirmware()
	p[component] = version
	b, _ := json.Marshal(p)
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(m.pendingFirmwareFile(), b, 0o644)
}

// applyPendingFirmware writes the versions that waited for this reset
// (called by start and ForceRestart with the VM's lock held).
func (m *Machine) applyPendingFirmware() error {
	p := m.pendingFirmware()
	if len(p) == 0 {
		return nil
	}
	for c, v := range p {
		if err := m.setFirmwareVersion(c, v); err != nil {
			return err
		}
		m.log.Info("firmware applied at reset", "component", c, "version", v)
	}
	return os.Remove(m.pendingFirmwareFile())
}

// updates is the UpdateService's state.
type updates struct {
	mu         sync.Mutex
	tasks      map[string]*updateTask
	next       int
	resetUntil time.Time
}

func (s *Server) routeUpdateService(mux *http.ServeMux) {
	s.updates = &updates{tasks: map[string]*updateTask{}}
	mux.HandleFunc("GET "+updateServicePath, s.handleUpdateService)
	mux.HandleFunc("GET "+inventoryPath, s.handleFirmwareInventory)
	mux.HandleFunc("GET "+inventoryPath+"/{member}", s.handleFirmwareMember)
	mux.HandleFunc("POST "+updateServicePath+"/Actions/UpdateService.SimpleUpdate", s.handleSimpleUpdate)
	mux.HandleFunc("GET "+taskServicePath, func(w http.ResponseWriter, r *http.Request) {
		writeJSONResponse(w, http.StatusOK, map[string]any{odataID: taskServicePath, odataType: "#TaskService.v1_2_0.TaskService",
			"Id": "TaskService", "Name": "Tasks", "ServiceEnabled": true, "Tasks": link(tasksPath)})
	})
	mux.HandleFunc("GET "+tasksPath, s.handleTasks)
	mux.HandleFunc("GET "+tasksPath+"/{task}", s.handleTask)
	mux.HandleFunc("GET "+tasksPath+"/{task}/Monitor", s.handleTask)
}

// resetting reports whether the simulated management controller is
// resetting after a BMC update (ServeHTTP answers 503 meanwhile).
func (s *Server) resetting() bool {
	if s.updates == nil {
		return false
	}
	s.updates.mu.Lock()
	defer s.updates.mu.Unlock()
	return time.Now().Before(s.updates.resetUntil)
}

// firmwareVersion is the component's version, tasks whose time has come
// ended first, so that the version changes at the end of the update even
// when nobody watches the task.
func (s *Server) firmwareVersion(m *Machine, component string) string {
	u := s.updates
	u.mu.Lock()
	now := time.Now()
	for _, t := range u.tasks {
		s.advance(t, now)
	}
	u.mu.Unlock()
	return m.FirmwareVersions()[component]
}

func (m *Machine) firmwareFile() string { return filepath.Join(m.dir, "firmware.json") }

// FirmwareVersions are the VM's BIOS and BMC versions.
func (m *Machine) FirmwareVersions() map[string]string {
	out := map[string]string{}
	for k, v := range defaultFirmware {
		out[k] = v
	}
	b, err := os.ReadFile(m.firmwareFile())
	if err == nil {
		var saved map[string]string
		if json.Unmarshal(b, &saved) == nil {
			for k, v := range saved {
				out[k] = v
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		m.log.Warn("cannot read the firmware versions", "error", err)
	}
	return out
}

func (m *Machine) setFirmwareVersion(component, version string) error {
	v := m.FirmwareVersions()
	v[component] = version
	b, _ := json.Marshal(v)
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(m.firmwareFile(), b, 0o644)
}

func (s *Server) updateSeconds() time.Duration {
	secs := s.cfg.UpdateSeconds
	if secs <= 0 {
		secs = DefaultUpdateSeconds
	}
	return time.Duration(secs * float64(time.Second))
}

func (s *Server) handleUpdateService(w http.ResponseWriter, r *http.Request) {
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID: updateServicePath, odataType: "#UpdateService.v1_11_0.UpdateService",
		"Id": "UpdateService", "Name": "Update service", "ServiceEnabled": true, "Status": okStatus(),
		"FirmwareInventory": link(inventoryPath),
		"Actions": map[string]any{"#UpdateService.SimpleUpdate": map[string]any{
			"target": updateServicePath + "/Actions/UpdateService.SimpleUpdate",
		}},
	})
}

func (s *Server) inventoryMembers() []string {
	var out []string
	for _, vm := range s.cfg.VMs {
		for _, c := range []string{"BIOS", "BMC"} {
			out = append(out, inventoryPath+"/"+vm.Name+"-"+c)
		}
	}
	return out
}

func (s *Server) handleFirmwareInventory(w http.ResponseWriter, r *http.Request) {
	writeJSONResponse(w, http.StatusOK, collection(inventoryPath, "#SoftwareInventoryCollection.SoftwareInventoryCollection", "Firmware Collection", s.inventoryMembers()))
}

// inventoryMember splits "{vm}-BIOS".
func (s *Server) inventoryMember(member string) (*Machine, string, bool) {
	i := strings.LastIndex(member, "-")
	if i < 0 {
		return nil, "", false
	}
	m, ok := s.machines[member[:i]]
	c := member[i+1:]
	if !ok || defaultFirmware[c] == "" {
		return nil, "", false
	}
	return m, c, true
}

func (s *Server) handleFirmwareMember(w http.ResponseWriter, r *http.Request) {
	member := r.PathValue("member")
	m, c, ok := s.inventoryMember(member)
	if !ok {
		writeError(w, http.StatusNotFound, "ResourceMissingAtURI", "No such firmware inventory member "+member+".")
		return
	}
	related := redfishRoot + "/Systems/" + m.vm.Name
	if c == "BMC" {
		related = redfishRoot + "/Managers/" + m.vm.Name
	}
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID: inventoryPath + "/" + member, odataType: "#SoftwareInventory.v1_9_0.SoftwareInventory",
		"Id": member, "Name": m.vm.Name + " " + c + " firmware", "Status": okStatus(), "Updateable": true,
		"Version": m.FirmwareVersions()[c], "RelatedItem": []any{link(related)},
	})
}

// updateTarget resolves SimpleUpdate's Targets: a firmware inventory
// member, or a system (its BIOS); with one VM, no Targets means its BIOS.
func (s *Server) updateTarget(targets []string) (*Machine, string, error) {
	if len(targets) == 0 {
		if len(s.cfg.VMs) == 1 {
			return s.machines[s.cfg.VMs[0].Name], "BIOS", nil
		}
		return nil, "", errors.New("Targets is required: this service manages several systems")
	}
	if len(targets) > 1 {
		return nil, "", errors.New("one target per update")
	}
	t := strings.TrimSuffix(targets[0], "/")
	switch {
	case strings.HasPrefix(t, inventoryPath+"/"):
		if m, c, ok := s.inventoryMember(path.Base(t)); ok {
			return m, c, nil
		}
	case strings.HasPrefix(t, redfishRoot+"/Systems/"):
		if m, ok := s.machines[path.Base(t)]; ok {
			return m, "BIOS", nil
		}
	case strings.HasPrefix(t, redfishRoot+"/Managers/"):
		if m, ok := s.machines[path.Base(t)]; ok {
			return m, "BMC", nil
		}
	}
	return nil, "", fmt.Errorf("the target %s is not a firmware inventory member, system or manager of this service", t)
}

func (s *Server) handleSimpleUpdate(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ImageURI         string
		TransferProtocol string
		Targets          []string
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if body.ImageURI == "" {
		writeError(w, http.StatusBadRequest, "ActionParameterMissing", "The action SimpleUpdate requires the parameter ImageURI to be present in the request body.")
		return
	}
	m, comp, err := s.updateTarget(body.Targets)
	if err != nil {
		writeError(w, http.StatusBadRequest, "ActionParameterValueError", err.Error())
		return
	}
	u := s.updates
	u.mu.Lock()
	u.next++
	now := time.Now()
	t := &updateTask{id: strconv.Itoa(u.next), vm: m.vm.Name, component: comp, image: body.ImageURI,
		start: now, end: now.Add(s.updateSeconds()), state: "Running", status: "OK"}
	u.tasks[t.id] = t
	doc := s.taskDoc(t, now)
	u.mu.Unlock()
	s.log.Info("firmware update started", "vm", m.vm.Name, "component", comp, "image", body.ImageURI, "task", t.id)
	w.Header().Set("Location", tasksPath+"/"+t.id+"/Monitor")
	writeJSONResponse(w, http.StatusAccepted, doc)
}

// advance ends the task once its time has come (u.mu held): the new
// version is written, or the image refused.
func (s *Server) advance(t *updateTask, now time.Time) {
	if t.state != "Running" || now.Before(t.end) {
		return
	}
	m := s.machines[t.vm]
	if t.awaitingReset {
		if m.pendingFirmware()[t.component] == t.version {
			return
		}
		t.awaitingReset = false
		t.state = "Completed"
		t.messages = []string{fmt.Sprintf("The %s firmware of %s is now %s.", t.component, t.vm, m.FirmwareVersions()[t.component])}
		s.log.Info("firmware update completed at reset", "vm", t.vm, "component", t.component, "version", t.version)
		return
	}
	name := path.Base(t.image)
	if strings.Contains(name, "invalid") {
		t.state, t.status = "Exception", "Critical"
		t.messages = []string{"The image " + name + " failed signature verification and was not applied."}
		return
	}
	version := strings.TrimSuffix(name, path.Ext(name))
	if t.component == "BIOS" && m.pid() != 0 {
		if err := m.setPendingFirmware(t.component, version); err != nil {
			t.state, t.status = "Exception", "Critical"
			t.messages = []string{"Cannot stage the new firmware: " + err.Error()}
			return
		}
		t.awaitingReset, t.version = true, version
		s.log.Info("firmware flashed, applied at the next reset", "vm", t.vm, "component", t.component, "version", version)
		return
	}
	if err := m.setFirmwareVersion(t.component, version); err != nil {
		t.state, t.status = "Exception", "Critical"
		t.messages = []string{"Cannot record the new firmware: " + err.Error()}
		return
	}
	t.state = "Completed"
	t.messages = []string{fmt.Sprintf("The %s firmware of %s is now %s.", t.component, t.vm, version)}
	s.log.Info("firmware update completed", "vm", t.vm, "component", t.component, "version", version)
	if t.component == "BMC" && s.cfg.BMCResetSeconds > 0 {
		s.updates.resetUntil = now.Add(time.Duration(s.cfg.BMCResetSeconds * float64(time.Second)))
	}
}

func (s *Server) taskDoc(t *updateTask, now time.Time) map[string]any {
	s.advance(t, now)
	pct := 100
	if t.state == "Running" {
		pct = int(100 * now.Sub(t.start) / t.end.Sub(t.start))
	}
	msgs := []any{}
	for _, m := range t.messages {
		msgs = append(msgs, map[string]any{"MessageId": "Update.1.0.UpdateSuccessful", "Message": m, "Severity": map[bool]string{true: "OK", false: "Critical"}[t.status == "OK"]})
	}
	if t.awaitingReset {
		reset := redfishRoot + "/Systems/" + t.vm + "/Actions/ComputerSystem.Reset"
		msgs = append(msgs, map[string]any{"MessageId": "Base.1.16.0.ResetRequired", "Severity": "Warning",
			"Message":     fmt.Sprintf("In order to complete the operation, a component reset is required with the Reset action URI '%s' and ResetType 'ForceRestart'.", reset),
			"MessageArgs": []any{reset, "ForceRestart"}})
	}
	doc := map[string]any{
		odataID: tasksPath + "/" + t.id, odataType: "#Task.v1_7_0.Task", "Id": t.id, "Name": "Firmware update " + t.id,
		"TaskState": t.state, "TaskStatus": t.status, "PercentComplete": pct, "StartTime": t.start.UTC().Format(time.RFC3339),
		"TaskMonitor": tasksPath + "/" + t.id + "/Monitor", "Messages": msgs,
	}
	if t.state != "Running" {
		doc["EndTime"] = t.end.UTC().Format(time.RFC3339)
	}
	return doc
}

func (s *Server) handleTasks(w http.ResponseWriter, r *http.Request) {
	s.updates.mu.Lock()
	var ids []string
	for id := range s.updates.tasks {
		ids = append(ids, tasksPath+"/"+id)
	}
	s.updates.mu.Unlock()
	writeJSONResponse(w, http.StatusOK, collection(tasksPath, "#TaskCollection.TaskCollection", "Task Collection", ids))
}

// handleTask serves a Task and its monitor: the monitor answers 202 while
// the task runs, as the Redfish specification's asynchronous operations
// do, and the Task once it ended.
func (s *Server) handleTask(w http.ResponseWriter, r *http.Request) {
	u := s.updates
	u.mu.Lock()
	t, ok := u.tasks[r.PathValue("task")]
	var doc map[string]any
	if ok {
		doc = s.taskDoc(t, time.Now())
	}
	u.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "ResourceMissingAtURI", "No such task.")
		return
	}
	code := http.StatusOK
	if strings.HasSuffix(r.URL.Path, "/Monitor") && doc["TaskState"] == "Running" {
		code = http.StatusAccepted
	}
	writeJSONResponse(w, code, doc)
}
