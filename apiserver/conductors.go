package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

// Conductors (API 1.49) are the registered workers (worker.Announce): each
// heartbeats into the store, and is alive while online with a heartbeat
// within Config.ConductorHeartbeatTimeout, as Ironic computes "alive".

// conductorView is a conductor with its liveness as of the request.
type conductorView struct {
	c     *store.Conductor
	alive bool
}

type conductorField = field[conductorView, store.ConductorFilter]

var conductorFields = []conductorField{
	{name: "created_at", since: v49Conductors, value: shown(func(c *conductorView, _ viewCtx) any { return isoTime(c.c.CreatedAt) }), sortable: true},
	{name: "updated_at", since: v49Conductors, value: shown(func(c *conductorView, _ viewCtx) any { return isoTime(c.c.UpdatedAt) }), sortable: true},
	{name: "hostname", since: v49Conductors, value: shown(func(c *conductorView, _ viewCtx) any { return c.c.Hostname }), sortable: true},
	// A worker may serve several groups (Ironic's conductor serves one):
	// they are shown comma-separated, which no group name contains.
	{name: "conductor_group", since: v49Conductors, value: shown(func(c *conductorView, _ viewCtx) any { return strings.Join(c.c.ConductorGroups, ",") }), sortable: true},
	{name: "drivers", since: v49Conductors, value: shown(func(c *conductorView, _ viewCtx) any {
		if c.c.Drivers == nil {
			return []string{}
		}
		return c.c.Drivers
	})},
	{name: "links", since: v49Conductors, value: links(func(c *conductorView) string { return "conductors/" + c.c.Hostname })},
	{name: "alive", since: v49Conductors, value: computed(func(c *conductorView, _ viewCtx) any { return c.alive })},
}

var conductorResource = newResource("conductor", conductorFields, nil)

// conductorDefaultFields: Ironic's DEFAULT_RETURN_FIELDS of a list.
var conductorDefaultFields = []string{"hostname", "conductor_group", "alive"}

func (s *server) viewConductor(c *store.Conductor, now time.Time) *conductorView {
	return &conductorView{c: c, alive: c.Alive(now, s.cfg.ConductorHeartbeatTimeout)}
}

func conductorNotFound(hostname string) *apiError {
	return errorf(http.StatusNotFound, "Conductor %s could not be found.", hostname)
}

func (s *server) listConductors(c *gin.Context) error {
	p, err := s.parseListParams(c, conductorResource.fieldSince)
	if err != nil {
		return err
	}
	if !conductorResource.sortable(p.sortKey) {
		return listError(store.ErrInvalidSortKey, p)
	}
	rows, err := s.store.ListConductors(c.Request.Context(), store.ConductorFilter{
		Limit: p.limit, Marker: p.marker, SortKey: p.sortKey, SortDir: p.sortDir})
	if errors.Is(err, store.ErrMarkerNotFound) {
		return conductorNotFound(p.marker)
	}
	if err != nil {
		return listError(err, p)
	}
	now := time.Now()
	views := make([]*conductorView, len(rows))
	for i, r := range rows {
		views[i] = s.viewConductor(r, now)
	}
	fields := p.fields
	if !p.detail && fields == nil {
		fields = conductorDefaultFields
	}
	v := viewCtx{minor: ver(c), base: s.baseURL(c)}
	next := ""
	if len(rows) == p.limit && len(rows) > 0 {
		next = nextLink(v.base, "conductors", p, p.fields, url.Values{}, url.QueryEscape(rows[len(rows)-1].Hostname), p.detail)
	}
	writeList(c, conductorResource, "conductors", views, v, fields, next)
	return nil
}

func (s *server) showConductor(c *gin.Context) error {
	p, err := s.parseListParams(c, conductorResource.fieldSince)
	if err != nil {
		return err
	}
	host := c.Param("name")
	row, err := s.store.GetConductor(c.Request.Context(), host)
	if errors.Is(err, store.ErrNotFound) {
		return conductorNotFound(host)
	}
	if err != nil {
		return fmt.Errorf("get conductor %s: %w", host, err)
	}
	conductorResource.writeOne(c, s.baseURL(c), http.StatusOK, s.viewConductor(row, time.Now()), p.fields)
	return nil
}

// conductorRing picks the conductor a node shows (its "conductor" field,
// the ?conductor= filter): among the live conductors that serve the node's
// conductor group and run its driver, the one a hash of the node's UUID
// selects over their sorted hostnames. Ironic picks with a consistent hash
// ring; any deterministic choice serves the same purpose, since a node's
// hardware activities go to its group's task queue, which every one of
// those workers polls.
type conductorRing struct {
	hosts map[string][]string // group + "\x00" + driver: sorted hostnames
}

func ringKey(group, driver string) string { return group + "\x00" + driver }

// conductorRing reads the live conductors.
func (s *server) conductorRing(ctx context.Context) (*conductorRing, error) {
	live, err := s.store.LiveConductors(ctx, s.cfg.ConductorHeartbeatTimeout)
	if err != nil {
		return nil, fmt.Errorf("read conductors: %w", err)
	}
	r := &conductorRing{hosts: map[string][]string{}}
	for _, c := range live { // sorted by hostname
		for _, g := range c.ConductorGroups {
			for _, d := range c.Drivers {
				k := ringKey(strings.ToLower(g), d)
				r.hosts[k] = append(r.hosts[k], c.Hostname)
			}
		}
	}
	return r, nil
}

// pick is the hostname serving n, or nil when no live conductor does.
func (r *conductorRing) pick(n *store.Node) any {
	if r == nil {
		return nil
	}
	hosts := r.hosts[ringKey(n.ConductorGroup, n.Driver)]
	if len(hosts) == 0 {
		return nil
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(n.UUID))
	return hosts[h.Sum32()%uint32(len(hosts))]
}

// showsConductor reports whether a node view of version minor with fields
// (nil: all) shows the conductor field, so that the ring is read only then.
func showsConductor(minor int, fields []string) bool {
	if minor < v49Conductors {
		return false
	}
	if fields == nil {
		return true
	}
	for _, f := range fields {
		if f == "conductor" {
			return true
		}
	}
	return false
}

// nodeView is the view context of nodes shown with fields.
func (s *server) nodeView(c *gin.Context, fields []string) (viewCtx, error) {
	v := viewCtx{minor: ver(c), base: s.baseURL(c)}
	if showsConductor(v.minor, fields) {
		ring, err := s.conductorRing(c.Request.Context())
		if err != nil {
			return v, err
		}
		v.ring = ring
	}
	return v, nil
}

// writeNodeView answers one node rendered in v.
func writeNodeView(c *gin.Context, status int, n *store.Node, v viewCtx, fields []string) {
	var buf bytes.Buffer
	nodeResource.write(&buf, n, v, newFieldSet(fields))
	writeRawBytes(c, status, buf.Bytes())
}

// filterByConductor keeps the nodes that conductor serves, as Ironic's
// _filter_by_conductor does to the page it read.
func filterByConductor(nodes []*store.Node, ring *conductorRing, conductor string) []*store.Node {
	out := nodes[:0]
	for _, n := range nodes {
		if ring.pick(n) == any(conductor) {
			out = append(out, n)
		}
	}
	return out
}
