package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/shadow"
	"github.com/ironflow/ironflow/store"
)

// checkRescueArgs applies Ironic's rules for rescue_password and the rescue
// interface, after the state check as Ironic's provision does:
// rescue_password only with rescue, non-empty for rescue, and a rescue
// interface that rescues (no-rescue fails the conductor's validation).
func checkRescueArgs(n *store.Node, req provisionBody) error {
	verb := req.verb
	if req.rescuePassword != nil && verb != provision.VerbRescue {
		return badRequest("\"rescue_password\" is only valid when setting target provision state to %s", provision.VerbRescue)
	}
	if verb != provision.VerbRescue {
		return nil
	}
	if req.rescuePassword == nil || strings.TrimSpace(*req.rescuePassword) == "" {
		return badRequest("A non-empty \"rescue_password\" is required when setting target provision state to %s", provision.VerbRescue)
	}
	if !hardware.RescueOf(hardware.Interface(n.RescueInterface)).Supported() {
		instance := "None"
		if n.InstanceUUID != nil {
			instance = *n.InstanceUUID
		}
		// Ironic's InstanceRescueFailure, an error of the conductor.
		return errorf(http.StatusInternalServerError, "Failed to rescue instance %s for node %s: Validation failed: Driver %s does not support rescue (disabled or not implemented).",
			instance, n.UUID, n.Driver)
	}
	return nil
}

// storeRescuePassword keeps the hash of the request's rescue_password in the
// node's instance_info (hashed_rescue_password, which every view masks, as
// Ironic keeps it). The clear password is stored nowhere: the rescue
// workflow's activity reads the hash and hands it to the agent.
func (s *server) storeRescuePassword(ctx context.Context, nodeUUID string, req provisionBody) error {
	if req.rescuePassword == nil || req.verb != provision.VerbRescue {
		return nil
	}
	hash, err := shadow.Hash(*req.rescuePassword)
	if err != nil {
		return fmt.Errorf("hash the rescue password of node %s: %w", nodeUUID, err)
	}
	_, err = s.store.UpdateNode(ctx, nodeUUID, func(n *store.Node) error {
		if n.InstanceInfo == nil {
			n.InstanceInfo = map[string]any{}
		}
		delete(n.InstanceInfo, store.KeyRescuePassword)
		n.InstanceInfo[store.KeyHashedRescuePassword] = hash
		return nil
	})
	if err != nil {
		return fmt.Errorf("store the rescue password of node %s: %w", nodeUUID, err)
	}
	return nil
}

// forgetRescuePassword removes a stored hash whose rescue never started.
func (s *server) forgetRescuePassword(ctx context.Context, nodeUUID string) {
	_, err := s.store.UpdateNode(ctx, nodeUUID, func(n *store.Node) error {
		delete(n.InstanceInfo, store.KeyHashedRescuePassword)
		return nil
	})
	if err != nil {
		s.log.WarnContext(ctx, "remove the rescue password of a rescue that did not start", "node", nodeUUID, "error", err)
	}
}
