package hardware

import "fmt"

// Management is what a node's management interface does beyond boot
// devices: Ironic's ManagementInterface.inject_nmi (API 1.29) and its
// indicators (get_supported_indicators, get_indicator_state,
// set_indicator_state; API 1.63). Ironic asks the node's management
// interface, and so does the API: ManagementOf(node's management).
type Management struct {
	// InjectsNMI: the BMC pulses the machine's NMI (ipmitool's `power
	// diag`, Redfish's ComputerSystem.Reset with ResetType Nmi).
	InjectsNMI bool
	// ReadsIndicators: the interface lists its indicators and reads
	// their states.
	ReadsIndicators bool
	// SetsIndicators: the interface changes an indicator's state.
	SetsIndicators bool
	// failure is the interface's own words for a BMC call that failed:
	// the exception Ironic's implementation raises.
	failure func(c ManagementCall, node, detail string) string
	// unknown is its words for an indicator the node does not have;
	// knownComponent says whether the component has any.
	unknown func(component, indicator, node string, knownComponent bool) string
}

// ManagementCall names a management call for its failure message.
type ManagementCall struct {
	// Op is "inject_nmi", "get_supported_indicators",
	// "get_indicator_state" or "set_indicator_state" (Ironic's method
	// names).
	Op                          string
	Component, Indicator, State string
}

// managements are Ironic's management interfaces as ironflow serves
// them. ipmitool has no indicators in Ironic (drivers/base.py's
// UnsupportedDriverExtension for each indicator call); fake has the
// indicators of Ironic's fake management (bmc/fake.go) and neither NMI nor
// a settable indicator; noop has none of it.
var managements = map[Interface]Management{
	IPMITool: {InjectsNMI: true, failure: func(c ManagementCall, _, _ string) string {
		// ironic/drivers/modules/ipmitool.py: IPMIFailure(cmd="power
		// diag"); the BMC's answer is only logged.
		return "IPMI call failed: power diag."
	}},
	Redfish: {InjectsNMI: true, ReadsIndicators: true, SetsIndicators: true, failure: redfishFailure,
		unknown: func(component, indicator, node string, _ bool) string {
			return UnknownIndicator(indicator, component, node)
		}},
	Fake: {ReadsIndicators: true, unknown: func(component, indicator, _ string, knownComponent bool) string {
		// ironic/drivers/modules/fake.py's get_indicator_state.
		if !knownComponent {
			return fmt.Sprintf("Invalid component %s specified.", component)
		}
		return fmt.Sprintf("Invalid indicator %s specified.", indicator)
	}},
}

// redfishFailure is ironic/drivers/modules/redfish/management.py's
// RedfishError for each call ("Redfish exception occurred. Error: ..."),
// or the RedfishConnectionError of reading the system for the list.
func redfishFailure(c ManagementCall, node, detail string) string {
	var what string
	switch c.Op {
	case "inject_nmi":
		what = "Redfish inject NMI failed for node %[1]s. Error: %[2]s"
	case "set_indicator_state":
		what = fmt.Sprintf("Redfish set %s indicator %s state %s failed for node %%[1]s. Error: %%[2]s", c.Component, c.Indicator, c.State)
	case "get_indicator_state":
		what = fmt.Sprintf("Redfish get %s indicator %s state failed for node %%[1]s. Error: %%[2]s", c.Component, c.Indicator)
	default:
		return fmt.Sprintf("Redfish connection failed for node %s: %s", node, detail)
	}
	return "Redfish exception occurred. Error: " + fmt.Sprintf(what, node, detail)
}

// ManagementOf is what management interface m does; an unknown one does
// nothing.
func ManagementOf(m Interface) Management { return managements[m] }

// Failure is the message for call having failed on node's BMC, in the
// words of the interface's Ironic exception; detail is the BMC's answer.
func (m Management) Failure(c ManagementCall, node, detail string) string {
	if m.failure == nil {
		return fmt.Sprintf("%s failed for node %s: %s", c.Op, node, detail)
	}
	return m.failure(c, node, detail)
}

// UnknownIndicator is Ironic's redfish management's answer
// (MissingParameterValue) for an indicator the node does not have.
func UnknownIndicator(indicator, component, node string) string {
	return fmt.Sprintf("Unknown indicator %s for component %s of node %s", indicator, component, node)
}

// IndicatorStateRefused answers a state the indicator cannot take (a
// LocationIndicatorActive is on or off, it does not blink). Ironic's own
// redfish management fails on it with a 500; ironflow refuses it as the
// user's mistake.
func IndicatorStateRefused(indicator, component, node, state string) string {
	return fmt.Sprintf("Indicator %s for component %s of node %s cannot be set to %s", indicator, component, node, state)
}

// Unknown is the interface's answer for an indicator of component the
// node does not have; knownComponent says whether the component has
// other indicators.
func (m Management) Unknown(component, indicator, node string, knownComponent bool) string {
	if m.unknown == nil {
		return UnknownIndicator(indicator, component, node)
	}
	return m.unknown(component, indicator, node, knownComponent)
}
