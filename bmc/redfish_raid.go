package bmc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/stmcginnis/gofish/common"
)

// RAID is a driver that creates and deletes logical disks through the BMC
// (Redfish Storage Volumes). Callers assert it on a Driver.
type RAID interface {
	// Volumes lists the volumes of every storage controller.
	Volumes(ctx context.Context) ([]Volume, error)
	// CreateVolume creates one volume and returns it once the BMC has.
	CreateVolume(ctx context.Context, spec VolumeSpec) (Volume, error)
	// DeleteVolume deletes the volume at uri.
	DeleteVolume(ctx context.Context, uri string) error
}

// Volume is one logical disk.
type Volume struct {
	URI           string   `json:"uri"`
	Name          string   `json:"name"`
	RAIDType      string   `json:"raid_type"`
	CapacityBytes int64    `json:"capacity_bytes"`
	Controller    string   `json:"controller"`
	Drives        []string `json:"drives"`
	// RootDeviceHint names the volume as the operating system sees it,
	// from the volume's Identifiers: a world wide name (DurableNameFormat
	// NAA, EUI or FC_WWN) becomes {"wwn": "0x..."}, as Ironic's RAID
	// drivers report root_device_hint; nil when the BMC gives none.
	RootDeviceHint map[string]any `json:"root_device_hint,omitempty"`
}

// rfIdentifier is a Resource.Identifier of the Redfish schema.
type rfIdentifier struct {
	DurableName       string
	DurableNameFormat string
}

// volumeHint is the root device hint of a volume's identifiers.
func volumeHint(ids []rfIdentifier) map[string]any {
	for _, id := range ids {
		switch id.DurableNameFormat {
		case "NAA", "EUI", "FC_WWN":
			n := strings.ToLower(strings.NewReplacer(":", "", "-", "").Replace(strings.TrimSpace(id.DurableName)))
			n = strings.TrimPrefix(n, "0x")
			if n != "" && strings.Trim(n, "0123456789abcdef") == "" {
				return map[string]any{"wwn": "0x" + n}
			}
		}
	}
	return nil
}

// VolumeSpec is a logical disk to create, in Ironic's target_raid_config
// terms: RAIDLevel "0", "1", "5", "6", "1+0", "5+0", "6+0"; SizeGB 0 for
// MAX; Controller and PhysicalDisks name Storage and Drive Ids.
type VolumeSpec struct {
	Name          string   `json:"name,omitempty"`
	RAIDLevel     string   `json:"raid_level"`
	SizeGB        int64    `json:"size_gb"`
	Controller    string   `json:"controller,omitempty"`
	PhysicalDisks []string `json:"physical_disks,omitempty"`
	NumberOfDisks int      `json:"number_of_physical_disks,omitempty"`
}

// raidTypes maps Ironic's RAID levels to Redfish RAIDType and the fewest
// drives each needs (Ironic's redfish raid interface's RAID_LEVELS).
var raidTypes = map[string]struct {
	redfish  string
	minDisks int
}{
	"0": {"RAID0", 1}, "1": {"RAID1", 2}, "5": {"RAID5", 3}, "6": {"RAID6", 4},
	"1+0": {"RAID10", 4}, "5+0": {"RAID50", 6}, "6+0": {"RAID60", 8},
}

var _ RAID = (*redfishDriver)(nil)

type rfStorage struct {
	uri, id string
	drives  []string
	volumes string
}

// storages reads the system's Storage collection.
func (d *redfishDriver) storages(c *rfCall) ([]rfStorage, error) {
	uri, err := d.resolveSystem(c)
	if err != nil {
		return nil, err
	}
	var sys struct{ Storage common.Link }
	if err := getJSON(c, uri, &sys); err != nil {
		return nil, fmt.Errorf("read system %s: %w", uri, err)
	}
	if sys.Storage == "" {
		return nil, fmt.Errorf("%w: system %s has no Storage", ErrUnsupported, uri)
	}
	members, err := collectionMembers(c, sys.Storage.String())
	if err != nil {
		return nil, fmt.Errorf("list storage of %s: %w", uri, err)
	}
	var out []rfStorage
	for _, m := range members {
		var st struct {
			ID      string `json:"Id"`
			Drives  common.Links
			Volumes common.Link
		}
		if err := getJSON(c, m, &st); err != nil {
			return nil, fmt.Errorf("read storage %s: %w", m, err)
		}
		s := rfStorage{uri: m, id: st.ID, volumes: st.Volumes.String()}
		for _, dr := range st.Drives {
			s.drives = append(s.drives, dr.String())
		}
		out = append(out, s)
	}
	return out, nil
}

func (d *redfishDriver) storageVolumes(c *rfCall, st rfStorage) ([]Volume, error) {
	if st.volumes == "" {
		return nil, nil
	}
	members, err := collectionMembers(c, st.volumes)
	if err != nil {
		return nil, fmt.Errorf("list volumes of %s: %w", st.uri, err)
	}
	var out []Volume
	for _, m := range members {
		var v struct {
			Name          string
			RAIDType      string
			CapacityBytes int64
			Identifiers   []rfIdentifier
			Links         struct{ Drives common.Links }
		}
		if err := getJSON(c, m, &v); err != nil {
			return nil, fmt.Errorf("read volume %s: %w", m, err)
		}
		vol := Volume{URI: m, Name: v.Name, RAIDType: v.RAIDType, CapacityBytes: v.CapacityBytes, Controller: st.id, RootDeviceHint: volumeHint(v.Identifiers)}
		for _, dr := range v.Links.Drives {
			vol.Drives = append(vol.Drives, path.Base(dr.String()))
		}
		out = append(out, vol)
	}
	return out, nil
}

// Volumes lists every storage controller's volumes.
func (d *redfishDriver) Volumes(ctx context.Context) ([]Volume, error) {
	c, err := d.call(ctx)
	if err != nil {
		return nil, err
	}
	sts, err := d.storages(c)
	if err != nil {
		return nil, err
	}
	var out []Volume
	for _, st := range sts {
		vols, err := d.storageVolumes(c, st)
		if err != nil {
			return nil, err
		}
		out = append(out, vols...)
	}
	return out, nil
}

// CreateVolume POSTs a Volume to the controller's Volumes collection
// (Redfish Storage model): RAIDType, CapacityBytes unless MAX, and the
// drives, the named ones or the fewest free ones the level needs.
func (d *redfishDriver) CreateVolume(ctx context.Context, spec VolumeSpec) (Volume, error) {
	rt, ok := raidTypes[spec.RAIDLevel]
	if !ok {
		return Volume{}, fmt.Errorf("%w: RAID level %q through Redfish", ErrUnsupported, spec.RAIDLevel)
	}
	c, err := d.call(ctx)
	if err != nil {
		return Volume{}, err
	}
	sts, err := d.storages(c)
	if err != nil {
		return Volume{}, err
	}
	need := rt.minDisks
	if spec.NumberOfDisks > 0 {
		need = spec.NumberOfDisks
	}
	var why []string
	for _, st := range sts {
		if spec.Controller != "" && st.id != spec.Controller && st.uri != spec.Controller {
			continue
		}
		if st.volumes == "" {
			why = append(why, st.id+" has no Volumes collection")
			continue
		}
		vols, err := d.storageVolumes(c, st)
		if err != nil {
			return Volume{}, err
		}
		used := map[string]bool{}
		for _, v := range vols {
			for _, dr := range v.Drives {
				used[dr] = true
			}
		}
		var drives []string
		if len(spec.PhysicalDisks) > 0 {
			for _, want := range spec.PhysicalDisks {
				found := ""
				for _, dr := range st.drives {
					if path.Base(dr) == want || dr == want {
						found = dr
					}
				}
				if found == "" {
					return Volume{}, fmt.Errorf("%w: controller %s has no drive %s", ErrUnsupported, st.id, want)
				}
				drives = append(drives, found)
			}
		} else {
			for _, dr := range st.drives {
				if !used[path.Base(dr)] && len(drives) < need {
					drives = append(drives, dr)
				}
			}
			if len(drives) < need {
				why = append(why, fmt.Sprintf("%s has %d free drives, RAID %s needs %d", st.id, len(drives), spec.RAIDLevel, need))
				continue
			}
		}
		body := map[string]any{"RAIDType": rt.redfish}
		if spec.Name != "" {
			body["Name"] = spec.Name
		}
		if spec.SizeGB > 0 {
			body["CapacityBytes"] = spec.SizeGB << 30
		}
		links := make([]any, len(drives))
		for i, dr := range drives {
			links[i] = map[string]any{"@odata.id": dr}
		}
		body["Links"] = map[string]any{"Drives": links}
		resp, err := c.Post(st.volumes, body)
		if err != nil {
			return Volume{}, fmt.Errorf("create a RAID %s volume on %s: %w", spec.RAIDLevel, st.id, err)
		}
		uri, err := d.awaitCreated(c, resp)
		if err != nil {
			return Volume{}, fmt.Errorf("create a RAID %s volume on %s: %w", spec.RAIDLevel, st.id, err)
		}
		vol := Volume{URI: uri, Name: spec.Name, RAIDType: rt.redfish, CapacityBytes: spec.SizeGB << 30, Controller: st.id}
		for _, dr := range drives {
			vol.Drives = append(vol.Drives, path.Base(dr))
		}
		if uri != "" {
			var got struct {
				Name          string
				CapacityBytes int64
				Identifiers   []rfIdentifier
			}
			if getJSON(c, uri, &got) == nil {
				vol.Name, vol.CapacityBytes, vol.RootDeviceHint = got.Name, got.CapacityBytes, volumeHint(got.Identifiers)
			}
		}
		return vol, nil
	}
	if len(why) == 0 {
		why = append(why, "no storage controller matches")
		if spec.Controller != "" {
			why[0] = "no storage controller " + spec.Controller
		}
	}
	return Volume{}, fmt.Errorf("%w: cannot create a RAID %s volume: %s", ErrUnsupported, spec.RAIDLevel, strings.Join(why, "; "))
}

// awaitCreated follows a creation: 201 with Location is done; 202 is a
// task, polled until it ends or the call's context does.
func (d *redfishDriver) awaitCreated(c *rfCall, resp *http.Response) (string, error) {
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusAccepted {
		if loc == "" {
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var v struct {
				ID string `json:"@odata.id"`
			}
			_ = json.Unmarshal(b, &v)
			loc = v.ID
		}
		return loc, nil
	}
	task := taskFromResponse(resp)
	for !task.Done {
		st, err := d.FirmwareTaskStatus(c.ctx, task.URI)
		if err != nil && !Retryable(err) {
			return "", err
		}
		if err == nil && st.Done {
			if st.Failed {
				return "", fmt.Errorf("%w: task %s ended %s: %s", ErrUnsupported, task.URI, st.State, strings.Join(st.Messages, "; "))
			}
			return "", nil
		}
		select {
		case <-c.ctx.Done():
			return "", fmt.Errorf("%w: task %s: %w", ErrUnreachable, task.URI, c.ctx.Err())
		case <-time.After(time.Second):
		}
	}
	return "", nil
}

// DeleteVolume deletes a volume.
func (d *redfishDriver) DeleteVolume(ctx context.Context, uri string) error {
	c, err := d.call(ctx)
	if err != nil {
		return err
	}
	resp, err := c.Delete(uri)
	if err != nil {
		return fmt.Errorf("delete volume %s: %w", uri, err)
	}
	_, err = d.awaitCreated(c, resp)
	return err
}
