package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

// Runbooks under the keystone strategy, as Ironic's runbook.py and the
// runbook helpers of its api/controllers/v1/utils.py: a runbook's rules
// are checked with its owner as "runbook.owner"; a caller the rule refuses
// still reads (GET) and uses (a provision request's runbook) a public
// runbook; a project-scoped creator's runbook is its project's.

// runbookTarget is the policy target of rb.
func runbookTarget(rb *store.Runbook) policyTarget {
	t := policyTarget{}
	if rb.Owner != nil {
		t["runbook.owner"] = *rb.Owner
	}
	return t
}

// loadRunbook finds the runbook ident names (UUID or name), with Ironic's
// RunbookNotFound.
func (s *server) loadRunbook(c *gin.Context, ident string) (*store.Runbook, error) {
	rb, err := s.store.GetRunbook(c.Request.Context(), ident)
	if errors.Is(err, store.ErrNotFound) {
		return nil, runbookKind.notFound(ident)
	}
	if err != nil {
		return nil, fmt.Errorf("get runbook %s: %w", ident, err)
	}
	return rb, nil
}

// runbookAllowed enforces the runbook routes.
func (s *server) runbookAllowed(c *gin.Context, cr *creds, rr routeRule) error {
	if ver(c) < v92Runbooks {
		return nil // the handler's version gate answers
	}
	if rr.kind == onRunbookCreate {
		return s.runbookCreateAllowed(c, cr, rr.rule)
	}
	rb, err := s.loadRunbook(c, c.Param("ident"))
	if err != nil {
		return err
	}
	rules := []string{rr.rule}
	if rr.kind == onRunbookPatch {
		if rules, err = runbookPatchRules(c); err != nil {
			return err
		}
	}
	for _, r := range rules {
		if err := s.policy.authorize(r, cr, runbookTarget(rb)); err != nil {
			// get_one: "If the user is not authorized to access the
			// runbook, check also, if the runbook is public".
			// The traits sub-resource has no such fallback.
			if r == "baremetal:runbook:get" && rr.kind == onRunbook && rb.Public && isForbidden(err) {
				continue
			}
			return err
		}
	}
	return nil
}

// runbookPatchRules are the rules a runbook patch needs, as runbook.py's
// _authorize_patch_and_get_runbook: /owner and /public have their own,
// anything else (or nothing) baremetal:runbook:update.
func runbookPatchRules(c *gin.Context) ([]string, error) {
	body, err := peekBody(c)
	if err != nil {
		return nil, err
	}
	var ops []struct {
		Path string `json:"path"`
	}
	_ = json.Unmarshal(body, &ops) // a malformed patch is the handler's 400
	var rules []string
	generic := false
	for _, op := range ops {
		switch {
		case strings.HasPrefix(op.Path, "/owner"):
			rules = append(rules, "baremetal:runbook:update:owner")
		case strings.HasPrefix(op.Path, "/public"):
			rules = append(rules, "baremetal:runbook:update:public")
		default:
			generic = true
		}
	}
	if generic || len(rules) == 0 {
		rules = append(rules, "baremetal:runbook:update")
	}
	return rules, nil
}

// runbookCreateAllowed is runbook.py's post: baremetal:runbook:create,
// then, for a caller that is not system-scoped, no other project as owner,
// no public runbook, and the caller's project as the runbook's owner
// (written into the body the handler reads).
func (s *server) runbookCreateAllowed(c *gin.Context, cr *creds, rule string) error {
	if err := s.policy.authorize(rule, cr, nil); err != nil {
		return err
	}
	if cr.SystemScope == "all" {
		return nil
	}
	body, err := peekBody(c)
	if err != nil {
		return err
	}
	var obj map[string]any
	if json.Unmarshal(body, &obj) != nil || obj == nil {
		return nil // not an object: the handler's 400
	}
	if owner, _ := obj["owner"].(string); owner != "" && owner != cr.ProjectID {
		return badRequest("Cannot create a runbook as a project scoped admin with an owner other than your own project.")
	}
	if public, _ := obj["public"].(bool); public && cr.ProjectID != "" {
		return badRequest("Cannot create a public runbook as a project scoped admin.")
	}
	if cr.ProjectID == "" {
		obj["owner"] = nil
	} else {
		obj["owner"] = cr.ProjectID
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("runbook body: %w", err)
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(out))
	c.Request.ContentLength = int64(len(out))
	return nil
}

// runbookUseAllowed checks the runbook of a provision request (API 1.92)
// against baremetal:runbook:use, with the public fallback of Ironic's
// node provision. A runbook that does not exist, or a body that names
// none, is left to the handler.
func (s *server) runbookUseAllowed(c *gin.Context, cr *creds) error {
	if ver(c) < v92Runbooks {
		return nil
	}
	body, err := peekBody(c)
	if err != nil {
		return err
	}
	var obj struct {
		Runbook any `json:"runbook"`
	}
	_ = json.Unmarshal(body, &obj)
	ident, ok := obj.Runbook.(string)
	if !ok || ident == "" {
		return nil
	}
	rb, err := s.store.GetRunbook(c.Request.Context(), ident)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get runbook %s: %w", ident, err)
	}
	const use = "baremetal:runbook:use"
	if err := s.policy.authorize(use, cr, runbookTarget(rb)); err != nil {
		if rb.Public && isForbidden(err) {
			return nil
		}
		return err
	}
	return nil
}

func isForbidden(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.status == http.StatusForbidden
}
