package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// A node's management calls beyond boot devices (Ironic's
// ManagementInterface): inject an NMI (API 1.29, PUT
// /v1/nodes/{node}/management/inject_nmi) and list, read and set its
// indicators (API 1.63, /v1/nodes/{node}/management/indicators). Each is
// a short workflow that holds the node's lock while the BMC answers, on
// the node's conductor-group hardware queue, as Ironic's conductor takes
// the node's exclusive lock for every one of them. The workflow and
// activity names are recorded in histories and never change.

const (
	// WorkflowNodeManagement is the name NodeManagement is registered
	// and started under.
	WorkflowNodeManagement = "NodeManagement"
	// ActInjectNMI pulses the machine's NMI through its BMC.
	ActInjectNMI = "InjectNMI"
	// ActReadIndicators reads the BMC's indicators and their states.
	ActReadIndicators = "ReadIndicators"
	// ActSetIndicator sets one indicator's state.
	ActSetIndicator = "SetIndicator"
	// ErrTypeInvalidParameter is a request the BMC's answer shows to be
	// wrong (an indicator it does not have, a state the indicator cannot
	// take): Ironic's InvalidParameterValue, a 400 of the API. Its
	// message is the API's.
	ErrTypeInvalidParameter = "InvalidParameterValue"
)

// ManagementAction is what a NodeManagement run does.
type ManagementAction string

// The management actions.
const (
	ManagementInjectNMI      ManagementAction = "inject_nmi"
	ManagementReadIndicators ManagementAction = "read_indicators"
	ManagementSetIndicator   ManagementAction = "set_indicator"
)

// ManagementRequest is one management call asked through the API.
type ManagementRequest struct {
	NodeUUID       string           `json:"node_uuid"`
	ConductorGroup string           `json:"conductor_group"`
	Action         ManagementAction `json:"action"`
	// Component, Indicator and State name the indicator to set and its
	// new state (ManagementSetIndicator).
	Component string `json:"component,omitempty"`
	Indicator string `json:"indicator,omitempty"`
	State     string `json:"state,omitempty"`
}

// Indicator is one indicator as the BMC reads it: what GET
// .../management/indicators lists and GET .../indicators/{name}@{component}
// answers.
type Indicator struct {
	Component string   `json:"component"`
	Name      string   `json:"name"`
	Readonly  bool     `json:"readonly"`
	States    []string `json:"states"`
	State     string   `json:"state"`
}

// IndicatorInput is the management activities' input.
type IndicatorInput struct {
	Node      NodeInfo `json:"node"`
	Component string   `json:"component,omitempty"`
	Indicator string   `json:"indicator,omitempty"`
	State     string   `json:"state,omitempty"`
}

// NodeManagement runs one management call; a read returns the node's
// indicators, the other calls nil. The API waits for its result.
func NodeManagement(ctx workflow.Context, req ManagementRequest) ([]Indicator, error) {
	r, err := newNodeRun(ctx, req.NodeUUID, provision.OpManagement)
	if err != nil {
		return nil, err
	}
	in := IndicatorInput{Node: r.node, Component: req.Component, Indicator: req.Indicator, State: req.State}
	switch req.Action {
	case ManagementReadIndicators:
		var out []Indicator
		err := r.hw.call(ActReadIndicators, in, &out)
		return out, err
	case ManagementSetIndicator:
		return nil, r.hw.call(ActSetIndicator, in, nil)
	}
	return nil, r.hw.call(ActInjectNMI, in, nil)
}
