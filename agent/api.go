package agent

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxCommandBody caps a command request: config drives are at most 64 MiB
// gzipped+base64, which is the largest thing Ironic sends.
const maxCommandBody = 96 << 20

func (a *Agent) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", a.handleRoot)
	mux.HandleFunc("GET /v1/status", a.authed(a.handleStatus))
	mux.HandleFunc("GET /v1/commands", a.authed(a.handleList))
	mux.HandleFunc("GET /v1/commands/{$}", a.authed(a.handleList))
	mux.HandleFunc("POST /v1/commands", a.authed(a.handleExecute))
	mux.HandleFunc("POST /v1/commands/{$}", a.authed(a.handleExecute))
	mux.HandleFunc("GET /v1/commands/{id}", a.authed(a.handleGet))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, newRESTError("NotFound", 404, "Not found", "The requested URL was not found."))
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *restError) { writeJSON(w, e.Code, e) }

// authed requires the agent token on every call, compared in constant time.
// Before lookup there is no token, so nothing is accepted.
func (a *Agent) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		want := a.currentToken()
		got := r.URL.Query().Get("agent_token")
		if want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			writeError(w, newRESTError("Unauthorized", 401, "Unauthorized", "Invalid or missing agent token"))
			return
		}
		h(w, r)
	}
}

func (a *Agent) handleRoot(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, map[string]any{
		"name": "ironflow-agent", "description": "Ironic Python Agent compatible command API",
		"versions": []map[string]any{{"id": "v1"}}, "default_version": map[string]any{"id": "v1"},
	})
}

func (a *Agent) handleStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, map[string]any{"started_at": float64(a.started.UnixNano()) / 1e9, "version": Version})
}

func (a *Agent) handleList(w http.ResponseWriter, r *http.Request) {
	cmds := a.cmds.all()
	out := make([]commandView, 0, len(cmds))
	for _, c := range cmds {
		out = append(out, c.view())
	}
	writeJSON(w, 200, map[string]any{"commands": out})
}

func (a *Agent) handleGet(w http.ResponseWriter, r *http.Request) {
	c := a.cmds.get(r.PathValue("id"))
	if c == nil {
		writeError(w, newRESTError("RequestedObjectNotFoundError", 404, "Not found", fmt.Sprintf("Command with id %s not found.", r.PathValue("id"))))
		return
	}
	if isTrue(r.URL.Query().Get("wait")) {
		select {
		case <-c.done:
		case <-r.Context().Done():
			return
		}
	}
	writeJSON(w, 200, c.view())
}

func isTrue(s string) bool {
	switch strings.ToLower(s) {
	case "true", "1", "yes", "on":
		return true
	}
	return false
}

func (a *Agent) handleExecute(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxCommandBody+1))
	if err != nil || len(data) > maxCommandBody {
		writeError(w, newRESTError("InvalidContentError", 400, "Invalid request body", "request body unreadable or too large"))
		return
	}
	var req struct {
		Name   string          `json:"name"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(data, &req); err != nil || req.Name == "" {
		writeError(w, newRESTError("InvalidContentError", 400, "Invalid request body", "Missing or invalid name or params"))
		return
	}
	ext, cmdName, ok := strings.Cut(req.Name, ".")
	if !ok || ext == "" || cmdName == "" {
		writeError(w, newRESTError("InvalidCommandError", 400, "Invalid command", "Command name must be of the form <extension>.<name>"))
		return
	}
	specs := a.commandSpecs()
	if !hasExtension(specs, ext) {
		writeError(w, newRESTError("RequestedObjectNotFoundError", 404, "Not found", fmt.Sprintf("Extension with id %s not found.", ext)))
		return
	}
	spec, ok := specs[req.Name]
	if !ok {
		writeError(w, newRESTError("InvalidCommandError", 400, "Invalid command", "Unknown command: "+cmdName))
		return
	}
	cmd, busyWith, err := a.cmds.add(req.Name, req.Params)
	if err != nil {
		writeError(w, newRESTError("AgentIsBusy", 409, "Agent is busy", "executing command "+busyWith.name))
		return
	}
	a.log.Info("command started", "node", a.NodeUUID(), "command", req.Name, "id", cmd.id)
	run := func(ctx context.Context) {
		var result any
		var err error
		if a.cfg.BeforeCommand != nil {
			err = a.cfg.BeforeCommand(ctx, req.Name)
		}
		if err == nil {
			result, err = spec.run(ctx, cmd, req.Params)
		}
		cmd.finish(result, err, spec.kind)
		if err != nil {
			a.log.Error("command failed", "node", a.NodeUUID(), "command", req.Name, "id", cmd.id, "err", err)
		} else {
			a.log.Info("command succeeded", "node", a.NodeUUID(), "command", req.Name, "id", cmd.id)
		}
	}
	if !spec.async {
		run(r.Context())
		writeJSON(w, 200, cmd.view())
		return
	}
	a.cmdMu.Lock()
	if a.bgCtx.Err() != nil {
		a.cmdMu.Unlock()
		cmd.finish(nil, errors.New("agent is shutting down"), spec.kind)
		writeJSON(w, 200, cmd.view())
		return
	}
	a.cmdWG.Add(1)
	a.cmdMu.Unlock()
	go func() {
		defer a.cmdWG.Done()
		run(a.bgCtx)
		// As IPA: tell the control plane right away that the step ended.
		a.ForceHeartbeat()
	}()
	if isTrue(r.URL.Query().Get("wait")) {
		select {
		case <-cmd.done:
		case <-r.Context().Done():
			return
		}
	}
	writeJSON(w, 200, cmd.view())
}

func hasExtension(specs map[string]commandSpec, ext string) bool {
	for name := range specs {
		if strings.HasPrefix(name, ext+".") {
			return true
		}
	}
	return false
}
