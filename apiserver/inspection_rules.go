package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/inspection/rules"
	"github.com/ironflow/ironflow/store"
)

// Inspection rules (API 1.96, Ironic's inspection_rule.py): the field
// table for views and ?fields=, and the handlers. Bodies are validated by
// inspection/rules (Ironic's schema and validate_rule, with their
// messages) before anything is stored; the rules run during inspection
// (activities/inspect_apply.go, docs/inspection.md).

// v96InspectionRules is Ironic's MINOR_96_INSPECTION_RULES.
const v96InspectionRules = 96

type (
	inspectionRule      = store.InspectionRule
	inspectionRuleQuery = store.InspectionRuleFilter
	inspectionRuleField = field[inspectionRule, inspectionRuleQuery]
)

var inspectionRuleFields = []inspectionRuleField{
	{name: "created_at", since: v96InspectionRules, value: timestamp(func(r *inspectionRule) time.Time { return r.CreatedAt }), sortable: true},
	{name: "updated_at", since: v96InspectionRules, value: optTime(func(r *inspectionRule) *time.Time { return r.UpdatedAt }), sortable: true},
	{name: "uuid", since: v96InspectionRules, value: shown(func(r *inspectionRule, _ viewCtx) any { return r.UUID }), sortable: true},
	{name: "description", since: v96InspectionRules, value: shown(func(r *inspectionRule, _ viewCtx) any { return strOrNil(r.Description) }), sortable: true},
	{name: "phase", since: v96InspectionRules, value: shown(func(r *inspectionRule, _ viewCtx) any { return r.Phase }), sortable: true},
	{name: "priority", since: v96InspectionRules, value: shown(func(r *inspectionRule, _ viewCtx) any { return int64(r.Priority) }), sortable: true},
	{name: "sensitive", since: v96InspectionRules, value: shown(func(r *inspectionRule, _ viewCtx) any { return r.Sensitive }), sortable: true},
	{name: "conditions", since: v96InspectionRules, value: shown(func(r *inspectionRule, _ viewCtx) any {
		return ruleOps(r, r.Conditions, true)
	})},
	{name: "actions", since: v96InspectionRules, value: shown(func(r *inspectionRule, _ viewCtx) any {
		return ruleOps(r, r.Actions, false)
	})},
	{name: "links", since: v96InspectionRules, value: links(func(r *inspectionRule) string { return "inspection_rules/" + r.UUID })},
}

var inspectionRuleResource = newResource("inspection_rule", inspectionRuleFields, nil)

// inspectionRuleDefaultFields: a list without detail, Ironic's
// DEFAULT_RETURN_FIELDS.
var inspectionRuleDefaultFields = []string{"uuid", "priority", "phase", "description"}

// ruleOps is a rule's conditions or actions as Ironic shows them
// (convert_conditions, convert_actions): op and args, loop when set, a
// condition's multiple with its loop; null for a sensitive rule.
func ruleOps(r *inspectionRule, ops []map[string]any, condition bool) any {
	if r.Sensitive {
		return nil
	}
	out := make([]any, 0, len(ops))
	for _, o := range ops {
		m := map[string]any{"op": o["op"], "args": deepCopy(o["args"])}
		if loop, ok := o["loop"]; ok && nonEmpty(loop) {
			m["loop"] = deepCopy(loop)
			if condition {
				multiple := o["multiple"]
				if multiple == nil {
					multiple = "any"
				}
				m["multiple"] = multiple
			}
		}
		out = append(out, m)
	}
	return out
}

func nonEmpty(v any) bool {
	switch t := v.(type) {
	case []any:
		return len(t) > 0
	case map[string]any:
		return len(t) > 0
	}
	return v != nil
}

func inspectionRuleNotFound(id string) *apiError {
	return errorf(http.StatusNotFound, "Rule %s could not be found.", id)
}

func (s *server) loadInspectionRule(c *gin.Context) (*inspectionRule, error) {
	id := c.Param("uuid")
	if !isUUID(id) {
		return nil, badRequest("Expected a UUID but received %s.", id)
	}
	r, err := s.store.GetInspectionRule(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, inspectionRuleNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get inspection rule %s: %w", id, err)
	}
	return r, nil
}

func (s *server) showInspectionRule(c *gin.Context) error {
	return showOne(s, c, inspectionRuleResource, s.loadInspectionRule)
}

// listInspectionRules answers GET /v1/inspection_rules: a page, ?phase=,
// ?fields= or ?detail=, sorted by any field but conditions and actions.
func (s *server) listInspectionRules(c *gin.Context) error {
	p, err := s.parseListParams(c, inspectionRuleResource.fieldSince)
	if err != nil {
		return err
	}
	if p.sortKey == "conditions" || p.sortKey == "actions" || !inspectionRuleResource.sortable(p.sortKey) {
		return badRequest("The sort_key value %s is an invalid field for sorting", p.sortKey)
	}
	if p.marker != "" && !isUUID(p.marker) {
		return inspectionRuleNotFound(p.marker)
	}
	f := store.InspectionRuleFilter{Phase: c.Query("phase"), Limit: p.limit, Marker: p.marker, SortKey: p.sortKey, SortDir: p.sortDir}
	items, err := s.store.ListInspectionRules(c.Request.Context(), f)
	if errors.Is(err, store.ErrMarkerNotFound) {
		// Ironic loads the marker rule first: its not-found message.
		return inspectionRuleNotFound(p.marker)
	}
	if err != nil {
		return listError(err, p)
	}
	q := url.Values{}
	if f.Phase != "" {
		q.Set("phase", f.Phase)
	}
	writePage(s, c, inspectionRuleResource, "inspection_rules", "inspection_rules", items,
		func(r *inspectionRule) string { return r.UUID }, p, q, false, inspectionRuleDefaultFields)
	return nil
}

// ruleFromBody builds the stored rule from a validated body.
func ruleFromBody(r *inspectionRule, body map[string]any) {
	r.Description = nil
	if d, ok := body["description"].(string); ok {
		r.Description = &d
	}
	r.Phase = rules.PhaseMain
	if p, ok := body["phase"].(string); ok {
		r.Phase = p
	}
	r.Priority = 0
	if p, ok := body["priority"].(float64); ok {
		r.Priority = int(p)
	}
	r.Sensitive, _ = body["sensitive"].(bool)
	r.Conditions = objects(body["conditions"])
	r.Actions = objects(body["actions"])
}

// floats makes every number of a decoded body a float64, the one kind
// inspection/rules reads (as the rules read back from the store are).
func floats(v any) any {
	switch t := v.(type) {
	case json.Number:
		f, _ := t.Float64()
		return f
	case int64:
		return float64(t)
	case int:
		return float64(t)
	case map[string]any:
		for k, e := range t {
			t[k] = floats(e)
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = floats(e)
		}
		return t
	}
	return v
}

func objects(v any) []map[string]any {
	list, _ := v.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, it := range list {
		out = append(out, it.(map[string]any))
	}
	return out
}

// createInspectionRule answers POST /v1/inspection_rules: 201 with the
// rule, or Ironic's 400 before anything is stored.
func (s *server) createInspectionRule(c *gin.Context) error {
	raw, err := decodeObject(c)
	if err != nil {
		return err
	}
	body := floats(raw).(map[string]any)
	if err := rules.ValidateBody(body); err != nil {
		return badRequest("%s", err.Error())
	}
	r := &inspectionRule{}
	if u, ok := body["uuid"].(string); ok {
		if !isUUID(u) {
			return badRequest("Expected a UUID but received %s.", u)
		}
		r.UUID = strings.ToLower(u)
	}
	ruleFromBody(r, body)
	if err := s.store.CreateInspectionRule(c.Request.Context(), r); err != nil {
		if errors.Is(err, store.ErrDuplicateUUID) {
			return errorf(http.StatusConflict, "A rule with UUID %s already exists.", r.UUID)
		}
		return fmt.Errorf("create inspection rule: %w", err)
	}
	c.Header("Location", s.baseURL(c)+"/v1/inspection_rules/"+r.UUID)
	inspectionRuleResource.writeOne(c, s.baseURL(c), http.StatusCreated, r, nil)
	return nil
}

// ruleDocument is the rule as the body that would create it: what a PATCH
// applies to (Ironic's rpc_rule.as_dict()).
func ruleDocument(r *inspectionRule) map[string]any {
	doc := map[string]any{"uuid": r.UUID, "phase": r.Phase, "priority": float64(r.Priority), "sensitive": r.Sensitive,
		"conditions": deepCopy(toAnyList(r.Conditions)), "actions": deepCopy(toAnyList(r.Actions))}
	if r.Description != nil {
		doc["description"] = *r.Description
	} else {
		doc["description"] = nil
	}
	return doc
}

func toAnyList(l []map[string]any) []any {
	out := make([]any, len(l))
	for i, m := range l {
		out[i] = m
	}
	return out
}

// patchInspectionRule answers PATCH /v1/inspection_rules/{uuid}: the patch
// applied to the rule's document, which must then validate as a new
// rule's body would; a sensitive rule stays sensitive.
func (s *server) patchInspectionRule(c *gin.Context) error {
	raw, err := readBody(c)
	if err != nil {
		return err
	}
	ops, err := decodePatch(raw)
	if err != nil {
		return err
	}
	r, err := s.loadInspectionRule(c)
	if err != nil {
		return err
	}
	for _, op := range ops {
		root := strings.SplitN(op.Path[1:], "/", 2)[0]
		switch root {
		case "uuid", "created_at", "updated_at", "links":
			return badRequest("'%s' is an internal attribute and can not be updated", op.Path)
		}
		// Ironic refuses false; null and remove would unset it too.
		if op.Path == "/sensitive" && r.Sensitive && (op.Op == "remove" || op.Value != true) {
			return badRequest("Inspection rules cannot have the sensitive flag unset.")
		}
	}
	doc := ruleDocument(r)
	if err := applyPatch(doc, ops); err != nil {
		return err
	}
	delete(doc, "uuid")
	doc = floats(doc).(map[string]any)
	for k, v := range doc {
		if v == nil && k != "description" && k != "phase" && k != "sensitive" {
			delete(doc, k)
		}
	}
	if err := rules.ValidateBody(doc); err != nil {
		return badRequest("%s", err.Error())
	}
	ruleFromBody(r, doc)
	if err := s.store.UpdateInspectionRule(c.Request.Context(), r); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return inspectionRuleNotFound(r.UUID)
		}
		return fmt.Errorf("update inspection rule %s: %w", r.UUID, err)
	}
	inspectionRuleResource.writeOne(c, s.baseURL(c), http.StatusOK, r, nil)
	return nil
}

func (s *server) deleteInspectionRule(c *gin.Context) error {
	r, err := s.loadInspectionRule(c)
	if err != nil {
		return err
	}
	if err := s.store.DeleteInspectionRule(c.Request.Context(), r.UUID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return inspectionRuleNotFound(r.UUID)
		}
		return fmt.Errorf("delete inspection rule %s: %w", r.UUID, err)
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}

// deleteAllInspectionRules answers DELETE /v1/inspection_rules: every rule
// goes (Ironic's API reference: "Deletes all non-built-in inspection
// rules"; ironflow has no built-in rules).
func (s *server) deleteAllInspectionRules(c *gin.Context) error {
	if err := s.store.DeleteAllInspectionRules(c.Request.Context()); err != nil {
		return fmt.Errorf("delete inspection rules: %w", err)
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}
