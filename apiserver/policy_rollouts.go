package apiserver

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
)

// Rollouts under the keystone strategy (docs/rollouts.md, "The API"), in
// the manner of Ironic's allocations: a rollout's rules are checked with
// its project as "rollout.project" (none for the system's); a caller who
// may not read it is told it does not exist; a caller without
// ironflow:rollout:create_all creates its project's rollout, over the
// nodes its project owns or leases only; a caller without
// ironflow:rollout:list_all lists its project's rollouts.

// ctxRolloutProject is the project a create restricts the nodes to and
// gives the rollout, or a list restricts the rollouts to.
const ctxRolloutProject = "ironflow.rollout_project"

// rolloutRouteAllowed enforces the rollout routes.
func (s *server) rolloutRouteAllowed(c *gin.Context, cr *creds, rr routeRule) error {
	switch rr.kind {
	case onRolloutList:
		if s.policy.allowed(rr.rule+"_all", cr, nil) {
			return nil
		}
		if cr.ProjectID == "" {
			return forbidden(rr.rule + "_all")
		}
		if err := s.policy.authorize(rr.rule, cr, nil); err != nil {
			return err
		}
		c.Set(ctxRolloutProject, cr.ProjectID)
		return nil
	case onRolloutCreate:
		if err := s.policy.authorize(rr.rule, cr, nil); err != nil {
			return err
		}
		if s.policy.allowed("ironflow:rollout:create_all", cr, nil) {
			return nil
		}
		if cr.ProjectID == "" {
			return forbidden("ironflow:rollout:create_all")
		}
		c.Set(ctxRolloutProject, cr.ProjectID)
		return nil
	}
	re, id, err := s.rolloutOf(c)
	if err != nil {
		return err
	}
	project, err := re.RolloutProject(c.Request.Context(), id)
	if errors.Is(err, errNoRollout) {
		return errorf(http.StatusNotFound, "Rollout %s could not be found.", id)
	}
	if err != nil {
		return err
	}
	t := policyTarget{}
	if project != "" {
		t["rollout.project"] = project
	}
	if !s.policy.allowed("ironflow:rollout:get", cr, t) {
		return errorf(http.StatusNotFound, "Rollout %s could not be found.", id)
	}
	return s.policy.authorize(rr.rule, cr, t)
}
