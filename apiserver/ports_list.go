package apiserver

import (
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

func (s *server) listPorts(c *gin.Context) error { return s.writePortList(c, "ports", false, "", "") }

func (s *server) listPortsDetail(c *gin.Context) error {
	return s.writePortList(c, "ports/detail", true, "", "")
}

func (s *server) listNodePorts(c *gin.Context, n *store.Node) error {
	return s.writePortList(c, "nodes/"+n.UUID+"/ports", false, n.UUID, "")
}

func (s *server) listNodePortsDetail(c *gin.Context, n *store.Node) error {
	return s.writePortList(c, "nodes/"+n.UUID+"/ports/detail", true, n.UUID, "")
}

func (s *server) listPortgroupPorts(c *gin.Context, g *store.Portgroup) error {
	return s.writePortList(c, "portgroups/"+g.UUID+"/ports", false, "", g.UUID)
}

func (s *server) listPortgroupPortsDetail(c *gin.Context, g *store.Portgroup) error {
	return s.writePortList(c, "portgroups/"+g.UUID+"/ports/detail", true, "", g.UUID)
}

// writePortList answers a list of ports: all, a node's (nodeUUID) or a
// port group's (groupUUID).
func (s *server) writePortList(c *gin.Context, path string, detailPath bool, nodeUUID, groupUUID string) error {
	p, err := s.parseListParams(c, portResource.fieldSince)
	if err != nil {
		return err
	}
	f := store.PortFilter{NodeUUID: nodeUUID, Project: c.GetString(ctxListProject), PortgroupUUID: groupUUID, Limit: p.limit, Marker: p.marker, SortKey: p.sortKey, SortDir: p.sortDir}
	q := url.Values{}
	// ?portgroup= (UUID or name, API 1.24) selects a group's ports.
	if ident, ok := c.GetQuery("portgroup"); ok && ident != "" && groupUUID == "" {
		if ver(c) < v24PortgroupSub {
			return notAcceptable()
		}
		g, err := s.loadPortgroupIdent(c, ident)
		if err != nil {
			return err
		}
		f.PortgroupUUID = g.UUID
		q.Set("portgroup", g.UUID)
	}
	if nodeUUID == "" {
		ident := c.Query("node")
		if ident == "" {
			ident = c.Query("node_uuid")
		}
		if ident != "" {
			n, err := s.loadNode(c, ident)
			if err != nil {
				return err
			}
			f.NodeUUID = n.UUID
			q.Set("node", n.UUID)
		}
	}
	filters, err := portResource.listFilters(c, &f)
	if err != nil {
		return err
	}
	if len(f.ConductorGroups) > 0 && (f.NodeUUID != "" || f.PortgroupUUID != "" || f.Address != "") {
		return badRequest("Filtering by conductor_groups cannot be combined with node_ident, portgroup_ident, or node address filters.")
	}
	for k := range filters {
		q.Set(k, filters.Get(k))
	}
	if !portResource.sortable(p.sortKey) {
		return listError(store.ErrInvalidSortKey, p)
	}
	ports, err := s.store.ListPorts(c.Request.Context(), f)
	if err != nil {
		return listError(err, p)
	}
	writePage(s, c, portResource, "ports", path, ports, func(port *store.Port) string { return port.UUID }, p, q, detailPath, portDefaultFields)
	return nil
}
