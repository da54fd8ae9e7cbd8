//go:build linux

package agent

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// nvmePassthru is the kernel's struct nvme_passthru_cmd (linux/nvme_ioctl.h).
type nvmePassthru struct {
	Opcode      uint8
	Flags       uint8
	Rsvd1       uint16
	NSID        uint32
	CDW2, CDW3  uint32
	Metadata    uint64
	Addr        uint64
	MetadataLen uint32
	DataLen     uint32
	CDW10       uint32
	CDW11       uint32
	CDW12       uint32
	CDW13       uint32
	CDW14       uint32
	CDW15       uint32
	TimeoutMS   uint32
	Result      uint32
}

const (
	// nvmeIoctlID is NVME_IOCTL_ID, _IO('N', 0x40): the namespace id of a
	// namespace block device.
	nvmeIoctlID = 0x4e40
	// nvmeIoctlAdminCmd is NVME_IOCTL_ADMIN_CMD, _IOWR('N', 0x41, struct
	// nvme_admin_cmd) with its 72 bytes.
	nvmeIoctlAdminCmd = 0xc0484e41

	nvmeOpGetLogPage = 0x02
	nvmeOpIdentify   = 0x06
	nvmeOpFormat     = 0x80
	nvmeOpSanitize   = 0x84

	// nvmeFormatTimeout bounds a Format NVM: a user-data erase of a large
	// drive takes minutes (nvme-cli's own default is 10 minutes).
	nvmeFormatTimeout = 4 * time.Hour
	// nvmeSanitizeTimeout bounds waiting for a sanitize to finish.
	nvmeSanitizeTimeout = 12 * time.Hour
)

var _ [72 - unsafe.Sizeof(nvmePassthru{})]byte // the kernel's layout

func nvmeAdmin(fd int, cmd *nvmePassthru, data []byte) error {
	if len(data) > 0 {
		cmd.Addr = uint64(uintptr(unsafe.Pointer(&data[0])))
		cmd.DataLen = uint32(len(data))
	}
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), nvmeIoctlAdminCmd, uintptr(unsafe.Pointer(cmd)))
	runtime.KeepAlive(data)
	if errno != 0 {
		return errno
	}
	if r != 0 {
		// A positive answer is the command's NVMe status field.
		return fmt.Errorf("NVMe admin command %#x: status %#x", cmd.Opcode, r)
	}
	return nil
}

// nvmeSecureErase erases an NVMe namespace through admin commands on its
// block device (planNVMeErase decides which). Any other device, or one
// refusing the identify, has errNoSecureErase. express is unused: Format
// and Sanitize are already the hardware-assisted erases.
func nvmeSecureErase(dev Device, _ bool) (string, error) {
	f, ok := dev.(fdHolder)
	if !ok {
		return "", errNoSecureErase
	}
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return "", errNoSecureErase
	}
	nsid, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), nvmeIoctlID, 0)
	if errno != 0 || int(nsid) <= 0 {
		return "", errNoSecureErase
	}
	idctrl := make([]byte, nvmeIdentifySize)
	if err := nvmeAdmin(fd, &nvmePassthru{Opcode: nvmeOpIdentify, CDW10: 1}, idctrl); err != nil {
		if errors.Is(err, syscall.ENOTTY) || errors.Is(err, syscall.EINVAL) {
			return "", errNoSecureErase
		}
		return "", fmt.Errorf("identify controller: %w", err)
	}
	ctrl, err := parseNVMeController(idctrl)
	if err != nil {
		return "", err
	}
	plan, err := planNVMeErase(ctrl)
	if err != nil {
		return "", err
	}
	if plan.Format {
		idns := make([]byte, nvmeIdentifySize)
		if err := nvmeAdmin(fd, &nvmePassthru{Opcode: nvmeOpIdentify, NSID: uint32(nsid), CDW10: 0}, idns); err != nil {
			return "", fmt.Errorf("identify namespace %d: %w", nsid, err)
		}
		cdw10, err := nvmeFormatCDW10(idns, plan.SES)
		if err != nil {
			return "", err
		}
		cmd := &nvmePassthru{Opcode: nvmeOpFormat, NSID: uint32(nsid), CDW10: cdw10, TimeoutMS: uint32(nvmeFormatTimeout / time.Millisecond)}
		if err := nvmeAdmin(fd, cmd, nil); err != nil {
			return "", fmt.Errorf("format namespace %d (secure erase setting %d): %w", nsid, plan.SES, err)
		}
		// The namespace's size or block size may read differently now.
		_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKRRPART, 0)
		return plan.Method, nil
	}
	// Sanitize covers the whole NVM subsystem and runs in the background:
	// follow its status log until it completes.
	if err := nvmeAdmin(fd, &nvmePassthru{Opcode: nvmeOpSanitize, CDW10: plan.SanAct}, nil); err != nil {
		return "", fmt.Errorf("sanitize (action %d): %w", plan.SanAct, err)
	}
	deadline := time.Now().Add(nvmeSanitizeTimeout)
	log := make([]byte, 512)
	for time.Now().Before(deadline) {
		// Get Log Page: NUMDL (dwords - 1) in CDW10 bits 31:16, LID in 7:0.
		cmd := &nvmePassthru{Opcode: nvmeOpGetLogPage, NSID: 0xffffffff, CDW10: uint32(len(log)/4-1)<<16 | nvmeLogSanitize}
		if err := nvmeAdmin(fd, cmd, log); err != nil {
			return "", fmt.Errorf("sanitize status: %w", err)
		}
		_, state, err := sanitizeStatus(log)
		if err != nil {
			return "", err
		}
		switch state {
		case nvmeSanitizeSucceeded, nvmeSanitizeNoDealloc:
			return plan.Method, nil
		case nvmeSanitizeFailed:
			return "", errors.New("sanitize failed (sanitize status log)")
		}
		time.Sleep(2 * time.Second)
	}
	return "", fmt.Errorf("sanitize did not finish within %s", nvmeSanitizeTimeout)
}
