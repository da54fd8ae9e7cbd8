//go:build linux

package agent

import (
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sgIOHdr is the kernel's struct sg_io_hdr (scsi/sg.h).
type sgIOHdr struct {
	InterfaceID    int32
	DxferDirection int32
	CmdLen         uint8
	MxSbLen        uint8
	IovecCount     uint16
	DxferLen       uint32
	Dxferp         unsafe.Pointer
	Cmdp           unsafe.Pointer
	Sbp            unsafe.Pointer
	Timeout        uint32
	Flags          uint32
	PackID         int32
	UsrPtr         unsafe.Pointer
	Status         uint8
	MaskedStatus   uint8
	MsgStatus      uint8
	SbLenWr        uint8
	HostStatus     uint16
	DriverStatus   uint16
	Resid          int32
	Duration       uint32
	Info           uint32
}

const (
	sgIO          = 0x2285
	sgDxferNone   = -1
	sgDxferToDev  = -2
	sgDxferFromDv = -3
	sgInfoOKMask  = 0x1

	ataOpIdentify      = 0xec
	ataOpSetPassword   = 0xf1
	ataOpUnlock        = 0xf2
	ataOpErasePrepare  = 0xf3
	ataOpEraseUnit     = 0xf4
	ataOpDisablePasswd = 0xf6
)

// ataCommand sends one ATA command through SCSI ATA PASS-THROUGH (16) (the
// SAT specification): PIO data in/out of one 512-byte block, or no data.
func ataCommand(fd int, op uint8, dir int32, data []byte, timeout time.Duration) error {
	cdb := make([]byte, 16)
	cdb[0] = 0x85
	switch dir {
	case sgDxferFromDv:
		cdb[1] = 4 << 1 // PIO data-in
		cdb[2] = 0x0e   // T_DIR in, BYT_BLOK, T_LENGTH in the sector count
	case sgDxferToDev:
		cdb[1] = 5 << 1 // PIO data-out
		cdb[2] = 0x06
	default:
		cdb[1] = 3 << 1 // non-data
		cdb[2] = 0x20   // CK_COND: return the ATA status
	}
	if len(data) > 0 {
		cdb[6] = 1 // one sector
	}
	cdb[13] = 0x40 // device: LBA mode
	cdb[14] = op
	sense := make([]byte, 32)
	h := sgIOHdr{InterfaceID: 'S', DxferDirection: dir, CmdLen: 16, MxSbLen: uint8(len(sense)),
		Cmdp: unsafe.Pointer(&cdb[0]), Sbp: unsafe.Pointer(&sense[0]), Timeout: uint32(timeout / time.Millisecond)}
	if len(data) > 0 {
		h.Dxferp, h.DxferLen = unsafe.Pointer(&data[0]), uint32(len(data))
	}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), sgIO, uintptr(unsafe.Pointer(&h)))
	runtime.KeepAlive(cdb)
	runtime.KeepAlive(sense)
	runtime.KeepAlive(data)
	if errno != 0 {
		return errno
	}
	if h.HostStatus != 0 || h.DriverStatus&^0x08 != 0 {
		return fmt.Errorf("ATA command %#x: host status %#x, driver status %#x", op, h.HostStatus, h.DriverStatus)
	}
	// With CK_COND, sense data carries the ATA status return descriptor
	// (72h format, descriptor 09h); its status byte's ERR bit is a refusal.
	if h.SbLenWr >= 22 && sense[0]&0x7f == 0x72 && sense[8] == 0x09 && sense[21]&0x01 != 0 {
		return fmt.Errorf("ATA command %#x refused by the drive (error %#x, status %#x)", op, sense[11], sense[21])
	}
	if h.Status != 0 && !(h.Status == 2 && cdb[2]&0x20 != 0) {
		return fmt.Errorf("ATA command %#x: SCSI status %#x", op, h.Status)
	}
	return nil
}

func ataIdentify(fd int) (ataSecurity, error) {
	id := make([]byte, ataIdentifySize)
	if err := ataCommand(fd, ataOpIdentify, sgDxferFromDv, id, 30*time.Second); err != nil {
		return ataSecurity{}, err
	}
	return parseATASecurity(id)
}

// ataSecureErase runs the ATA security erase IPA runs through hdparm: set
// the user password, ERASE PREPARE, ERASE UNIT (enhanced where the drive
// has it), then checks that the drive's security is disabled again. Any
// device that does not answer ATA PASS-THROUGH (virtio, NVMe, a file) has
// errNoSecureErase.
func ataSecureErase(dev Device, _ bool) (string, error) {
	f, ok := dev.(fdHolder)
	if !ok {
		return "", errNoSecureErase
	}
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return "", errNoSecureErase
	}
	sec, err := ataIdentify(fd)
	if err != nil {
		return "", fmt.Errorf("%w: no ATA IDENTIFY answer: %v", errNoSecureErase, err)
	}
	plan, err := planATAErase(sec)
	if err != nil {
		return "", err
	}
	if plan.Unlock {
		if err := ataCommand(fd, ataOpUnlock, sgDxferToDev, ataPasswordBlock(ataErasePassword, 0), 30*time.Second); err != nil && sec.Locked {
			return "", fmt.Errorf("unlock the drive with IPA's password: %w", err)
		}
	} else if err := ataCommand(fd, ataOpSetPassword, sgDxferToDev, ataPasswordBlock(ataErasePassword, 0), 30*time.Second); err != nil {
		return "", fmt.Errorf("security set password: %w", err)
	}
	if err := ataCommand(fd, ataOpErasePrepare, sgDxferNone, nil, 30*time.Second); err != nil {
		return "", fmt.Errorf("security erase prepare: %w", err)
	}
	var control uint16
	if plan.Enhanced {
		control |= 1 << 1
	}
	if err := ataCommand(fd, ataOpEraseUnit, sgDxferToDev, ataPasswordBlock(ataErasePassword, control), plan.Timeout); err != nil {
		return "", fmt.Errorf("security erase unit: %w", err)
	}
	after, err := ataIdentify(fd)
	if err != nil {
		return "", fmt.Errorf("identify after erase: %w", err)
	}
	if after.Enabled {
		// The erase did not clear the password: it did not run.
		_ = ataCommand(fd, ataOpDisablePasswd, sgDxferToDev, ataPasswordBlock(ataErasePassword, 0), 30*time.Second)
		return "", errors.New("security still enabled after the erase: the drive did not erase")
	}
	return plan.Method, nil
}
