// Package rules is ironflow's inspection rules engine (Ironic's API 1.96,
// "Inspection rules" in Ironic's admin guide and its
// ironic/common/inspection_rules package): a rule is a list of conditions
// on the node, its inventory and plugin_data, and a list of actions run
// when every condition holds. Rules run in priority order, highest first,
// in the "main" phase after inspection data arrives.
//
// The package validates rules as Ironic does (Validate, the messages a
// client sees as 400s) and runs them (Apply) over a Subject: plain data the
// caller copied out of the store. Apply only changes that copy, so a caller
// commits everything at once or, when a rule fails, nothing. It never
// touches the store, a BMC or a workflow; the only I/O is the api-call
// action's HTTP GET, through Subject.Get.
package rules
