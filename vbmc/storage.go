package vbmc

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Storage: one controller ("1") whose drives are the VM's disk and its
// extra drives (config "drives": disk image paths), and whose Volumes can
// be created (POST with RAIDType and Links.Drives) and deleted. Volumes
// are recorded in the VM's state directory (volumes.json). As a hardware
// RAID controller shows the operating system its logical drives, not
// their members, the VM's next QEMU sees each volume as one new disk (a
// reset of a running VM whose volumes changed starts a new QEMU, as the
// host's reset shows a controller's new logical drive), a qcow2 image of the volume's capacity in the
// state directory (volume-<id>.qcow2, created empty: the members' data is
// not carried over), attached as a SCSI disk (virtio-scsi) whose WWN is
// the volume's NAA name, so that a root device hint {"wwn": ...} finds
// it; the member drives are not attached. A volume that holds the VM's
// disk (Disk0) takes the disk's place in the boot order. Deleting the
// volume deletes its image and gives the drives back at the next start.

const storageID = "1"

var supportedRAIDTypes = []string{"RAID0", "RAID1", "RAID5", "RAID6", "RAID10"}

// minDrives a RAID type needs, as a controller checks.
var minDrives = map[string]int{"RAID0": 1, "RAID1": 2, "RAID5": 3, "RAID6": 4, "RAID10": 4}

type vmVolume struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	RAIDType      string   `json:"raid_type"`
	CapacityBytes int64    `json:"capacity_bytes"`
	Drives        []string `json:"drives"`
	// WWN is the volume's world wide name (an NAA-5 name, 16 hex digits,
	// fixed at creation), reported in Identifiers as a controller reports
	// its logical drives'.
	WWN string `json:"wwn,omitempty"`
}

// volumeWWN names a new volume: NAA 5 with the digits of a hash of the VM
// and the volume, so that two VMs' volumes never share a name.
func volumeWWN(vm, id string) string {
	sum := sha256.Sum256([]byte(vm + "/" + id))
	return "5" + hex.EncodeToString(sum[:])[:15]
}

var volumesMu sync.Mutex

func (m *Machine) volumesFile() string { return filepath.Join(m.dir, "volumes.json") }

func (m *Machine) volumes() ([]vmVolume, error) {
	b, err := os.ReadFile(m.volumesFile())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var v []vmVolume
	return v, json.Unmarshal(b, &v)
}

func (m *Machine) saveVolumes(v []vmVolume) error {
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return err
	}
	b, _ := json.Marshal(v)
	return os.WriteFile(m.volumesFile(), b, 0o644)
}

// drivePaths are the VM's drives: Disk0 its disk, DiskN its extra drives.
func (m *Machine) drivePaths() []string {
	var out []string
	if m.vm.Disk != "" {
		out = append(out, m.vm.Disk)
	}
	return append(out, m.vm.Drives...)
}

func (s *Server) storagePath(m *Machine) string {
	return redfishRoot + "/Systems/" + m.vm.Name + "/Storage"
}

func (s *Server) routeStorage(mux *http.ServeMux) {
	base := redfishRoot + "/Systems/{id}/Storage"
	mux.HandleFunc("GET "+base, s.withMachine(func(w http.ResponseWriter, r *http.Request, m *Machine) {
		p := s.storagePath(m)
		writeJSONResponse(w, http.StatusOK, collection(p, "#StorageCollection.StorageCollection", "Storage Collection", []string{p + "/" + storageID}))
	}))
	mux.HandleFunc("GET "+base+"/{st}", s.withStorage(s.handleStorage))
	mux.HandleFunc("GET "+base+"/{st}/Drives/{drive}", s.withStorage(s.handleDrive))
	mux.HandleFunc("PATCH "+base+"/{st}/Drives/{drive}", s.withStorage(s.handlePatchDrive)) // indicators.go
	mux.HandleFunc("GET "+base+"/{st}/Volumes", s.withStorage(s.handleVolumes))
	mux.HandleFunc("POST "+base+"/{st}/Volumes", s.withStorage(s.handleCreateVolume))
	mux.HandleFunc("GET "+base+"/{st}/Volumes/{vol}", s.withStorage(s.handleVolume))
	mux.HandleFunc("DELETE "+base+"/{st}/Volumes/{vol}", s.withStorage(s.handleDeleteVolume))
}

func (s *Server) withStorage(h func(http.ResponseWriter, *http.Request, *Machine)) http.HandlerFunc {
	return s.withMachine(func(w http.ResponseWriter, r *http.Request, m *Machine) {
		if r.PathValue("st") != storageID {
			writeError(w, http.StatusNotFound, "ResourceMissingAtURI", fmt.Sprintf("The resource at the URI %s was not found.", r.URL.Path))
			return
		}
		h(w, r, m)
	})
}

func (s *Server) drivePath(m *Machine, i int) string {
	return s.storagePath(m) + "/" + storageID + "/Drives/Disk" + strconv.Itoa(i)
}

func (s *Server) handleStorage(w http.ResponseWriter, r *http.Request, m *Machine) {
	p := s.storagePath(m) + "/" + storageID
	var drives []any
	for i := range m.drivePaths() {
		drives = append(drives, link(s.drivePath(m, i)))
	}
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID: p, odataType: "#Storage.v1_15_0.Storage", "Id": storageID, "Name": "Virtual RAID controller",
		"Status": okStatus(), "Drives": drives, "Drives@odata.count": len(drives), "Volumes": link(p + "/Volumes"),
		"StorageControllers": []any{map[string]any{"MemberId": "0", "Name": "ironflow vbmc RAID", "Status": okStatus(),
			"SupportedRAIDTypes": supportedRAIDTypes, "SupportedControllerProtocols": []string{"PCIe"}, "SupportedDeviceProtocols": []string{"SATA"}}},
	})
}

// driveIndex is the index of the drive with Id id, or -1.
func (s *Server) driveIndex(m *Machine, id string) int {
	for j := range m.drivePaths() {
		if id == "Disk"+strconv.Itoa(j) {
			return j
		}
	}
	return -1
}

func (s *Server) driveExists(m *Machine, id string) bool { return s.driveIndex(m, id) >= 0 }

func (s *Server) handleDrive(w http.ResponseWriter, r *http.Request, m *Machine) {
	paths := m.drivePaths()
	id := r.PathValue("drive")
	i := s.driveIndex(m, id)
	if i < 0 {
		writeError(w, http.StatusNotFound, "ResourceMissingAtURI", "No such drive "+id+".")
		return
	}
	// Named and sized as SimpleStorage and the guest see them (virtio
	// disks, the virtual size of a qcow2), so that inspection lists each
	// disk once.
	dv := VM{Disk: paths[i]}
	if i == 0 {
		dv.DiskSize = m.vm.DiskSize
	}
	size, err := diskBytes(r.Context(), dv)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID: s.drivePath(m, i), odataType: "#Drive.v1_17_0.Drive", "Id": id, "Name": "disk" + strconv.Itoa(i),
		"Model": "virtio-blk", "Manufacturer": "QEMU", "CapacityBytes": size, "MediaType": "SSD", "Protocol": "PCIe", "Status": okStatus(),
		"LocationIndicatorActive": m.indicator("drive/"+id) == "Lit",
	})
}

func (s *Server) volumePath(m *Machine, id string) string {
	return s.storagePath(m) + "/" + storageID + "/Volumes/" + id
}

func (s *Server) handleVolumes(w http.ResponseWriter, r *http.Request, m *Machine) {
	volumesMu.Lock()
	vols, err := m.volumes()
	volumesMu.Unlock()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	var members []string
	for _, v := range vols {
		members = append(members, s.volumePath(m, v.ID))
	}
	writeJSONResponse(w, http.StatusOK, collection(s.storagePath(m)+"/"+storageID+"/Volumes", "#VolumeCollection.VolumeCollection", "Volume Collection", members))
}

func (s *Server) volumeDoc(m *Machine, v vmVolume) map[string]any {
	var drives []any
	for _, d := range v.Drives {
		drives = append(drives, link(s.storagePath(m)+"/"+storageID+"/Drives/"+d))
	}
	doc := map[string]any{
		odataID: s.volumePath(m, v.ID), odataType: "#Volume.v1_9_0.Volume", "Id": v.ID, "Name": v.Name,
		"RAIDType": v.RAIDType, "CapacityBytes": v.CapacityBytes, "Status": okStatus(),
		"Links": map[string]any{"Drives": drives},
	}
	if v.WWN != "" {
		doc["Identifiers"] = []any{map[string]any{"DurableNameFormat": "NAA", "DurableName": v.WWN}}
	}
	return doc
}

func (s *Server) handleVolume(w http.ResponseWriter, r *http.Request, m *Machine) {
	volumesMu.Lock()
	vols, err := m.volumes()
	volumesMu.Unlock()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	for _, v := range vols {
		if v.ID == r.PathValue("vol") {
			writeJSONResponse(w, http.StatusOK, s.volumeDoc(m, v))
			return
		}
	}
	writeError(w, http.StatusNotFound, "ResourceMissingAtURI", "No such volume.")
}

func (s *Server) handleCreateVolume(w http.ResponseWriter, r *http.Request, m *Machine) {
	var body struct {
		Name          string
		RAIDType      string
		CapacityBytes int64
		Links         struct {
			Drives []struct {
				ID string `json:"@odata.id"`
			}
		}
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if !slices.Contains(supportedRAIDTypes, body.RAIDType) {
		writeError(w, http.StatusBadRequest, "PropertyValueNotInList", fmt.Sprintf("The value %q for the property RAIDType is not in the list of acceptable values %v.", body.RAIDType, supportedRAIDTypes))
		return
	}
	volumesMu.Lock()
	defer volumesMu.Unlock()
	vols, err := m.volumes()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	used := map[string]bool{}
	next := 1
	for _, v := range vols {
		for _, d := range v.Drives {
			used[d] = true
		}
		if n, _ := strconv.Atoi(v.ID); n >= next {
			next = n + 1
		}
	}
	var drives []string
	var smallest int64 = -1
	for _, d := range body.Links.Drives {
		id := path.Base(d.ID)
		i := -1
		for j, p := range m.drivePaths() {
			if id == "Disk"+strconv.Itoa(j) {
				i = j
				if st, err := os.Stat(p); err == nil && (smallest < 0 || st.Size() < smallest) {
					smallest = st.Size()
				}
			}
		}
		if i < 0 || used[id] || slices.Contains(drives, id) {
			writeError(w, http.StatusBadRequest, "ResourceInUse", fmt.Sprintf("The drive %s does not exist or is in use by another volume.", d.ID))
			return
		}
		drives = append(drives, id)
	}
	if len(drives) < minDrives[body.RAIDType] {
		writeError(w, http.StatusBadRequest, "ActionParameterValueError", fmt.Sprintf("%s needs at least %d drives, %d given.", body.RAIDType, minDrives[body.RAIDType], len(drives)))
		return
	}
	capacity := body.CapacityBytes
	if capacity == 0 && smallest > 0 {
		capacity = smallest
	}
	v := vmVolume{ID: strconv.Itoa(next), Name: body.Name, RAIDType: body.RAIDType, CapacityBytes: capacity, Drives: drives, WWN: volumeWWN(m.vm.Name, strconv.Itoa(next))}
	if v.Name == "" {
		v.Name = "Volume" + v.ID
	}
	if err := m.saveVolumes(append(vols, v)); err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	s.log.Info("volume created", "vm", m.vm.Name, "volume", v.ID, "raid", v.RAIDType, "drives", drives)
	w.Header().Set("Location", s.volumePath(m, v.ID))
	writeJSONResponse(w, http.StatusCreated, s.volumeDoc(m, v))
}

func (s *Server) handleDeleteVolume(w http.ResponseWriter, r *http.Request, m *Machine) {
	volumesMu.Lock()
	defer volumesMu.Unlock()
	vols, err := m.volumes()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	i := slices.IndexFunc(vols, func(v vmVolume) bool { return v.ID == r.PathValue("vol") })
	if i < 0 {
		writeError(w, http.StatusNotFound, "ResourceMissingAtURI", "No such volume.")
		return
	}
	id := vols[i].ID
	if err := m.saveVolumes(slices.Delete(vols, i, i+1)); err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	if err := os.Remove(m.volumeImage(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("cannot remove the volume's image", "vm", m.vm.Name, "volume", id, "error", err)
	}
	s.log.Info("volume deleted", "vm", m.vm.Name, "volume", r.PathValue("vol"))
	w.WriteHeader(http.StatusNoContent)
}

func (m *Machine) attachedFile() string { return filepath.Join(m.dir, "volumes-attached.json") }

// volumeSet names the volumes and their drives, to compare what QEMU
// attached with what the controller now holds.
func volumeSet(vols []vmVolume) string {
	var parts []string
	for _, v := range vols {
		parts = append(parts, v.ID+"="+strings.Join(v.Drives, "+"))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// volumesChanged tells a running QEMU whose disks no longer match the
// volumes (created or deleted since its start): a reset must start a new
// QEMU for the guest to see them, as a controller's new logical drive
// shows at the host's reset.
func (m *Machine) volumesChanged() bool {
	volumesMu.Lock()
	vols, err := m.volumes()
	volumesMu.Unlock()
	if err != nil {
		return false
	}
	b, err := os.ReadFile(m.attachedFile())
	if err != nil {
		return len(vols) > 0
	}
	return string(b) != volumeSet(vols)
}

// volumeImage is the disk image QEMU attaches for volume id.
func (m *Machine) volumeImage(id string) string {
	return filepath.Join(m.dir, "volume-"+id+".qcow2")
}

// diskArgs are QEMU's disk arguments: the drives no volume holds as
// virtio disks, each volume as a SCSI disk with its WWN; diskBootIndex is
// the disk's place in the boot order.
func (m *Machine) diskArgs(diskBootIndex int) []string {
	volumesMu.Lock()
	vols, err := m.volumes()
	volumesMu.Unlock()
	if err != nil {
		m.log.Warn("cannot read the volumes: the drives are attached as they are", "error", err)
		vols = nil
	}
	if err := os.WriteFile(m.attachedFile(), []byte(volumeSet(vols)), 0o644); err != nil {
		m.log.Warn("cannot record the attached volumes", "error", err)
	}
	held := map[string]string{}
	for _, v := range vols {
		for _, d := range v.Drives {
			held[d] = v.ID
		}
	}
	var a []string
	for i, p := range m.drivePaths() {
		id := "Disk" + strconv.Itoa(i)
		if _, ok := held[id]; ok {
			continue
		}
		n := i // QEMU ids as before volumes: disk0 the disk, diskN the Nth extra drive
		if m.vm.Disk == "" {
			n = i + 1
		}
		dev := fmt.Sprintf("disk%d", n)
		opt := ""
		if dev == string(devDisk) {
			opt = fmt.Sprintf(",bootindex=%d", diskBootIndex)
		}
		a = append(a, "-drive", fmt.Sprintf("if=none,id=%sdrive,format=%s,file=%s", dev, diskFormat(p), p),
			"-device", fmt.Sprintf("virtio-blk-pci,id=%s,drive=%sdrive%s", dev, dev, opt))
	}
	if len(vols) == 0 {
		return a
	}
	a = append(a, "-device", "virtio-scsi-pci,id=scsi0")
	for _, v := range vols {
		img := m.volumeImage(v.ID)
		if err := m.ensureVolumeImage(v); err != nil {
			m.log.Warn("volume not attached", "volume", v.ID, "error", err)
			continue
		}
		dev := "vol" + v.ID
		opt := ""
		if m.vm.Disk != "" && slices.Contains(v.Drives, "Disk0") {
			dev, opt = string(devDisk), fmt.Sprintf(",bootindex=%d", diskBootIndex)
		}
		wwn := ""
		if v.WWN != "" {
			wwn = ",wwn=0x" + v.WWN
		}
		a = append(a, "-drive", fmt.Sprintf("if=none,id=%sdrive,format=qcow2,file=%s", dev, img),
			"-device", fmt.Sprintf("scsi-hd,id=%s,drive=%sdrive,bus=scsi0.0%s%s", dev, dev, wwn, opt))
	}
	return a
}

// ensureVolumeImage creates the volume's empty image on its first use.
func (m *Machine) ensureVolumeImage(v vmVolume) error {
	img := m.volumeImage(v.ID)
	if _, err := os.Stat(img); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	size := v.CapacityBytes
	if size <= 0 {
		return fmt.Errorf("volume %s has no capacity", v.ID)
	}
	out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", img, strconv.FormatInt(size, 10)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("create the image of volume %s: %w: %s", v.ID, err, out)
	}
	m.log.Info("volume image created", "volume", v.ID, "image", img, "bytes", size)
	return nil
}
