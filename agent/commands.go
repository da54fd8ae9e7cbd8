package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/ironflow/ironflow/agent/client"
)

// restError is IPA's error: it becomes the HTTP error body or a command's
// command_error, {type, code, message, details}.
type restError struct {
	Type    string `json:"type"`
	Code    int    `json:"code"`
	Message string `json:"message"`
	Details string `json:"details"`
}

func (e *restError) Error() string { return e.Message + ": " + e.Details }

func newRESTError(typ string, code int, message, details string) *restError {
	return &restError{Type: typ, Code: code, Message: message, Details: details}
}

// stepError is a deploy or clean step failure; its Type/Message follow IPA
// (DeploymentError "Deploy step failed", CleaningError "Clean step failed").
func stepError(kind string, err error) *restError {
	var re *restError
	if errors.As(err, &re) {
		return re
	}
	switch kind {
	case "deploy":
		return newRESTError("DeploymentError", 500, "Deploy step failed", err.Error())
	case "clean":
		return newRESTError("CleaningError", 500, "Clean step failed", err.Error())
	case "service":
		return newRESTError("ServicingError", 500, "Service step failed", err.Error())
	}
	return newRESTError("CommandExecutionError", 500, "Command execution failed", err.Error())
}

// command is one command's record, shared between the runner and readers.
type command struct {
	mu     sync.Mutex
	id     string
	name   string
	params json.RawMessage
	status string
	err    *restError
	result any
	done   chan struct{}
}

// SetResult publishes an intermediate result (progress) while RUNNING.
// A late publisher (a progress ticker) never overwrites the final result.
func (c *command) SetResult(v any) {
	c.mu.Lock()
	if c.status == client.StatusRunning {
		c.result = v
	}
	c.mu.Unlock()
}

func (c *command) finish(result any, err error, kind string) {
	c.mu.Lock()
	if err != nil {
		c.status = client.StatusFailed
		c.err = stepError(kind, err)
	} else {
		c.status = client.StatusSucceeded
		c.result = result
	}
	c.mu.Unlock()
	close(c.done)
}

func (c *command) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status == client.StatusRunning
}

// view is the IPA result shape.
type commandView struct {
	ID            string          `json:"id"`
	CommandName   string          `json:"command_name"`
	CommandParams json.RawMessage `json:"command_params"`
	CommandStatus string          `json:"command_status"`
	CommandError  *restError      `json:"command_error"`
	CommandResult any             `json:"command_result"`
}

func (c *command) view() commandView {
	c.mu.Lock()
	defer c.mu.Unlock()
	params := c.params
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	return commandView{ID: c.id, CommandName: c.name, CommandParams: redactParams(params),
		CommandStatus: c.status, CommandError: c.err, CommandResult: c.result}
}

// redactParams hides config drives (large, may hold secrets in user data)
// from command listings, as IPA does, and an image's request authorization
// (a registry token).
func redactParams(p json.RawMessage) json.RawMessage {
	if len(p) < 4096 && !bytes.Contains(p, []byte("image_request_authorization")) {
		return p
	}
	var m map[string]any
	if json.Unmarshal(p, &m) != nil {
		return p
	}
	if step, ok := m["step"].(map[string]any); ok {
		if args, ok := step["args"].(map[string]any); ok {
			if _, ok := args["configdrive"]; ok {
				args["configdrive"] = "<...>"
			}
		}
	}
	if _, ok := m["configdrive"]; ok {
		m["configdrive"] = "<...>"
	}
	if node, ok := m["node"].(map[string]any); ok {
		if ii, ok := node["instance_info"].(map[string]any); ok {
			if _, ok := ii["configdrive"]; ok {
				ii["configdrive"] = "<...>"
			}
			if _, ok := ii["image_request_authorization"]; ok {
				ii["image_request_authorization"] = "******"
			}
		}
	}
	if step, ok := m["step"].(map[string]any); ok {
		if args, ok := step["args"].(map[string]any); ok {
			if _, ok := args["image_request_authorization"]; ok {
				args["image_request_authorization"] = "******"
			}
			if info, ok := args["image_info"].(map[string]any); ok {
				if _, ok := info["image_request_authorization"]; ok {
					info["image_request_authorization"] = "******"
				}
			}
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return p
	}
	return b
}

// handlerFunc runs one command; params are the request's params.
type handlerFunc func(ctx context.Context, cmd *command, params json.RawMessage) (any, error)

type commandSpec struct {
	async bool
	// kind picks the error type a failure is reported as.
	kind string
	run  handlerFunc
}

// commandStore holds every command of this boot in order.
type commandStore struct {
	mu   sync.Mutex
	list []*command
	byID map[string]*command
}

var errBusy = errors.New("busy")

// add registers a new RUNNING command unless the last one still runs.
func (s *commandStore) add(name string, params json.RawMessage) (*command, *command, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.list); n > 0 && s.list[n-1].running() {
		return nil, s.list[n-1], errBusy
	}
	c := &command{id: uuid.NewString(), name: name, params: params, status: client.StatusRunning, done: make(chan struct{})}
	if s.byID == nil {
		s.byID = map[string]*command{}
	}
	s.list = append(s.list, c)
	s.byID[c.id] = c
	return c, nil, nil
}

func (s *commandStore) get(id string) *command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[id]
}

func (s *commandStore) all() []*command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*command(nil), s.list...)
}

// decodeParams decodes a command's params, reporting IPA's
// InvalidCommandParamsError on a bad shape.
func decodeParams(params json.RawMessage, v any) error {
	if len(params) == 0 {
		return nil
	}
	if err := json.Unmarshal(params, v); err != nil {
		return newRESTError("InvalidCommandParamsError", 400, "Invalid command parameters", fmt.Sprintf("decode params: %v", err))
	}
	return nil
}
