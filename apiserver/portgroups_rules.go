package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/store"
)

// Ironic's flat network interface (its Neutron VIF mixin's port_changed and
// portgroup_changed) keeps ports that could boot or carry a VIF on their
// own out of a port group that does not support standalone ports. noop
// checks nothing.

// checkPortInGroup refuses p (being created, or as a PATCH leaves it) when
// it joins or stays in such a group with PXE enabled or a VIF attached.
// changed says whether the PATCH touched pxe_enabled or portgroup_uuid.
func (s *server) checkPortInGroup(ctx context.Context, p *store.Port, changed bool) error {
	if p.PortgroupUUID == nil {
		return nil
	}
	vif := vifOf(p.InternalInfo, p.Extra)
	if !changed && vif == "" {
		return nil
	}
	n, err := s.store.GetNode(ctx, p.NodeUUID)
	if err != nil || !hardware.NetworkOf(networkInterface(n)).RecordsVIFs() {
		return nil // an unknown node is the store's error to report
	}
	g, err := s.store.GetPortgroup(ctx, *p.PortgroupUUID)
	if err != nil || g.StandalonePortsSupported {
		return nil // an unknown group likewise
	}
	var reason []string
	if p.PXEEnabled {
		reason = append(reason, "'pxe_enabled' was set to True")
	}
	if vif != "" {
		reason = append(reason, "VIF "+vif+" is attached to the port")
	}
	if len(reason) == 0 {
		return nil
	}
	return errorf(http.StatusConflict, "Port group %s doesn't support standalone ports. This port %s cannot be  a member of that port group because of: %s",
		g.UUID, p.UUID, strings.Join(reason, ", "))
}

// checkStandalonePorts refuses turning standalone_ports_supported off on a
// group of a flat node whose ports have PXE enabled or a VIF.
func (s *server) checkStandalonePorts(ctx context.Context, g *store.Portgroup) error {
	n, err := s.store.GetNode(ctx, g.NodeUUID)
	if err != nil {
		return fmt.Errorf("get node %s: %w", g.NodeUUID, err)
	}
	if !hardware.NetworkOf(networkInterface(n)).RecordsVIFs() {
		return nil
	}
	ports, err := s.store.ListPorts(ctx, store.PortFilter{PortgroupUUID: g.UUID})
	if err != nil {
		return fmt.Errorf("list ports of portgroup %s: %w", g.UUID, err)
	}
	for _, p := range ports {
		var reason []string
		if p.PXEEnabled {
			reason = append(reason, "'pxe_enabled' is set to True")
		}
		if vif := vifOf(p.InternalInfo, p.Extra); vif != "" {
			reason = append(reason, "VIF "+vif+" is attached to this port")
		}
		if len(reason) > 0 {
			return errorf(http.StatusConflict, "standalone_ports_supported can not be set to False, because the port group %s contains port with %s",
				g.UUID, strings.Join(reason, ", "))
		}
	}
	return nil
}
