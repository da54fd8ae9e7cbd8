package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

// nvmeIDCtrl builds an Identify Controller data structure (NVM Express
// Base Specification, figure "Identify Controller Data Structure") with
// the fields erase decisions read.
func nvmeIDCtrl(oacs uint16, sanicap uint32, fna uint8) []byte {
	b := make([]byte, 4096)
	copy(b[24:], "SIMULATED NVME MODEL")
	binary.LittleEndian.PutUint16(b[256:], oacs)
	binary.LittleEndian.PutUint32(b[328:], sanicap)
	b[524] = fna
	return b
}

func TestPlanNVMeErase(t *testing.T) {
	for _, tc := range []struct {
		name    string
		id      []byte
		method  string
		ses     uint32
		sanact  uint32
		unsuppd bool
	}{
		// A data-centre drive: Format with crypto erase (FNA bit 2).
		{"crypto format", nvmeIDCtrl(0x0017, 0, 0x07), "nvme_format_crypto_erase", 2, 0, false},
		// Secure erase for the whole controller, no crypto: user-data erase.
		{"user data format", nvmeIDCtrl(0x0006, 0, 0x03), "nvme_format_user_data_erase", 1, 0, false},
		// Format without secure erase bits, Sanitize with block erase.
		{"sanitize block", nvmeIDCtrl(0x000a, 0x2, 0x00), "nvme_sanitize_block_erase", 0, 2, false},
		{"sanitize crypto", nvmeIDCtrl(0x0008, 0x3, 0x00), "nvme_sanitize_crypto_erase", 0, 4, false},
		// FNA says crypto but the controller has no Format NVM.
		{"no format command", nvmeIDCtrl(0x0000, 0, 0x04), "", 0, 0, true},
		{"nothing", nvmeIDCtrl(0x0002, 0, 0x00), "", 0, 0, true},
	} {
		c, err := parseNVMeController(tc.id)
		if err != nil {
			t.Fatal(err)
		}
		p, err := planNVMeErase(c)
		if tc.unsuppd {
			if !errors.Is(err, errNoSecureErase) {
				t.Errorf("%s: want errNoSecureErase, got %+v %v", tc.name, p, err)
			}
			continue
		}
		if err != nil || p.Method != tc.method || p.SES != tc.ses || p.SanAct != tc.sanact || p.Format != (tc.ses != 0) {
			t.Errorf("%s: got %+v %v", tc.name, p, err)
		}
	}
	if _, err := parseNVMeController(make([]byte, 100)); err == nil {
		t.Error("short identify data accepted")
	}
}

func TestNVMeFormatCDW10(t *testing.T) {
	ns := make([]byte, 4096)
	ns[26] = 0x01 | 1<<4 // LBA format 1, metadata at the end of the LBA
	ns[29] = 0x01 | 1<<3 // PI type 1, in the first 8 bytes
	got, err := nvmeFormatCDW10(ns, nvmeSESCrypto)
	want := uint32(1 | 1<<4 | 1<<5 | 1<<8 | 2<<9)
	if err != nil || got != want {
		t.Fatalf("cdw10 %#x, want %#x (%v)", got, want, err)
	}
	ns[26] = 0x02 | 1<<5 // LBA format 18: low 2, high 1
	ns[29] = 0
	if got, _ := nvmeFormatCDW10(ns, nvmeSESUserData); got != 2|1<<9|1<<12 {
		t.Fatalf("extended format index: cdw10 %#x", got)
	}
	log := []byte{0x00, 0x80, 0x02, 0x00}
	if p, st, err := sanitizeStatus(log); err != nil || p != 0x8000 || st != nvmeSanitizeRunning {
		t.Fatalf("sanitize status %d %d %v", p, st, err)
	}
}

// ataIdentify builds IDENTIFY DEVICE data (ACS-3, "IDENTIFY DEVICE data")
// with the security words set.
func ataIdentifyData(security, eraseTime, enhTime uint16, securityFeature bool) []byte {
	b := make([]byte, 512)
	put := func(w int, v uint16) { binary.LittleEndian.PutUint16(b[2*w:], v) }
	put(0, 0x0040) // fixed device
	if securityFeature {
		put(82, 1<<1|1<<14)
	}
	put(89, eraseTime)
	put(90, enhTime)
	put(128, security)
	return b
}

func TestPlanATAErase(t *testing.T) {
	for _, tc := range []struct {
		name     string
		id       []byte
		method   string
		unlock   bool
		timeout  time.Duration
		noErase  string
		enhanced bool
	}{
		{"enhanced", ataIdentifyData(0x0021, 60, 90, true), "ata_enhanced_security_erase", false, 360 * time.Minute, "", true},
		{"normal, short estimate", ataIdentifyData(0x0001, 10, 0, true), "ata_security_erase", false, ataEraseMinTimeout, "", false},
		{"extended time format", ataIdentifyData(0x0001, 0x8000|200, 0, true), "ata_security_erase", false, 800 * time.Minute, "", false},
		{"left locked by a failed erase", ataIdentifyData(0x0007, 10, 0, true), "ata_security_erase", true, ataEraseMinTimeout, "", false},
		{"frozen by the BIOS", ataIdentifyData(0x0009, 10, 0, true), "", false, 0, "frozen", false},
		{"attempts expired", ataIdentifyData(0x0013, 10, 0, true), "", false, 0, "expired", false},
		{"no security feature set", ataIdentifyData(0x0001, 10, 0, false), "", false, 0, "does not support", false},
		{"security word not reported", ataIdentifyData(0xffff, 0, 0, true), "", false, 0, "does not support", false},
	} {
		s, err := parseATASecurity(tc.id)
		if err != nil {
			t.Fatal(err)
		}
		p, err := planATAErase(s)
		if tc.noErase != "" {
			if !errors.Is(err, errNoSecureErase) || !strings.Contains(err.Error(), tc.noErase) {
				t.Errorf("%s: want no secure erase (%s), got %+v %v", tc.name, tc.noErase, p, err)
			}
			continue
		}
		if err != nil || p.Method != tc.method || p.Unlock != tc.unlock || p.Timeout != tc.timeout || p.Enhanced != tc.enhanced {
			t.Errorf("%s: got %+v %v", tc.name, p, err)
		}
	}
	b := ataPasswordBlock("NULL", 2)
	if len(b) != 512 || b[0] != 2 || string(b[2:6]) != "NULL" || b[6] != 0 {
		t.Fatalf("password block % x", b[:8])
	}
}

// runStep runs a clean step on the agent and returns its clean_result.
func runStep(t *testing.T, c *client.Client, step string, args map[string]any) (map[string]any, error) {
	t.Helper()
	ctx := context.Background()
	r, err := c.ExecuteCleanStep(ctx, client.Step{Step: step, Interface: "deploy", Args: args}, nil, nil)
	if err == nil {
		r, err = c.WaitCommand(ctx, r.ID, 10*time.Millisecond, nil)
	}
	if err != nil {
		return nil, err
	}
	var body struct {
		Result map[string]any `json:"clean_result"`
	}
	if err := json.Unmarshal(r.CommandResult, &body); err != nil {
		t.Fatal(err)
	}
	return body.Result, nil
}

func TestEraseDevicesShredOptions(t *testing.T) {
	api := newFakeAPI(t)
	const size = 8 << 20
	hw := newFileHardware(t, size)
	orig := bytes.Repeat([]byte{0xab}, size)
	os.WriteFile(hw.path(0), orig, 0o600)
	_, c := startAgent(t, api, hw, nil)
	// Random passes only: the disk holds neither the old data nor zeros.
	res, err := runStep(t, c, "erase_devices", map[string]any{"shred_random_overwrite_iterations": 2, "shred_final_overwrite_with_zeros": false})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := res["erased"].(map[string]any); m["/dev/vda"] != "shred" {
		t.Fatalf("result %v", res)
	}
	disk, _ := os.ReadFile(hw.path(0))
	if bytes.Contains(disk, bytes.Repeat([]byte{0xab}, 64)) || bytes.Equal(disk[:4096], make([]byte, 4096)) {
		t.Fatal("random passes left old data or zeros")
	}
	// Nothing to do at all is refused before touching a disk.
	_, err = runStep(t, c, "erase_devices", map[string]any{"shred_random_overwrite_iterations": 0, "shred_final_overwrite_with_zeros": false})
	if err == nil || !strings.Contains(err.Error(), "would not be erased") {
		t.Fatalf("want refusal, got %v", err)
	}
	_, err = runStep(t, c, "erase_devices", map[string]any{"shred_random_overwrite_iterations": "many"})
	if err == nil || !strings.Contains(err.Error(), "shred_random_overwrite_iterations") {
		t.Fatalf("want bad argument, got %v", err)
	}
}

func TestEraseDevicesExpressFallsBackToMetadata(t *testing.T) {
	api := newFakeAPI(t)
	const size = 32 << 20
	hw := newFileHardware(t, size)
	f, _ := os.OpenFile(hw.path(0), os.O_RDWR, 0)
	f.WriteAt(gptImage(t), 0)
	f.WriteAt([]byte("keep me"), 20<<20)
	f.Close()
	_, c := startAgent(t, api, hw, nil)
	res, err := runStep(t, c, "erase_devices_express", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := res["erased"].(map[string]any); m["/dev/vda"] != "metadata" {
		t.Fatalf("a file disk has no hardware erase: result %v", res)
	}
	disk, _ := os.ReadFile(hw.path(0))
	if !bytes.Equal(disk[:1<<20], make([]byte, 1<<20)) || !bytes.Contains(disk, []byte("keep me")) {
		t.Fatal("express fallback is not the metadata erase")
	}
}

// loopHardware tests against a real block device: a loop device listed
// as a disk and opened as LinuxHardware opens disks.
type loopHardware struct {
	*fileHardware
	dev string
}

func (h *loopHardware) BlockDevices(context.Context) ([]BlockDevice, error) {
	return []BlockDevice{{Name: h.dev, Size: 16 << 20, Kind: "disk"}}, nil
}

func (h *loopHardware) Open(bd BlockDevice) (Device, error) {
	return (&LinuxHardware{}).Open(bd)
}

func newLoopDevice(t *testing.T, size int64, fill byte) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: loop devices need root (CI runs as root)")
	}
	img := t.TempDir() + "/loop.img"
	if err := os.WriteFile(img, bytes.Repeat([]byte{fill}, int(size)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).Output()
	if err != nil {
		t.Skipf("SKIPPED LOUDLY: losetup failed (no loop device support here): %v", err)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev
}

// TestEraseDevicesOnLoopDevice runs erase_devices on a real block device
// that, like QEMU's virtio disks, has neither NVMe nor ATA secure erase:
// both probes must fail cleanly and shred must run.
func TestEraseDevicesOnLoopDevice(t *testing.T) {
	const size = 16 << 20
	dev := newLoopDevice(t, size, 0xcd)
	api := newFakeAPI(t)
	hw := &loopHardware{fileHardware: newFileHardware(t), dev: dev}
	_, c := startAgent(t, api, hw, nil)
	res, err := runStep(t, c, "erase_devices", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := res["erased"].(map[string]any); m[dev] != "shred" {
		t.Fatalf("result %v", res)
	}
	got := make([]byte, size)
	f, _ := os.OpenFile(dev, os.O_RDONLY, 0)
	f.ReadAt(got, 0)
	f.Close()
	if !bytes.Equal(got, make([]byte, size)) {
		t.Fatal("loop device not zeroed after shred")
	}
	// erase_devices_express on the same device: hardware zeroing where the
	// loop driver offers WRITE ZEROES, the metadata erase where not.
	dev2 := newLoopDevice(t, size, 0xcd)
	hw.dev = dev2
	res, err = runStep(t, c, "erase_devices_express", nil)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := res["erased"].(map[string]any)
	f, _ = os.OpenFile(dev2, os.O_RDONLY, 0)
	f.ReadAt(got, 0)
	f.Close()
	switch m[dev2] {
	case "write_zeroes":
		if !bytes.Equal(got, make([]byte, size)) {
			t.Fatal("write_zeroes left data")
		}
	case "metadata":
		if !bytes.Equal(got[:1<<20], make([]byte, 1<<20)) || !bytes.Equal(got[size-1<<20:], make([]byte, 1<<20)) {
			t.Fatal("metadata erase left the disk's ends")
		}
	default:
		t.Fatalf("express result %v", res)
	}
	t.Logf("erase_devices_express on a loop device: %v", m[dev2])
}

// TestBurninDiskOnLoopDevice runs burnin_disk on a real block device: its
// verify reads go to the device (the page cache is dropped after the
// writes) and its checkpoint block survives closing the device.
func TestBurninDiskOnLoopDevice(t *testing.T) {
	const size = 16 << 20
	dev := newLoopDevice(t, size, 0x00)
	api := newFakeAPI(t)
	hw := &loopHardware{fileHardware: newFileHardware(t), dev: dev}
	_, c := startAgent(t, api, hw, nil)
	res, err := runStep(t, c, "burnin_disk", map[string]any{"loops": 1})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := res["disks"].(map[string]any)[dev].(map[string]any)
	if d["passes"] != float64(1) || d["errors"] != float64(0) || d["bytes_read"] != float64(size-diskReserve) {
		t.Fatalf("burnin_disk on %s: %v", dev, res)
	}
}
