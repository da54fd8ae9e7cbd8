package bmc

import (
	"context"
	"fmt"
	"net"
)

// GraphicalConsole is a driver that can say where the BMC serves the
// machine's graphical console as a plain VNC (RFB) server. Callers assert
// it on a Driver (docs/console.md, "The BMC side").
type GraphicalConsole interface {
	// GraphicalConsoleAddress answers the VNC server's host:port.
	GraphicalConsoleAddress(ctx context.Context) (string, error)
}

// rfManagerConsole is what a Manager says of its graphical console: the
// Redfish Manager schema's GraphicalConsole (whether the service is on) and,
// since Redfish has no property for where a KVM-IP service listens, the
// address in Oem.Ironflow.VNCAddress (ironflow vbmc's Manager).
type rfManagerConsole struct {
	GraphicalConsole struct {
		ServiceEnabled bool
	}
	Oem struct {
		Ironflow struct {
			VNCAddress string
		}
	}
}

// GraphicalConsoleAddress reads the system's managers (Links.ManagedBy, in
// order) and answers the first one's VNC address whose graphical console
// service is enabled.
func (d *redfishDriver) GraphicalConsoleAddress(ctx context.Context) (string, error) {
	c, err := d.call(ctx)
	if err != nil {
		return "", err
	}
	s, err := d.system(c)
	if err != nil {
		return "", err
	}
	for _, m := range s.managedBy {
		var mgr rfManagerConsole
		if err := getJSON(c, m, &mgr); err != nil {
			return "", fmt.Errorf("read manager %s: %w", m, err)
		}
		addr := mgr.Oem.Ironflow.VNCAddress
		if !mgr.GraphicalConsole.ServiceEnabled || addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", fmt.Errorf("%w: manager %s: Oem.Ironflow.VNCAddress %q is not host:port", ErrUnsupported, m, addr)
		}
		return addr, nil
	}
	return "", fmt.Errorf("%w: no manager of the system announces a VNC address (GraphicalConsole.ServiceEnabled with Oem.Ironflow.VNCAddress)", ErrUnsupported)
}
