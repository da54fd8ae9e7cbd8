package apiserver

import (
	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

func (s *server) listNodes(c *gin.Context) error {
	return s.writeNodeList(c, "nodes", false)
}

func (s *server) listNodesDetail(c *gin.Context) error {
	return s.writeNodeList(c, "nodes/detail", true)
}

func (s *server) writeNodeList(c *gin.Context, path string, detailPath bool) error {
	return s.writeNodeListOf(c, path, detailPath, "")
}

// writeNodeListOf answers a node list; chassisUUID restricts it to a
// chassis (/v1/chassis/{id}/nodes).
func (s *server) writeNodeListOf(c *gin.Context, path string, detailPath bool, chassisUUID string) error {
	p, err := s.parseListParams(c, nodeResource.fieldSince)
	if err != nil {
		return err
	}
	if c.Query("detail") != "" && !detailPath {
		if ver(c) < v43NodeDetail {
			return notAcceptable()
		}
	}
	var f store.NodeFilter
	q, err := nodeResource.listFilters(c, &f)
	if err != nil {
		return err
	}
	// The keystone strategy's policy narrows a project's list (policy_routes.go).
	f.Project = c.GetString(ctxListProject)
	if err := s.childrenFilter(c, &f, q); err != nil {
		return err
	}
	if chassisUUID != "" {
		f.ChassisUUID = chassisUUID
	} else if err := s.checkChassisFilter(c, &f); err != nil {
		return err
	}
	// ?conductor= (1.49): the nodes a conductor serves (conductors.go).
	conductor, byConductor := c.GetQuery("conductor")
	if byConductor && ver(c) < v49Conductors {
		return notAcceptable()
	}
	byConductor = byConductor && conductor != ""
	detail := detailPath || p.detail
	fields := p.fields
	if !detail && fields == nil {
		fields = nodeDefaultFields
	}
	f.Limit, f.Marker, f.SortKey, f.SortDir = p.limit, p.marker, p.sortKey, p.sortDir
	if fields != nil {
		f.Fields = nodeResource.columns(fields)
		if byConductor || showsConductor(ver(c), fields) {
			f.Fields = append(f.Fields, "driver", "conductor_group")
		}
	}
	if !nodeResource.sortable(p.sortKey) {
		return listError(store.ErrInvalidSortKey, p)
	}
	nodes, err := s.store.ListNodes(c.Request.Context(), f)
	if err != nil {
		return listError(err, p)
	}
	v, err := s.nodeView(c, fields)
	if err != nil {
		return err
	}
	if byConductor {
		if v.ring == nil {
			if v.ring, err = s.conductorRing(c.Request.Context()); err != nil {
				return err
			}
		}
		nodes = filterByConductor(nodes, v.ring, conductor)
		q.Set("conductor", conductor)
	}
	next := ""
	if len(nodes) == p.limit && len(nodes) > 0 {
		next = nextLink(v.base, path, p, fields, q, nodes[len(nodes)-1].UUID, !detailPath && p.detail)
	}
	s.sanitizeNodes(c, nodes...) // keystone strategy: policy_view.go
	writeList(c, nodeResource, "nodes", nodes, v, fields, next)
	return nil
}
