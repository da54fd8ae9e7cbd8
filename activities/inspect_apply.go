package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/inspection/hooks"
	"github.com/ironflow/ironflow/inspection/rules"
	"github.com/ironflow/ironflow/store"
)

// ErrTypeInspectionFailed is an inspection the hooks or the rules refused:
// retrying cannot change the verdict, the node goes to inspect failed.
const ErrTypeInspectionFailed = "InspectionFailed"

// apiCallMargin is what the api-call actions leave of the activity's time
// for writing the outcome.
const apiCallMargin = 5 * time.Second

// ruleHTTPClient makes the api-call action's GETs; each carries its own
// timeout (rules.HTTPGet).
var ruleHTTPClient = &http.Client{}

// ApplyInventory processes the stored inventory as Ironic's
// continue_inspection does (docs/inspection.md): the inspection hooks turn
// it into plugin_data, node properties and ports (inspection/hooks), then
// the inspection rules of phase main run over the result in priority order
// (inspection/rules). Everything is decided on copies and written in one
// transaction (store.ApplyInspection): a hook or rule that fails, or the
// fail action, leaves the node, its ports and plugin_data as they were and
// fails the inspection with Ironic's "Failed to finish inspection: ..."
// message. Local activity.
func (a *Activities) ApplyInventory(ctx context.Context, nodeUUID string) error {
	rs, err := a.Store.InspectionRulesOfPhase(ctx, rules.PhaseMain)
	if err != nil {
		return storeErr(err, "read the inspection rules")
	}
	engineRules := make([]rules.Rule, len(rs), len(rs)+len(a.Config.BuiltInRules))
	for i, r := range rs {
		engineRules[i] = rules.Rule{UUID: r.UUID, Description: r.Description, Phase: r.Phase, Priority: r.Priority,
			Sensitive: r.Sensitive, Conditions: r.Conditions, Actions: r.Actions}
	}
	// The file's rules after the stored ones: where priorities are equal,
	// the stored rule runs first (Ironic's apply_rules, a stable sort).
	engineRules = append(engineRules, a.Config.BuiltInRules...)
	var logs []rules.LogEntry
	var created int
	// The rules' api-call GETs end before this local activity's own
	// deadline, so that a slow URL fails the inspection with its message
	// instead of timing the activity out into a retry.
	rulesCtx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		rulesCtx, cancel = context.WithDeadline(ctx, dl.Add(-apiCallMargin))
		defer cancel()
	}
	node, err := a.Store.ApplyInspection(ctx, nodeUUID, func(n *store.Node, ports []*store.Port, inv *store.Inventory) (*store.InspectionOutcome, error) {
		o, l, c, err := inspectionOutcome(rulesCtx, n, ports, inv, engineRules, a.Config.InspectionHooks, a.Config.InspectionHookConfig, a.Config.RulesMaskSecrets)
		logs, created = l, c
		return o, err
	})
	for _, l := range logs {
		a.Log.Log(ctx, logLevel(l.Level), l.Message, "node", nodeUUID, "inspection_rule", l.Rule)
	}
	var refused *inspectionRefused
	switch {
	case errors.As(err, &refused):
		return temporal.NewNonRetryableApplicationError("Failed to finish inspection: "+refused.Error(), ErrTypeInspectionFailed, nil)
	case errors.Is(err, store.ErrDuplicateName), errors.Is(err, store.ErrInvalidInput), errors.Is(err, store.ErrChassisNotFound),
		errors.Is(err, store.ErrParentNotFound):
		// A rule wrote a value the store refuses (a name in use, ...).
		return temporal.NewNonRetryableApplicationError("Failed to finish inspection: "+err.Error(), ErrTypeInspectionFailed, err)
	case err != nil:
		return storeErr(err, "apply the inventory of node %s", nodeUUID)
	}
	p := node.Properties
	return a.history(ctx, nodeUUID, store.SeverityInfo, "inspection",
		fmt.Sprintf("Inspection found %v CPUs, %v MiB of memory, %v GiB of disk; %d new ports; %d inspection rules", p["cpus"], p["memory_mb"], p["local_gb"], created, len(rs)))
}

// inspectionRefused is a hook's or rule's verdict, worded by Ironic.
type inspectionRefused struct{ msg string }

func (e *inspectionRefused) Error() string { return e.msg }

// inspectionOutcome runs the hooks, then the rules, over copies of the
// locked node, its ports and its inventory, and says what to write.
func inspectionOutcome(ctx context.Context, n *store.Node, ports []*store.Port, inv *store.Inventory, rs []rules.Rule,
	inBand []string, hookCfg hooks.Config, maskSecrets string) (*store.InspectionOutcome, []rules.LogEntry, int, error) {
	var pluginData, props map[string]any
	if err := deepCopy(inv.PluginData, &pluginData); err != nil {
		return nil, nil, 0, err
	}
	if err := deepCopy(n.Properties, &props); err != nil {
		return nil, nil, 0, err
	}
	var portMaps []map[string]any
	if err := deepCopy(ports, &portMaps); err != nil {
		return nil, nil, 0, err
	}
	names, cfg := inBand, hookCfg
	if names == nil {
		names = hooks.DefaultHooks
	}
	if pluginData["source"] == pluginSourceOutOfBand {
		names, cfg = hooks.OutOfBandHooks, hooks.Config{OutOfBand: true}
	}
	d := &hooks.Data{NodeUUID: n.UUID, Properties: props, Ports: portMaps, Inventory: inv.Inventory, PluginData: pluginData}
	if err := hooks.Run(names, cfg, d); err != nil {
		var he *hooks.Error
		if errors.As(err, &he) {
			return nil, nil, 0, &inspectionRefused{he.Error()}
		}
		return nil, nil, 0, err
	}
	n.Properties = d.Properties
	var nodeMap map[string]any
	if err := deepCopy(n, &nodeMap); err != nil {
		return nil, nil, 0, err
	}
	subj := &rules.Subject{NodeUUID: n.UUID, Node: nodeMap, Traits: append([]string(nil), n.Traits...), Ports: d.Ports,
		Inventory: inv.Inventory, PluginData: d.PluginData, Get: rules.HTTPGet(ruleHTTPClient), MaskSecrets: maskSecrets}
	if err := rules.Apply(ctx, rs, subj); err != nil {
		return nil, subj.Logs, 0, &inspectionRefused{err.Error()}
	}
	// The rules' node back into the store's: a value of the wrong type for
	// a field fails the inspection as Ironic's field validation does.
	var changed store.Node
	if err := remarshal(subj.Node, &changed); err != nil {
		return nil, subj.Logs, 0, &inspectionRefused{"Inspection rule action execution failed. Reason: " + err.Error()}
	}
	changed.ID, changed.Traits = n.ID, subj.Traits
	*n = changed
	o := &store.InspectionOutcome{PluginData: subj.PluginData}
	// Ironic keeps the ramdisk's logs apart from plugin_data.
	delete(o.PluginData, "logs")
	created := 0
	for _, pm := range subj.Ports {
		var p store.Port
		if err := remarshal(pm, &p); err != nil {
			return nil, subj.Logs, 0, &inspectionRefused{"Inspection rule action execution failed. Reason: " + err.Error()}
		}
		p.NodeUUID = n.UUID
		if p.UUID == "" {
			o.NewPorts = append(o.NewPorts, &p)
			created++
		} else {
			o.UpdatedPorts = append(o.UpdatedPorts, &p)
		}
	}
	o.DeletedPorts = d.DeletePorts
	return o, subj.Logs, created, nil
}

func deepCopy(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// remarshal decodes a rules map into a store type, naming the field a
// wrong type was given for.
func remarshal(in any, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	var te *json.UnmarshalTypeError
	if err := json.Unmarshal(b, out); errors.As(err, &te) {
		return fmt.Errorf("field %s cannot accept a value of type %s", te.Field, te.Value)
	} else if err != nil {
		return err
	}
	return nil
}

func logLevel(l string) slog.Level {
	switch l {
	case "debug":
		return slog.LevelDebug
	case "warning":
		return slog.LevelWarn
	case "error", "critical":
		return slog.LevelError
	}
	return slog.LevelInfo
}
