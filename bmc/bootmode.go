package bmc

import (
	"context"
	"fmt"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"
	"github.com/stmcginnis/gofish/redfish"
)

// BootModeSetter is a driver that switches the machine's firmware boot
// mode (API 1.76 states/boot_mode). The new mode applies from the next
// boot.
type BootModeSetter interface {
	BootMode(ctx context.Context) (BootMode, error)
	SetBootMode(ctx context.Context, mode BootMode) error
}

// SecureBooter is a driver that turns UEFI secure boot on and off (API
// 1.76 states/secure_boot).
type SecureBooter interface {
	SecureBoot(ctx context.Context) (bool, error)
	SetSecureBoot(ctx context.Context, on bool) error
}

var (
	_ BootModeSetter = (*redfishDriver)(nil)
	_ SecureBooter   = (*redfishDriver)(nil)
	_ BootModeSetter = (*ipmiDriver)(nil)
)

// BootMode implements BootModeSetter: the system's
// Boot.BootSourceOverrideMode, as Ironic's redfish management reads it.
func (d *redfishDriver) BootMode(ctx context.Context) (BootMode, error) {
	c, err := d.call(ctx)
	if err != nil {
		return "", err
	}
	s, err := d.system(c)
	if err != nil {
		return "", fmt.Errorf("get boot mode via redfish %s: %w", d.cfg.endpoint, err)
	}
	return redfishBootMode(s.Boot.BootSourceOverrideMode), nil
}

func redfishBootMode(m redfish.BootSourceOverrideMode) BootMode {
	switch m {
	case redfish.UEFIBootSourceOverrideMode:
		return BootModeUEFI
	case redfish.LegacyBootSourceOverrideMode:
		return BootModeBIOS
	}
	return ""
}

// SetBootMode implements BootModeSetter: PATCH of BootSourceOverrideMode
// alone (the override target and its enabled state stay as they are), then
// read back.
func (d *redfishDriver) SetBootMode(ctx context.Context, mode BootMode) error {
	c, err := d.call(ctx)
	if err != nil {
		return err
	}
	want := map[BootMode]redfish.BootSourceOverrideMode{
		BootModeUEFI: redfish.UEFIBootSourceOverrideMode, BootModeBIOS: redfish.LegacyBootSourceOverrideMode,
	}[mode]
	if want == "" {
		return fmt.Errorf("%w: boot mode %q", ErrUnsupported, mode)
	}
	uri, err := d.resolveSystem(c)
	if err != nil {
		return fmt.Errorf("set boot mode via redfish %s: %w", d.cfg.endpoint, err)
	}
	d.log.Info("setting boot mode", "system", uri, "mode", want)
	resp, err := c.Patch(uri, map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": want}})
	if err != nil {
		return fmt.Errorf("set boot mode %s via redfish %s: %w", mode, d.cfg.endpoint, err)
	}
	resp.Body.Close()
	got, err := d.system(c)
	if err != nil {
		return fmt.Errorf("read back the boot mode via redfish %s: %w", d.cfg.endpoint, err)
	}
	if got.Boot.BootSourceOverrideMode != want {
		return fmt.Errorf("%w: the BMC accepted boot mode %s but reads back %q", ErrBusy, want, got.Boot.BootSourceOverrideMode)
	}
	return nil
}

func (d *redfishDriver) secureBootLink(c *rfCall) (string, error) {
	_, link, err := d.systemLinks(c)
	if err != nil {
		return "", err
	}
	if link == "" {
		return "", fmt.Errorf("%w: the system links no SecureBoot resource", ErrUnsupported)
	}
	return link, nil
}

// SecureBoot implements SecureBooter: SecureBoot.SecureBootEnable, the
// state the next boot gets (Ironic reads the same).
func (d *redfishDriver) SecureBoot(ctx context.Context) (bool, error) {
	c, err := d.call(ctx)
	if err != nil {
		return false, err
	}
	link, err := d.secureBootLink(c)
	if err != nil {
		return false, fmt.Errorf("get secure boot state via redfish %s: %w", d.cfg.endpoint, err)
	}
	var sb struct{ SecureBootEnable bool }
	if err := getJSON(c, link, &sb); err != nil {
		return false, fmt.Errorf("get secure boot state via redfish %s: %w", d.cfg.endpoint, err)
	}
	return sb.SecureBootEnable, nil
}

// SetSecureBoot implements SecureBooter: PATCH SecureBootEnable, read back.
func (d *redfishDriver) SetSecureBoot(ctx context.Context, on bool) error {
	c, err := d.call(ctx)
	if err != nil {
		return err
	}
	link, err := d.secureBootLink(c)
	if err != nil {
		return fmt.Errorf("set secure boot via redfish %s: %w", d.cfg.endpoint, err)
	}
	d.log.Info("setting secure boot", "resource", link, "enable", on)
	resp, err := c.Patch(link, map[string]any{"SecureBootEnable": on})
	if err != nil {
		return fmt.Errorf("set secure boot to %v via redfish %s: %w", on, d.cfg.endpoint, err)
	}
	resp.Body.Close()
	var sb struct{ SecureBootEnable bool }
	if err := getJSON(c, link, &sb); err != nil {
		return fmt.Errorf("read back secure boot via redfish %s: %w", d.cfg.endpoint, err)
	}
	if sb.SecureBootEnable != on {
		return fmt.Errorf("%w: the BMC accepted SecureBootEnable %v but reads back %v", ErrBusy, on, sb.SecureBootEnable)
	}
	return nil
}

// BootMode implements BootModeSetter: the boot flags' EFI bit.
func (d *ipmiDriver) BootMode(ctx context.Context) (BootMode, error) {
	bs, err := d.GetBootDevice(ctx)
	return bs.Mode, err
}

// SetBootMode implements BootModeSetter: the boot flags are written again
// with the EFI bit set or cleared, keeping the device selector and its
// persistence (IPMI keeps the mode only with a boot device). A BMC that
// drops the bit is logged, not failed: IPMI has no other way to say it.
func (d *ipmiDriver) SetBootMode(ctx context.Context, mode BootMode) error {
	if mode != BootModeUEFI && mode != BootModeBIOS {
		return fmt.Errorf("set boot mode: %w: boot mode %q", ErrUnsupported, mode)
	}
	bootType := types.BIOSBootTypeLegacy
	if mode == BootModeUEFI {
		bootType = types.BIOSBootTypeEFI
	}
	return d.session(ctx, "set boot mode "+string(mode), func(c *client.Client) error {
		flags := &types.BootOptionParam_BootFlags{}
		if err := c.GetSystemBootOptionsParamFor(ctx, flags); err != nil {
			return err
		}
		if err := c.SetBootDevice(ctx, flags.BootDeviceSelector, bootType, flags.Persist); err != nil {
			return err
		}
		if got, err := readBoot(ctx, c); err == nil && got.Mode != mode {
			// ipmi_sim and some BMCs keep only the device; the mode is
			// sent again with every boot device the workflows set.
			d.log.Warn("BMC did not keep the boot flags' EFI bit", "asked", mode, "kept", got.Mode)
		}
		return nil
	})
}
