package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/console"
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// A node's console (API 1.1): GET and PUT /v1/nodes/{node}/states/console,
// as Ironic's NodeConsoleController. The console lives in the worker that
// holds it (workflows/console.go); the API reads where from the node and,
// for the browser pages, issues a token (package console). docs/console.md.

// Paths of the browser pages the API serves (package console/web).
const (
	consoleTerminalPath = "/console/terminal"
	consoleVNCPath      = "/console/vnc"
)

// consoleTokens is the API's token issuer and resolver.
func (s *server) consoleTokens() *console.Tokens {
	return &console.Tokens{Store: s.store, TTL: s.cfg.ConsoleTokenTTL, Log: s.log}
}

// unsupportedConsole is Ironic's UnsupportedDriverExtension for a node
// whose console interface refuses (no-console), or nil.
func unsupportedConsole(n *store.Node) error {
	if hardware.ConsoleOf(hardware.Interface(n.ConsoleInterface)).Method() == hardware.ConsoleNone {
		return badRequest("Driver %s does not support console (disabled or not implemented).", n.Driver)
	}
	return nil
}

// getConsole answers console_enabled and console_info, as Ironic's
// get_console_information: a console that is not enabled answers null
// before the interface is validated.
func (s *server) getConsole(c *gin.Context, n *store.Node) error {
	if !n.ConsoleEnabled {
		writeJSON(c, http.StatusOK, map[string]any{"console_enabled": false, "console_info": nil})
		return nil
	}
	if err := unsupportedConsole(n); err != nil {
		return err
	}
	info, err := s.consoleInfo(c, n)
	if err != nil {
		return err
	}
	writeJSON(c, http.StatusOK, map[string]any{"console_enabled": true, "console_info": info})
	return nil
}

// consoleInfo is the console's connection information; nil while no worker
// has recorded its endpoints (an enable still running, or a holder gone
// and not yet taken over).
func (s *server) consoleInfo(c *gin.Context, n *store.Node) (any, error) {
	iface := hardware.ConsoleOf(hardware.Interface(n.ConsoleInterface))
	serial, _ := n.DriverInternalInfo[store.KeyConsoleAddress].(string)
	graphical, _ := n.DriverInternalInfo[store.KeyConsoleGraphicalAddress].(string)
	page := func(kind, path string) (any, error) {
		tok, _, err := s.consoleTokens().Issue(c.Request.Context(), n.UUID, kind)
		if err != nil {
			return nil, fmt.Errorf("console token of node %s: %w", n.UUID, err)
		}
		return map[string]any{"type": iface.InfoType(), "url": s.baseURL(c) + path + "?token=" + url.QueryEscape(tok)}, nil
	}
	switch iface.InfoType() {
	case hardware.ConsoleInfoSocat:
		if serial == "" {
			return nil, nil
		}
		return map[string]any{"type": iface.InfoType(), "url": "tcp://" + serial}, nil
	case hardware.ConsoleInfoShellinabox:
		if serial == "" {
			return nil, nil
		}
		return page(console.KindSerial, consoleTerminalPath)
	case hardware.ConsoleInfoVNC:
		if graphical == "" {
			return nil, nil
		}
		return page(console.KindGraphical, consoleVNCPath)
	}
	return map[string]any{}, nil
}

// setConsole answers PUT .../states/console {"enabled": bool}: 202 and a
// SetConsoleNode workflow under the node's lock, or nothing to do when the
// console already is as asked (Ironic logs "No console action was
// triggered"); 409 while another operation holds the node.
func (s *server) setConsole(c *gin.Context, n *store.Node) error {
	enabled, err := parseConsoleBody(c)
	if err != nil {
		return err
	}
	if err := unsupportedConsole(n); err != nil {
		return err
	}
	if enabled {
		// The worker reads the same keys; a node it cannot serve is the
		// client's to fix (Ironic's console validate).
		if _, err := console.SpecFor(n.ConsoleInterface, n.UUID, n.DriverInfo); err != nil {
			return badRequest("%s", err.Error())
		}
	}
	location := s.baseURL(c) + "/v1/nodes/" + n.UUID + "/states/console"
	if enabled == n.ConsoleEnabled {
		writeEmpty(c, http.StatusAccepted, location)
		return nil
	}
	if !consoleBesideOperation(n.ProvisionState) {
		// Ironic's set_console_mode takes the node's exclusive lock: 409
		// while an operation that holds it in Ironic runs.
		running, err := s.eng.Running(c.Request.Context(), n.UUID)
		if err != nil {
			return fmt.Errorf("check workflow of node %s: %w", n.UUID, err)
		}
		if running {
			return nodeLocked(n.UUID, lockHolder(n))
		}
	}
	err = s.eng.SetConsole(c.Request.Context(), workflows.ConsoleRequest{NodeUUID: n.UUID, ConductorGroup: n.ConductorGroup, Enabled: enabled})
	if errors.Is(err, ErrNodeLocked) {
		return nodeLocked(n.UUID, lockHolder(n))
	}
	if err != nil {
		return fmt.Errorf("set the console of node %s: %w", n.UUID, err)
	}
	writeEmpty(c, http.StatusAccepted, location)
	return nil
}

// consoleBesideOperation: in these states Ironic holds no lock on the node
// (an operation waits for its agent or an operator, or has failed and
// rests), so a console change goes through there, beside the workflow
// that holds the node here (docs/console.md, "Consoles beside
// operations"); in any other state an operation's workflow refuses it.
func consoleBesideOperation(st provision.State) bool {
	switch st {
	case provision.DeployWait, provision.CleanWait, provision.InspectWait, provision.RescueWait, provision.ServiceWait,
		provision.DeployHold, provision.CleanHold, provision.ServiceHold:
		return true
	}
	return st.Failed()
}

// parseConsoleBody reads {"enabled": bool} with the messages of Ironic's
// argument validation (ironic/common/args.py: boolean and the checks of
// validate).
func parseConsoleBody(c *gin.Context) (bool, error) {
	body, err := decodeObject(c)
	if err != nil {
		return false, err
	}
	for k := range body {
		if k != "enabled" {
			return false, badRequest("Unexpected arguments: %s", k)
		}
	}
	v, ok := body["enabled"]
	if !ok || v == nil {
		return false, badRequest("Missing mandatory parameter: enabled")
	}
	switch t := v.(type) {
	case bool:
		return t, nil
	case string:
		if b, err := parseBool("enabled", t); err == nil {
			return b, nil
		}
	}
	return false, badRequest("Invalid enabled: Unrecognized value %s, acceptable values are: "+
		"'0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'", pyliteral.Repr(fmt.Sprint(v)))
}
