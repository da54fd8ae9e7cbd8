package bmo

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// AccessDetails is what BMO derives from a host's BMC address
// (pkg/hardwareutils/bmc): the Ironic driver, the interfaces it sets at
// enrolment ("" leaves Ironic's default) and the driver_info.
type AccessDetails struct {
	Driver                                                              string
	BIOSInterface, BootInterface, FirmwareInterface                     string
	ManagementInterface, PowerInterface, RAIDInterface, VendorInterface string
	// NeedsMAC: the driver needs the host's boot MAC (redfish over iPXE).
	NeedsMAC bool
	// ISOImages: the driver boots ISO preprovisioning images (virtual
	// media); BMO then skips its busy-host limit and may send deploy_iso.
	ISOImages bool
	// driverInfo builds driver_info from the credentials.
	driverInfo func(user, password string) map[string]any
}

// DriverInfo is the driver_info BMO sends for the credentials.
func (a *AccessDetails) DriverInfo(user, password string) map[string]any {
	return a.driverInfo(user, password)
}

// ParseBMCAddress maps a BareMetalHost's spec.bmc.address to access
// details as BMO v0.13.2 does for the kinds this client knows:
//
//   - ipmi://host[:port] (port 623 by default): driver ipmi, boot ipxe,
//     raid no-raid; driver_info ipmi_address, ipmi_port (a string),
//     ipmi_username, ipmi_password, ipmi_priv_level ADMINISTRATOR.
//   - redfish[+http|+https]://host[:port]/path (https by default): driver redfish, boot ipxe, raid
//     and firmware redfish; driver_info redfish_address (scheme://host),
//     redfish_system_id (the path, unless empty or /redfish/v1),
//     redfish_username, redfish_password.
//   - redfish-virtualmedia+http(s)://...: the same with boot
//     redfish-virtual-media.
//
// BMO has no kind for Ironic's fake-hardware; "fake://name" is this
// client's, for tests on ironflow's fake-hardware type: driver
// fake-hardware, every interface left to Ironic's default, driver_info
// fake_id = name (the machine's name in ironflow's fake BMC).
func ParseBMCAddress(address string) (*AccessDetails, error) {
	scheme, rest, ok := strings.Cut(address, "://")
	if !ok {
		return nil, fmt.Errorf("failed to parse BMC address information: %q has no scheme", address)
	}
	switch scheme {
	case "ipmi":
		host, port := rest, "623"
		if h, p, err := net.SplitHostPort(rest); err == nil {
			host, port = h, p
		}
		return &AccessDetails{Driver: "ipmi", BootInterface: "ipxe", RAIDInterface: "no-raid",
			driverInfo: func(user, password string) map[string]any {
				return map[string]any{"ipmi_port": port, "ipmi_username": user, "ipmi_password": password,
					"ipmi_address": host, "ipmi_priv_level": "ADMINISTRATOR"}
			}}, nil
	case "redfish", "redfish+http", "redfish+https", "redfish-virtualmedia", "redfish-virtualmedia+http", "redfish-virtualmedia+https":
		kind, transport, ok := strings.Cut(scheme, "+")
		if !ok {
			transport = "https" // BMO's redfishDefaultScheme
		}
		u, err := url.Parse(transport + "://" + rest)
		if err != nil {
			return nil, fmt.Errorf("failed to parse BMC address information: %w", err)
		}
		a := &AccessDetails{Driver: "redfish", BootInterface: "ipxe", FirmwareInterface: "redfish", RAIDInterface: "redfish", NeedsMAC: true}
		if kind == "redfish-virtualmedia" {
			a.BootInterface, a.NeedsMAC, a.ISOImages = "redfish-virtual-media", false, true
		}
		address, path := transport+"://"+u.Host, u.Path
		a.driverInfo = func(user, password string) map[string]any {
			info := map[string]any{"redfish_username": user, "redfish_password": password, "redfish_address": address}
			if p := strings.Trim(path, "/"); p != "" && p != "redfish/v1" {
				info["redfish_system_id"] = path
			}
			return info
		}
		return a, nil
	case "fake":
		return &AccessDetails{Driver: "fake-hardware", driverInfo: func(string, string) map[string]any {
			return map[string]any{"fake_id": rest}
		}}, nil
	}
	return nil, fmt.Errorf("failed to parse BMC address information: unknown BMC type %q", scheme)
}
