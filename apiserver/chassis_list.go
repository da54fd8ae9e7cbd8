package apiserver

import (
	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

func (s *server) listChassis(c *gin.Context) error { return s.writeChassisList(c, "chassis", false) }

func (s *server) listChassisDetail(c *gin.Context) error {
	return s.writeChassisList(c, "chassis/detail", true)
}

func (s *server) writeChassisList(c *gin.Context, path string, detailPath bool) error {
	p, err := s.parseListParams(c, chassisResource.fieldSince)
	if err != nil {
		return err
	}
	f := store.ChassisFilter{Limit: p.limit, Marker: p.marker, SortKey: p.sortKey, SortDir: p.sortDir}
	q, err := chassisResource.listFilters(c, &f)
	if err != nil {
		return err
	}
	if !chassisResource.sortable(p.sortKey) {
		return listError(store.ErrInvalidSortKey, p)
	}
	list, err := s.store.ListChassis(c.Request.Context(), f)
	if err != nil {
		return listError(err, p)
	}
	writePage(s, c, chassisResource, "chassis", path, list, func(ch *store.Chassis) string { return ch.UUID }, p, q, detailPath, chassisDefaultFields)
	return nil
}

// listChassisNodes answers GET /v1/chassis/{id}/nodes[/detail]: the node
// list restricted to the chassis.
func (s *server) listChassisNodes(c *gin.Context, ch *store.Chassis) error {
	return s.writeNodeListOf(c, "chassis/"+ch.UUID+"/nodes", false, ch.UUID)
}

func (s *server) listChassisNodesDetail(c *gin.Context, ch *store.Chassis) error {
	return s.writeNodeListOf(c, "chassis/"+ch.UUID+"/nodes/detail", true, ch.UUID)
}

// checkChassisFilter answers Ironic's 404 for a ?chassis_uuid= that names
// no chassis.
func (s *server) checkChassisFilter(c *gin.Context, f *store.NodeFilter) error {
	if f.ChassisUUID == "" {
		return nil
	}
	if _, err := s.store.GetChassis(c.Request.Context(), f.ChassisUUID); err != nil {
		return chassisWriteError(err, &store.Chassis{UUID: f.ChassisUUID})
	}
	return nil
}
