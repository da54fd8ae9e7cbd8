package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

func (s *server) historyBody(c *gin.Context, nodeUUID string, e store.HistoryEvent, detail bool) map[string]any {
	m := map[string]any{
		"uuid":       e.UUID,
		"created_at": isoTime(e.CreatedAt),
		"severity":   e.Severity,
		"event":      e.Event,
		"links":      selfLinks(s.baseURL(c), "nodes/"+nodeUUID+"/history/"+e.UUID),
	}
	if detail {
		m["event_type"] = e.EventType
		m["conductor"] = e.Conductor
		m["user"] = nilIfEmpty(e.User)
		if ver(c) >= v113NodeHistoryProject {
			m["project"] = nilIfEmpty(e.Project)
		}
		if ver(c) >= v115NodeHistoryFields {
			m["state"] = strOrNil(e.State)
			m["target_provision_state"] = strOrNil(e.TargetProvisionState)
			var d any
			if e.DurationSeconds != nil {
				d = *e.DurationSeconds
			}
			m["duration_seconds"] = d
		}
	}
	return m
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (s *server) listHistory(c *gin.Context, n *store.Node) error {
	// `baremetal node history list --long` asks for /history/detail.
	detail := c.Param("event") == "detail"
	if v := c.Query("detail"); v != "" {
		var err error
		if detail, err = parseBool("detail", v); err != nil {
			return err
		}
	}
	limit := s.cfg.MaxLimit
	if v := c.Query("limit"); v != "" {
		l, err := strconv.Atoi(v)
		if err != nil {
			return badRequest("Invalid value for limit: %s", v)
		}
		if l <= 0 {
			return badRequest("Limit must be positive")
		}
		limit = min(l, s.cfg.MaxLimit)
	}
	events, err := s.store.ListHistory(c.Request.Context(), n.UUID)
	if err != nil {
		return fmt.Errorf("list history of node %s: %w", n.UUID, err)
	}
	// The history of a node is bounded (HistoryMaxEntries), so a page is cut
	// from the whole list: after the marker, at most limit events, with
	// Ironic's "next" link when more follow.
	if marker := c.Query("marker"); marker != "" {
		i := slices.IndexFunc(events, func(e store.HistoryEvent) bool { return e.UUID == marker })
		if i < 0 {
			return badRequest("Marker %s could not be found.", marker)
		}
		events = events[i+1:]
	}
	body := map[string]any{}
	if len(events) > limit {
		events = events[:limit]
		next := s.baseURL(c) + "/v1/nodes/" + n.UUID + "/history?limit=" + strconv.Itoa(limit) + "&marker=" + events[limit-1].UUID
		if detail {
			next += "&detail=True"
		}
		body["next"] = next
	}
	out := make([]any, 0, len(events))
	for _, e := range events {
		out = append(out, s.historyBody(c, n.UUID, e, detail))
	}
	body["history"] = out
	writeJSON(c, http.StatusOK, body)
	return nil
}

func (s *server) showHistory(c *gin.Context, n *store.Node) error {
	ev := c.Param("event")
	if ev == "detail" {
		return s.listHistory(c, n)
	}
	if !isUUID(ev) {
		return badRequest("Expected a UUID but received %s.", ev)
	}
	e, err := s.store.GetHistoryEvent(c.Request.Context(), n.UUID, ev)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "Node history record %s could not be found.", ev)
	}
	if err != nil {
		return fmt.Errorf("get history event %s of node %s: %w", ev, n.UUID, err)
	}
	writeJSON(c, http.StatusOK, s.historyBody(c, n.UUID, *e, true))
	return nil
}

// addHistory records an API-side event; a failure to record it does not
// fail the request it describes.
func (s *server) addHistory(c *gin.Context, nodeUUID, severity, eventType, event string) {
	err := s.store.AddHistory(c.Request.Context(), nodeUUID, store.HistoryEvent{
		Severity: severity, EventType: eventType, Event: event,
		Conductor: s.cfg.ConductorName, User: c.GetString(ctxUser), Project: requestProject(c),
	})
	if err != nil {
		s.log.WarnContext(c.Request.Context(), "record node history", "node", nodeUUID, "event_type", eventType, "err", err)
	}
}

// requestProject is the project of the request's keystone token (API
// 1.113's history project), empty under the other auth strategies.
func requestProject(c *gin.Context) string {
	if cr, ok := c.Get(ctxCreds); ok {
		if p, ok := cr.(*creds); ok && p != nil {
			return p.ProjectID
		}
	}
	return ""
}
