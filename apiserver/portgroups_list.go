package apiserver

import (
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

func (s *server) listPortgroups(c *gin.Context) error {
	return s.writePortgroupList(c, "portgroups", false, "")
}

func (s *server) listPortgroupsDetail(c *gin.Context) error {
	return s.writePortgroupList(c, "portgroups/detail", true, "")
}

func (s *server) listNodePortgroups(c *gin.Context, n *store.Node) error {
	return s.writePortgroupList(c, "nodes/"+n.UUID+"/portgroups", false, n.UUID)
}

func (s *server) listNodePortgroupsDetail(c *gin.Context, n *store.Node) error {
	return s.writePortgroupList(c, "nodes/"+n.UUID+"/portgroups/detail", true, n.UUID)
}

func (s *server) writePortgroupList(c *gin.Context, path string, detailPath bool, nodeUUID string) error {
	p, err := s.parseListParams(c, portgroupResource.fieldSince)
	if err != nil {
		return err
	}
	f := store.PortgroupFilter{NodeUUID: nodeUUID, Project: c.GetString(ctxListProject), Limit: p.limit, Marker: p.marker, SortKey: p.sortKey, SortDir: p.sortDir}
	q := url.Values{}
	if nodeUUID == "" {
		if ident := c.Query("node"); ident != "" {
			n, err := s.loadNode(c, ident)
			if err != nil {
				return err
			}
			f.NodeUUID = n.UUID
			q.Set("node", n.UUID)
		}
	}
	filters, err := portgroupResource.listFilters(c, &f)
	if err != nil {
		return err
	}
	if f.NodeUUID != "" && f.Address != "" {
		return badRequest("Filtering by node and address simultaneously is not supported.")
	}
	// From 1.99 and 1.106 Ironic takes one of node, address, shard and
	// conductor_groups, with the message of its newer controller.
	exclusive := 0
	for _, set := range []bool{f.NodeUUID != "", f.Address != "", len(f.Shards) > 0, len(f.ConductorGroups) > 0} {
		if set {
			exclusive++
		}
	}
	if exclusive > 1 {
		return badRequest("Filtering by node, address, or shard simultaneously is not supported.")
	}
	for k := range filters {
		q.Set(k, filters.Get(k))
	}
	if !portgroupResource.sortable(p.sortKey) {
		return listError(store.ErrInvalidSortKey, p)
	}
	groups, err := s.store.ListPortgroups(c.Request.Context(), f)
	if err != nil {
		return listError(err, p)
	}
	writePage(s, c, portgroupResource, "portgroups", path, groups, func(g *store.Portgroup) string { return g.UUID }, p, q, detailPath, portgroupDefaultFields)
	return nil
}
