package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"
)

// Accelerators QEMU runs the VMs with.
const (
	AccelKVM = "kvm"
	AccelTCG = "tcg"
)

// accelProbeTimeout bounds the KVM probe boot; KVM reaches the test
// image's init in about 3 s, and a broken nested KVM fails in under 1 s.
const accelProbeTimeout = 30 * time.Second

var (
	accelOnce   sync.Once
	accelChoice string
	accelReason string
)

// Accel is the accelerator for the tests' VMs: $IRONFLOW_E2E_ACCEL (kvm or
// tcg) when set; otherwise KVM when /dev/kvm opens and a probe boot of the
// test image under KVM reaches init with both firmwares, else TCG. The
// probe is there because some nested-KVM hosts open /dev/kvm but stop the
// guest with "KVM internal error" in syslinux's real-mode code or in OVMF
// running from pflash.
func Accel() string {
	accelOnce.Do(func() {
		accelChoice, accelReason = chooseAccel()
		fmt.Fprintf(os.Stderr, "e2e: VMs run with %s (%s)\n", accelChoice, accelReason)
	})
	return accelChoice
}

func chooseAccel() (string, string) {
	switch a := os.Getenv("IRONFLOW_E2E_ACCEL"); a {
	case AccelKVM, AccelTCG:
		return a, "IRONFLOW_E2E_ACCEL"
	case "", "auto":
	default:
		return AccelTCG, fmt.Sprintf("IRONFLOW_E2E_ACCEL=%q is not kvm, tcg or auto", a)
	}
	if !KVMUsable() {
		return AccelTCG, "/dev/kvm is not usable"
	}
	img, _, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		return AccelTCG, fmt.Sprintf("no test image to probe KVM with: %v", err)
	}
	errs := make(chan error, 2)
	for _, fw := range []string{FirmwareBIOS, FirmwareUEFI} {
		go func() { errs <- probeKVM(img, fw) }()
	}
	var first error
	for range 2 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return AccelTCG, "KVM probe failed: " + first.Error()
	}
	return AccelKVM, "KVM probe booted the test image with SeaBIOS and OVMF"
}

// probeKVM boots the test image (a snapshot, no config drive) under KVM
// alone and waits for its init.
func probeKVM(img, firmware string) error {
	dir, err := os.MkdirTemp("", "ironflow-e2e-kvm-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	v, err := startQEMU(QEMUConfig{Name: "kvm-probe-" + firmware, Firmware: firmware, Dir: dir, Disks: []string{img}, Snapshot: true}, "kvm-only")
	if err != nil {
		return err
	}
	defer v.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), accelProbeTimeout)
	defer cancel()
	// A KVM internal error pauses the guest: QEMU says so on stderr.
	go func() {
		if _, err := waitLine(ctx, v.QEMULog, "KVM internal error", v.exited); err == nil {
			cancel()
		}
	}()
	if _, err := waitLine(ctx, v.SerialLog, "IRONFLOW-E2E booted-from-disk", v.exited); err != nil {
		if _, ok := findLine(v.QEMULog, "KVM internal error"); ok {
			return fmt.Errorf("%s: KVM internal error, the guest stopped", firmware)
		}
		return fmt.Errorf("%s: %w", firmware, err)
	}
	return nil
}
