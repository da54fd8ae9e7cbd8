package bmc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"path"
	"strings"

	"github.com/stmcginnis/gofish/common"
)

// Firmware components as Ironic names them (ironic/drivers/modules/redfish/
// utils.py): the system's BIOS, the manager's firmware and the network
// adapters' controllers, "nic:" followed by the adapter's Id.
const (
	ComponentBIOS      = "bios"
	ComponentBMC       = "bmc"
	ComponentNICPrefix = "nic:"
)

var _ Firmware = (*redfishDriver)(nil)

// FirmwareComponents reads BiosVersion from the system, FirmwareVersion
// (and Model) from its manager and FirmwarePackageVersion (with
// Manufacturer, Model and SerialNumber) of the network adapters of its
// chassis, as Ironic's redfish firmware interface caches them.
func (d *redfishDriver) FirmwareComponents(ctx context.Context) ([]FirmwareComponent, error) {
	c, err := d.call(ctx)
	if err != nil {
		return nil, err
	}
	uri, err := d.resolveSystem(c)
	if err != nil {
		return nil, err
	}
	var sys struct {
		BiosVersion string
		Links       struct {
			ManagedBy common.Links
			Chassis   common.Links
		}
	}
	if err := getJSON(c, uri, &sys); err != nil {
		return nil, fmt.Errorf("read system %s: %w", uri, err)
	}
	var out []FirmwareComponent
	if sys.BiosVersion != "" {
		out = append(out, FirmwareComponent{Component: ComponentBIOS, Version: sys.BiosVersion})
	}
	managers := sys.Links.ManagedBy
	if len(managers) == 0 {
		var root struct{ Managers common.Link }
		if err := getJSON(c, "/redfish/v1/", &root); err == nil && root.Managers != "" {
			if m, err := collectionMembers(c, root.Managers.String()); err == nil && len(m) > 0 {
				managers = common.Links{common.Link(m[0])}
			}
		}
	}
	if len(managers) > 0 {
		var mgr struct{ FirmwareVersion, Model string }
		if err := getJSON(c, managers[0].String(), &mgr); err != nil {
			return nil, fmt.Errorf("read manager %s: %w", managers[0], err)
		}
		if mgr.FirmwareVersion != "" {
			// Only the manager's model identifies it (Ironic's API 1.114).
			out = append(out, FirmwareComponent{Component: ComponentBMC, Version: mgr.FirmwareVersion, Model: mgr.Model})
		}
	}
	if len(sys.Links.Chassis) > 0 {
		nics, err := d.nicFirmware(c, sys.Links.Chassis[0].String())
		if err != nil {
			return nil, err
		}
		out = append(out, nics...)
	}
	return out, nil
}

// nicFirmware reads the chassis' NetworkAdapters; a chassis without the
// link has none to report.
func (d *redfishDriver) nicFirmware(c *rfCall, chassisURI string) ([]FirmwareComponent, error) {
	var ch struct{ NetworkAdapters common.Link }
	if err := getJSON(c, chassisURI, &ch); err != nil {
		return nil, fmt.Errorf("read chassis %s: %w", chassisURI, err)
	}
	if ch.NetworkAdapters == "" {
		return nil, nil
	}
	members, err := collectionMembers(c, ch.NetworkAdapters.String())
	if err != nil {
		return nil, fmt.Errorf("list network adapters of %s: %w", chassisURI, err)
	}
	var out []FirmwareComponent
	for _, m := range members {
		var na struct {
			ID                                string `json:"Id"`
			Manufacturer, Model, SerialNumber string
			Controllers                       []struct{ FirmwarePackageVersion string }
		}
		if err := getJSON(c, m, &na); err != nil {
			return nil, fmt.Errorf("read network adapter %s: %w", m, err)
		}
		for _, ctl := range na.Controllers {
			if ctl.FirmwarePackageVersion != "" {
				out = append(out, FirmwareComponent{Component: ComponentNICPrefix + na.ID, Version: ctl.FirmwarePackageVersion,
					Vendor: na.Manufacturer, Model: na.Model, SerialNumber: na.SerialNumber})
			}
		}
	}
	return out, nil
}

// rfUpdateService is the part of UpdateService an update needs.
type rfUpdateService struct {
	ServiceEnabled       *bool
	MultipartHTTPPushURI string      `json:"MultipartHttpPushUri"`
	FirmwareInventory    common.Link `json:"FirmwareInventory"`
	Actions              struct {
		SimpleUpdate struct {
			Target string `json:"target"`
		} `json:"#UpdateService.SimpleUpdate"`
	}
}

func (d *redfishDriver) updateService(c *rfCall) (*rfUpdateService, error) {
	var root struct{ UpdateService common.Link }
	if err := getJSON(c, "/redfish/v1/", &root); err != nil {
		return nil, fmt.Errorf("read service root: %w", err)
	}
	if root.UpdateService == "" {
		return nil, fmt.Errorf("%w: the Redfish service has no UpdateService", ErrUnsupported)
	}
	us := &rfUpdateService{}
	if err := getJSON(c, root.UpdateService.String(), us); err != nil {
		return nil, fmt.Errorf("read update service: %w", err)
	}
	if us.ServiceEnabled != nil && !*us.ServiceEnabled {
		return nil, fmt.Errorf("%w: the BMC's UpdateService is disabled (ServiceEnabled false)", ErrUnsupported)
	}
	return us, nil
}

// updateTargets are the URIs SimpleUpdate's Targets names: the firmware
// inventory's member for the component when the inventory has one (Id
// BIOS or BMC, or the adapter's Id; on a service of several systems, as
// ironflow's vbmc, "<system Id>-BIOS"), and, as Ironic does for services
// with several systems, the node's system otherwise.
func (d *redfishDriver) updateTargets(c *rfCall, us *rfUpdateService, component string) []string {
	want := strings.TrimPrefix(component, ComponentNICPrefix)
	sysID := ""
	if uri, err := d.resolveSystem(c); err == nil {
		sysID = path.Base(strings.TrimSuffix(uri, "/"))
	}
	if us.FirmwareInventory != "" {
		if members, err := collectionMembers(c, us.FirmwareInventory.String()); err == nil {
			for _, m := range members {
				id := path.Base(strings.TrimSuffix(m, "/"))
				if strings.EqualFold(id, want) || sysID != "" && strings.EqualFold(id, sysID+"-"+want) {
					return []string{m}
				}
			}
		}
	}
	var root struct{ Systems common.Link }
	if err := getJSON(c, "/redfish/v1/", &root); err != nil || root.Systems == "" {
		return nil
	}
	if members, err := collectionMembers(c, root.Systems.String()); err == nil && len(members) > 1 {
		if uri, err := d.resolveSystem(c); err == nil {
			return []string{uri}
		}
	}
	return nil
}

// StartFirmwareUpdate posts UpdateService.SimpleUpdate with the image's
// URL; a service that offers only a multipart push (MultipartHttpPushUri)
// gets the image downloaded and pushed instead (Redfish specification,
// "Software update").
func (d *redfishDriver) StartFirmwareUpdate(ctx context.Context, u FirmwareUpdate) (FirmwareTask, error) {
	c, err := d.call(ctx)
	if err != nil {
		return FirmwareTask{}, err
	}
	us, err := d.updateService(c)
	if err != nil {
		return FirmwareTask{}, err
	}
	targets := d.updateTargets(c, us, u.Component)
	switch {
	case us.Actions.SimpleUpdate.Target != "":
		body := map[string]any{"ImageURI": u.URL}
		if len(targets) > 0 {
			body["Targets"] = targets
		}
		resp, err := c.Post(us.Actions.SimpleUpdate.Target, body)
		if err != nil {
			return FirmwareTask{}, fmt.Errorf("SimpleUpdate of %s with %s: %w", u.Component, u.URL, err)
		}
		return taskFromResponse(resp), nil
	case us.MultipartHTTPPushURI != "":
		return d.multipartPush(c, us.MultipartHTTPPushURI, u, targets)
	}
	return FirmwareTask{}, fmt.Errorf("%w: the BMC's UpdateService offers neither SimpleUpdate nor MultipartHttpPushUri", ErrUnsupported)
}

// taskFromResponse finds the task an action started: the Task document's
// @odata.id in the body, else the task monitor in Location; neither means
// the BMC finished before answering.
func taskFromResponse(resp *http.Response) FirmwareTask {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var t struct {
		ID        string `json:"@odata.id"`
		TaskState string
	}
	if json.Unmarshal(b, &t) == nil && t.ID != "" && t.TaskState != "" {
		return FirmwareTask{URI: t.ID}
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		return FirmwareTask{URI: loc}
	}
	return FirmwareTask{Done: true}
}

// maxFirmwareImage bounds what a multipart push downloads into memory.
const maxFirmwareImage = 512 << 20

func (d *redfishDriver) multipartPush(c *rfCall, pushURI string, u FirmwareUpdate, targets []string) (FirmwareTask, error) {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, u.URL, nil)
	if err != nil {
		return FirmwareTask{}, fmt.Errorf("%w: firmware image URL %q: %v", ErrInvalidConfig, u.URL, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return FirmwareTask{}, fmt.Errorf("%w: download firmware image %s: %v", ErrUnreachable, u.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return FirmwareTask{}, fmt.Errorf("%w: download firmware image %s: HTTP %d", ErrUnsupported, u.URL, resp.StatusCode)
	}
	image, err := io.ReadAll(io.LimitReader(resp.Body, maxFirmwareImage+1))
	if err != nil {
		return FirmwareTask{}, fmt.Errorf("%w: download firmware image %s: %v", ErrUnreachable, u.URL, err)
	}
	if len(image) > maxFirmwareImage {
		return FirmwareTask{}, fmt.Errorf("%w: firmware image %s is larger than %d bytes", ErrUnsupported, u.URL, maxFirmwareImage)
	}
	params := map[string]any{"@Redfish.OperationApplyTime": "Immediate"}
	if len(targets) > 0 {
		params["Targets"] = targets
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	ph := textproto.MIMEHeader{}
	ph.Set("Content-Disposition", `form-data; name="UpdateParameters"`)
	ph.Set("Content-Type", "application/json")
	pw, _ := mw.CreatePart(ph)
	_ = json.NewEncoder(pw).Encode(params)
	fw, _ := mw.CreateFormFile("UpdateFile", path.Base(req.URL.Path))
	_, _ = fw.Write(image)
	_ = mw.Close()

	auth, _, err := c.conn.auth(c.ctx, c.timeout)
	if err != nil {
		return FirmwareTask{}, err
	}
	target := pushURI
	if !strings.HasPrefix(target, "http://") && !strings.HasPrefix(target, "https://") {
		target = c.conn.endpoint + pushURI
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	preq, err := http.NewRequestWithContext(ctx, http.MethodPost, target, &body)
	if err != nil {
		return FirmwareTask{}, err
	}
	preq.Header.Set("Content-Type", mw.FormDataContentType())
	preq.Header.Set("Accept", "application/json")
	for k, v := range auth {
		preq.Header[k] = v
	}
	presp, err := c.conn.http.Do(preq)
	if err != nil {
		return FirmwareTask{}, netError(c.ctx, "POST "+pushURI, err)
	}
	payload, _ := io.ReadAll(io.LimitReader(presp.Body, maxRedfishBody))
	presp.Body.Close()
	if presp.StatusCode >= 300 {
		return FirmwareTask{}, httpError("multipart push of "+u.Component, http.MethodPost, pushURI, presp.StatusCode, payload)
	}
	presp.Body = io.NopCloser(bytes.NewReader(payload))
	return taskFromResponse(presp), nil
}

// FirmwareTaskStatus reads a Task (or its task monitor): a monitor that
// answers 202 without a Task is still running, one that answers with no
// Task at all has finished (Redfish specification, "Asynchronous
// operations").
func (d *redfishDriver) FirmwareTaskStatus(ctx context.Context, taskURI string) (FirmwareTaskStatus, error) {
	c, err := d.call(ctx)
	if err != nil {
		return FirmwareTaskStatus{}, err
	}
	resp, err := c.Get(taskURI)
	if err != nil {
		return FirmwareTaskStatus{}, fmt.Errorf("read task %s: %w", taskURI, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var t struct {
		TaskState       string
		TaskStatus      string
		PercentComplete *int
		Messages        []struct {
			MessageID string `json:"MessageId"`
			Message   string
			Severity  string
		}
	}
	_ = json.Unmarshal(b, &t)
	st := FirmwareTaskStatus{State: t.TaskState}
	if t.PercentComplete != nil {
		st.Percent = *t.PercentComplete
	}
	for _, m := range t.Messages {
		msg := m.Message
		if msg == "" {
			msg = m.MessageID
		}
		if msg != "" {
			st.Messages = append(st.Messages, msg)
		}
		st.ResetRequired = st.ResetRequired || resetMessage(m.MessageID)
	}
	if st.State == "" {
		if resp.StatusCode == http.StatusAccepted {
			st.State = "Running"
			return st, nil
		}
		st.State, st.Done = "Completed", true
		return st, nil
	}
	switch st.State {
	case "Completed":
		st.Done = true
		st.Failed = t.TaskStatus == "Critical"
	case "Exception", "Killed", "Cancelled":
		st.Done, st.Failed = true, true
	}
	return st, nil
}

// resetMessage tells a message that the update waits for the host's
// reset: Base.x.y.z.ResetRequired or Update.x.y.z.AwaitToActivate (DMTF's
// Base and Update message registries).
func resetMessage(id string) bool {
	parts := strings.Split(id, ".")
	if len(parts) < 2 {
		return false
	}
	reg, key := parts[0], parts[len(parts)-1]
	return reg == "Base" && key == "ResetRequired" || reg == "Update" && key == "AwaitToActivate"
}
