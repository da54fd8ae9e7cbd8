package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// A node's management calls beyond boot devices, as Ironic's
// NodeManagementController serves them: PUT .../management/inject_nmi
// (API 1.29, Ironic's API reference "Inject NMI (Non-Masking
// Interrupts)") and the indicators (API 1.63, "Indicators Management"):
// GET .../management/indicators, GET and PUT
// .../management/indicators/{indicator}@{component}. Every call runs the
// NodeManagement workflow (workflows/nodemanagement.go) on the node's
// conductor-group queue under the node's lock, as Ironic's conductor
// takes the node's exclusive lock for each (reads included): a node
// another operation holds is 409 NodeLocked. What the node's management
// interface can do is the hardware registry's answer
// (hardware.ManagementOf); one that cannot is Ironic's
// UnsupportedDriverExtension (400). Ironic's answers are Debian's Ironic
// 21.4's (docs/api-versions.md).

// management is what the node's management interface does.
func management(n *store.Node) hardware.Management {
	return hardware.ManagementOf(hardware.Interface(n.ManagementInterface))
}

// unexpectedArguments is Ironic's args.validate refusal of parameters a
// method does not take: the request's query and JSON body are its
// arguments (pecan merges them), and their names are listed.
func unexpectedArguments(c *gin.Context, body map[string]any, allowed ...string) error {
	var extra []string
	for k := range c.Request.URL.Query() {
		if !slices.Contains(allowed, k) {
			extra = append(extra, k)
		}
	}
	for k := range body {
		if !slices.Contains(allowed, k) && !slices.Contains(extra, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	sort.Strings(extra)
	return badRequest("Unexpected arguments: %s", strings.Join(extra, ", "))
}

// injectNMI answers PUT /v1/nodes/{node}/management/inject_nmi: 204 once
// the BMC took the NMI. Ironic refuses nothing for the node's state (a
// node in maintenance or powered off gets the NMI its BMC passes on).
func (s *server) injectNMI(c *gin.Context, n *store.Node) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	if err := unexpectedArguments(c, body); err != nil {
		return err
	}
	m := management(n)
	if !m.InjectsNMI {
		return unsupportedExtension(n, "inject_nmi")
	}
	call := hardware.ManagementCall{Op: "inject_nmi"}
	if _, err := s.manage(c, n, m, call, workflows.ManagementRequest{Action: workflows.ManagementInjectNMI}); err != nil {
		return err
	}
	s.addHistory(c, n.UUID, store.SeverityInfo, "management", "NMI injected")
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}

// manage runs the management call and maps its failures to Ironic's
// answers.
func (s *server) manage(c *gin.Context, n *store.Node, m hardware.Management, call hardware.ManagementCall, req workflows.ManagementRequest) ([]workflows.Indicator, error) {
	req.NodeUUID, req.ConductorGroup = n.UUID, n.ConductorGroup
	out, err := s.eng.Manage(c.Request.Context(), req)
	switch {
	case errors.Is(err, ErrNodeLocked):
		return nil, nodeLocked(n.UUID, lockHolder(n))
	case errors.Is(err, ErrInvalidParameter):
		return nil, badRequest("%s", strings.TrimPrefix(err.Error(), ErrInvalidParameter.Error()+": "))
	case errors.Is(err, ErrHardware):
		detail := strings.TrimPrefix(err.Error(), ErrHardware.Error()+": ")
		msg := m.Failure(call, n.UUID, detail)
		// Ironic logs the BMC's own answer where its message drops it
		// (ipmitool's "IPMI call failed: power diag."): the node's
		// history keeps it.
		s.addHistory(c, n.UUID, store.SeverityError, "management", msg+" ("+detail+")")
		return nil, errorf(http.StatusInternalServerError, "%s", msg)
	case err != nil:
		return nil, fmt.Errorf("%s on node %s: %w", call.Op, n.UUID, err)
	}
	return out, nil
}

// indicatorName splits Ironic's "{indicator}@{component}" at its first
// "@" (IndicatorAtComponent).
func indicatorName(s string) (name, component string, err error) {
	i := strings.Index(s, "@")
	if i < 0 {
		return "", "", badRequest("Malformed indicator name \"%s\"", s)
	}
	return s[:i], s[i+1:], nil
}

// listIndicators answers GET /v1/nodes/{node}/management/indicators:
// {"indicators": [...]} with each indicator's name@component, component,
// readonly, states and links, as Ironic's indicator_list_from_dict (its
// API reference's sample shows another shape; the code is what clients
// get).
func (s *server) listIndicators(c *gin.Context, n *store.Node) error {
	m := management(n)
	if !m.ReadsIndicators {
		return unsupportedExtension(n, "get_supported_indicators")
	}
	all, err := s.manage(c, n, m, hardware.ManagementCall{Op: "get_supported_indicators"},
		workflows.ManagementRequest{Action: workflows.ManagementReadIndicators})
	if err != nil {
		return err
	}
	base, ident := s.baseURL(c), c.Param("node")
	out := make([]map[string]any, 0, len(all))
	for _, in := range all {
		unique := in.Name + "@" + in.Component
		states := in.States
		if states == nil {
			states = []string{}
		}
		out = append(out, map[string]any{
			"name": unique, "component": in.Component, "readonly": in.Readonly, "states": states,
			"links": selfLinks(base, "nodes/"+ident+"/management/indicators/"+unique),
		})
	}
	writeJSON(c, http.StatusOK, map[string]any{"indicators": out})
	return nil
}

// getIndicator answers GET .../indicators/{indicator}@{component}:
// {"state": ...}.
func (s *server) getIndicator(c *gin.Context, n *store.Node) error {
	if err := unexpectedArguments(c, nil); err != nil {
		return err
	}
	name, component, err := indicatorName(c.Param("indicator"))
	if err != nil {
		return err
	}
	m := management(n)
	if !m.ReadsIndicators {
		return unsupportedExtension(n, "get_indicator_state")
	}
	all, err := s.manage(c, n, m, hardware.ManagementCall{Op: "get_indicator_state", Component: component, Indicator: name},
		workflows.ManagementRequest{Action: workflows.ManagementReadIndicators})
	if err != nil {
		return err
	}
	known := false
	for _, in := range all {
		if in.Component == component {
			known = true
			if in.Name == name {
				writeJSON(c, http.StatusOK, map[string]any{"state": in.State})
				return nil
			}
		}
	}
	return badRequest("%s", m.Unknown(component, name, n.UUID, known))
}

// indicatorStates are the states an indicator is set to: Ironic's
// indicator_states without "unknown", which its redfish management cannot
// set.
var indicatorStates = []string{"blinking", "off", "on"}

// setIndicator answers PUT .../indicators/{indicator}@{component} with
// {"state": ...} (or ?state=, pecan's arguments): 204. Ironic's states are
// lower case; its API reference writes them in capitals, which ironflow
// takes too.
func (s *server) setIndicator(c *gin.Context, n *store.Node) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	if err := unexpectedArguments(c, body, "state"); err != nil {
		return err
	}
	raw, ok := body["state"]
	if !ok && c.Request.URL.Query().Has("state") {
		raw, ok = c.Query("state"), true
	}
	if !ok || raw == nil {
		return badRequest("Missing mandatory parameter: state")
	}
	state, isText := raw.(string)
	if !isText {
		return badRequest("Expected string for state: %v", raw)
	}
	name, component, err := indicatorName(c.Param("indicator"))
	if err != nil {
		return err
	}
	m := management(n)
	if !m.SetsIndicators {
		return unsupportedExtension(n, "set_indicator_state")
	}
	state = strings.ToLower(state)
	if !slices.Contains(indicatorStates, state) {
		// Ironic's redfish management fails on such a state with a 500
		// (a KeyError); it is the user's mistake.
		return badRequest("%s", hardware.IndicatorStateRefused(name, component, n.UUID, raw.(string)))
	}
	call := hardware.ManagementCall{Op: "set_indicator_state", Component: component, Indicator: name, State: state}
	if _, err := s.manage(c, n, m, call, workflows.ManagementRequest{
		Action: workflows.ManagementSetIndicator, Component: component, Indicator: name, State: state,
	}); err != nil {
		return err
	}
	s.addHistory(c, n.UUID, store.SeverityInfo, "management", fmt.Sprintf("Indicator %s@%s set to %s", name, component, state))
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}
