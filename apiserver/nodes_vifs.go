package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
)

// VIFs (API 1.28) are the tenant network ports (Neutron's) a node's ports
// and port groups are attached to, as Ironic's network interfaces record
// them: "flat" keeps the VIF's id in the port's (or group's)
// internal_info.tenant_vif_port_id; "noop" accepts attach and detach and
// lists nothing. ironflow has no Neutron to bind ports in, so attach and
// detach are store writes only; they are allowed while a workflow runs
// (README.md, "Port groups and VIFs").

// tenantVIFKey is Ironic's TENANT_VIF_KEY; extra.vif_port_id is the key
// older Nova wrote, which Ironic still reads.
const (
	tenantVIFKey   = "tenant_vif_port_id"
	legacyVIFKey   = "vif_port_id"
	vifTargetPort  = "port_uuid"
	vifTargetGroup = "portgroup_uuid"
)

// networkInterface is the node's network interface, its driver's default
// when unset.
func networkInterface(n *store.Node) hardware.Interface {
	if n.NetworkInterface != "" {
		return hardware.Interface(n.NetworkInterface)
	}
	if ht, ok := hardware.Lookup(n.Driver); ok {
		return ht.Default(hardware.KindNetwork)
	}
	return hardware.Noop
}

// vifOf is the VIF attached to a port or group.
func vifOf(internal, extra map[string]any) string {
	if v, _ := internal[tenantVIFKey].(string); v != "" {
		return v
	}
	v, _ := extra[legacyVIFKey].(string)
	return v
}

func (s *server) listVIFs(c *gin.Context, n *store.Node) error {
	vifs := []map[string]string{}
	if hardware.NetworkOf(networkInterface(n)).RecordsVIFs() {
		ctx := c.Request.Context()
		ports, err := s.store.ListPorts(ctx, store.PortFilter{NodeUUID: n.UUID})
		if err != nil {
			return fmt.Errorf("list ports of node %s: %w", n.UUID, err)
		}
		groups, err := s.store.ListPortgroups(ctx, store.PortgroupFilter{NodeUUID: n.UUID})
		if err != nil {
			return fmt.Errorf("list portgroups of node %s: %w", n.UUID, err)
		}
		// Ironic's vif_list: ports, then port groups.
		for _, p := range ports {
			if v := vifOf(p.InternalInfo, p.Extra); v != "" {
				vifs = append(vifs, map[string]string{"id": v})
			}
		}
		for _, g := range groups {
			if v := vifOf(g.InternalInfo, g.Extra); v != "" {
				vifs = append(vifs, map[string]string{"id": v})
			}
		}
	}
	writeJSON(c, http.StatusOK, map[string]any{"vifs": vifs})
	return nil
}

// vifRequest is a VIF attach body.
type vifRequest struct {
	id, port, group string
}

func parseVIF(body map[string]any, minor int) (vifRequest, error) {
	raw, ok := body["id"]
	if !ok {
		return vifRequest{}, badRequest("Schema error for vif: 'id' is a required property")
	}
	id, ok := raw.(string)
	if !ok {
		return vifRequest{}, badRequest("Schema error for vif: %s is not of type 'string'", pyliteral.Repr(raw))
	}
	if !validVIFID(id) {
		return vifRequest{}, badRequest("Expected a logical name or UUID but received %s.", id)
	}
	r := vifRequest{id: id}
	if minor < v67VIFAttachPort {
		return r, nil
	}
	_, hasPort := body[vifTargetPort]
	_, hasGroup := body[vifTargetGroup]
	if hasPort && hasGroup {
		return r, badRequest("Cannot specify both port_uuid and portgroup_uuid")
	}
	r.port, _ = body[vifTargetPort].(string)
	r.group, _ = body[vifTargetGroup].(string)
	r.port, r.group = strings.ToLower(r.port), strings.ToLower(r.group)
	return r, nil
}

// validVIFID is Ironic's uuid_or_name for a VIF id.
func validVIFID(id string) bool { return isUUID(id) || nodeNameRE.MatchString(id) }

func (s *server) attachVIF(c *gin.Context, n *store.Node) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	req, err := parseVIF(body, ver(c))
	if err != nil {
		return err
	}
	if !hardware.NetworkOf(networkInterface(n)).RecordsVIFs() {
		writeEmpty(c, http.StatusNoContent, "")
		return nil
	}
	err = s.store.UpdateNodeNetwork(c.Request.Context(), n.UUID, func(ports []*store.Port, groups []*store.Portgroup) error {
		return attachVIFTo(ports, groups, req)
	})
	if err != nil {
		return vifWriteError(err, n)
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}

func (s *server) detachVIF(c *gin.Context, n *store.Node) error {
	vif := c.Param("vif")
	if !validVIFID(vif) {
		return badRequest("Expected a logical name or UUID but received %s.", vif)
	}
	if !hardware.NetworkOf(networkInterface(n)).RecordsVIFs() {
		writeEmpty(c, http.StatusNoContent, "")
		return nil
	}
	err := s.store.UpdateNodeNetwork(c.Request.Context(), n.UUID, func(ports []*store.Port, groups []*store.Portgroup) error {
		return detachVIFFrom(n.UUID, ports, groups, vif)
	})
	if err != nil {
		return vifWriteError(err, n)
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}

func vifWriteError(err error, n *store.Node) error {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	if errors.Is(err, store.ErrNotFound) {
		return nodeNotFound(n.UUID)
	}
	return fmt.Errorf("VIFs of node %s: %w", n.UUID, err)
}

// portLike is a port or a port group, as Ironic's network interfaces
// handle them alike.
type portLike struct {
	uuid     string
	group    bool
	pxe      bool
	internal *map[string]any
}

// attachVIFTo records req's VIF on the port or group Ironic's flat
// interface picks (get_free_port_like_object in Ironic's network common
// module): a port or group that already has the VIF is a conflict; a group
// is usable if none of its ports has a VIF and it has ports; the ports of
// an unusable group are candidates on their own, as are ports in no group;
// groups are preferred to ports, PXE-enabled ports to others, and among
// equals the first (ports in id order, then groups). With port_uuid or
// portgroup_uuid (API 1.67) only that object is a candidate.
func attachVIFTo(ports []*store.Port, groups []*store.Portgroup, req vifRequest) error {
	for _, p := range ports {
		if vifOf(p.InternalInfo, p.Extra) == req.id {
			return vifAlreadyAttached(req.id, "Port", p.UUID)
		}
	}
	for _, g := range groups {
		if vifOf(g.InternalInfo, g.Extra) == req.id {
			return vifAlreadyAttached(req.id, "Portgroup", g.UUID)
		}
	}
	if req.port != "" && !hasPort(ports, req.port) {
		return errorf(http.StatusNotFound, "Port %s could not be found.", req.port)
	}
	if req.group != "" && !hasGroup(groups, req.group) {
		return portgroupNotFound(req.group)
	}
	free := map[string][]portLike{}
	unusable := map[string]bool{}
	var candidates []portLike
	for _, p := range ports {
		pl := portLike{uuid: p.UUID, pxe: p.PXEEnabled, internal: &p.InternalInfo}
		if vifOf(p.InternalInfo, p.Extra) != "" {
			if p.PortgroupUUID != nil {
				unusable[*p.PortgroupUUID] = true
			}
			continue
		}
		if p.PortgroupUUID == nil {
			candidates = append(candidates, pl)
		} else {
			free[*p.PortgroupUUID] = append(free[*p.PortgroupUUID], pl)
		}
	}
	for _, g := range groups {
		if vifOf(g.InternalInfo, g.Extra) != "" {
			continue
		}
		if unusable[g.UUID] {
			candidates = append(candidates, free[g.UUID]...)
		} else if len(free[g.UUID]) > 0 {
			candidates = append(candidates, portLike{uuid: g.UUID, group: true, pxe: true, internal: &g.InternalInfo})
		}
	}
	if req.port != "" || req.group != "" {
		want := req.port + req.group
		var only []portLike
		for _, pl := range candidates {
			if pl.uuid == want && pl.group == (req.group != "") {
				only = append(only, pl)
			}
		}
		candidates = only
	}
	if len(candidates) == 0 {
		return badRequest("Unable to attach VIF %s, not enough free physical ports.", req.id)
	}
	rank := func(pl portLike) int {
		r := 0
		if pl.group {
			r += 2
		}
		if pl.pxe {
			r++
		}
		return r
	}
	sort.SliceStable(candidates, func(i, j int) bool { return rank(candidates[i]) > rank(candidates[j]) })
	chosen := candidates[0]
	if *chosen.internal == nil {
		*chosen.internal = map[string]any{}
	}
	(*chosen.internal)[tenantVIFKey] = req.id
	return nil
}

func vifAlreadyAttached(vif, kind, uuid string) *apiError {
	return errorf(http.StatusConflict, "Unable to attach VIF because VIF %s is already attached to Ironic %s %s", vif, kind, uuid)
}

func hasPort(ports []*store.Port, uuid string) bool {
	for _, p := range ports {
		if p.UUID == uuid {
			return true
		}
	}
	return false
}

func hasGroup(groups []*store.Portgroup, uuid string) bool {
	for _, g := range groups {
		if g.UUID == uuid {
			return true
		}
	}
	return false
}

// detachVIFFrom clears the VIF from the group or port that has it (groups
// first, as Ironic looks it up), from internal_info and the legacy extra
// key alike.
func detachVIFFrom(node string, ports []*store.Port, groups []*store.Portgroup, vif string) error {
	clear := func(internal, extra map[string]any) {
		delete(internal, tenantVIFKey)
		delete(extra, legacyVIFKey)
	}
	for _, g := range groups {
		if vifOf(g.InternalInfo, g.Extra) == vif {
			clear(g.InternalInfo, g.Extra)
			return nil
		}
	}
	for _, p := range ports {
		if vifOf(p.InternalInfo, p.Extra) == vif {
			clear(p.InternalInfo, p.Extra)
			return nil
		}
	}
	return badRequest("Unable to detach VIF %s from node %s because it is not attached to it.", vif, node)
}
