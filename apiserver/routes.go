package apiserver

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/workflows"
)

// The route table: every path the API serves, written once. Routing
// (register), the policy check of each authenticated route, the
// microversion gate of a whole route and the index documents that link
// resources (GET /v1, GET /v1/volume) are all read from it, and so is the
// keystone test's route-by-persona table; TestRouteTable fails when a route
// path is written anywhere else.

// v1Root is the version-1 API's root: its discovery document, and the
// prefix under which requests negotiate a microversion.
const v1Root = "/v1"

// authClass is who may call a route.
type authClass int

const (
	// authPublic: version discovery, no credentials (public in Ironic).
	authPublic authClass = iota
	// authRamdisk: the agent's endpoints; no user credentials, the
	// handler checks the agent's token where one is required.
	authRamdisk
	// authUser: the auth strategy's credentials and, under the keystone
	// strategy, the operation's policy rule.
	authUser
)

// gateStyle is how a request below a route's microversion is answered.
type gateStyle int

const (
	// gateNotFound: 404, as Ironic hides an endpoint its version lacks.
	gateNotFound gateStyle = iota
	// gateNotAllowed: 404 for a GET, 405 "The API version does not allow
	// <resource>" for the other methods (the _route checks of Ironic's
	// deploy_template.py and runbook.py).
	gateNotAllowed
	// gateInspection: continueInspectionGate's rule (ramdisk.go).
	gateInspection
	// gateNotAcceptable: 406 for every method (Ironic's RAID routes,
	// allow_raid_config).
	gateNotAcceptable
	// gateAsNode: below since the path reaches Ironic's nodes controller
	// itself, "the behaviour of previous releases" (node.py _lookup, for
	// traits): GET 406, PUT 405, other methods 404.
	gateAsNode
	// gateInHandler: the handler answers below since itself, after it
	// checked the request's body, as Ironic's events controller validates
	// the body before the version (events.go).
	gateInHandler
)

// route is one path and the operations served on it.
type route struct {
	path string // gin pattern, as c.FullPath() gives it
	auth authClass
	// since is the microversion that introduced the path; a request
	// below it is answered as gate says.
	since int
	gate  gateStyle
	// listed: the index document of the nearest path above this one in
	// the table links it, by its segment below that path ("/v1" links
	// "nodes", "heartbeat"), from since on.
	listed bool
	ops    []op
}

// op is one method of a route.
type op struct {
	method string
	h      handler
	// policy is the rule authorize checks under the keystone strategy
	// (authUser routes; policy_routes.go).
	policy routeRule
	// since, when later than the route's, is the version that introduced
	// this method.
	since int
}

// routeTable is the API. Policy rules are Ironic's for the operation: the
// operations each rule of ironic/common/policy.py lists, checked as the
// helpers of ironic/api/controllers/v1/utils.py check them (routeKind).
func (s *server) routeTable() []route {
	none := routeRule{}
	return []route{
		{path: "/", auth: authPublic, ops: []op{{"GET", s.rootDocument, none, 0}}},
		{path: v1Root, auth: authPublic, ops: []op{{"GET", s.v1Document, none, 0}}},
		{path: "/v1/lookup", auth: authRamdisk, since: v22Ramdisk, listed: true, ops: []op{{"GET", s.lookup, none, 0}}},
		{path: "/v1/heartbeat/:node", auth: authRamdisk, since: v22Ramdisk, listed: true, ops: []op{{"POST", s.heartbeat, none, 0}}},
		{path: "/v1/continue_inspection", auth: authRamdisk, since: v84ContinueInspection, gate: gateInspection, ops: []op{{"POST", s.continueInspection, none, 0}}},
		// Neutron's port events: events.go.
		{path: "/v1/events", auth: authUser, since: v54Events, gate: gateInHandler, listed: true, ops: []op{
			{"POST", s.postEvents, routeRule{onGlobal, "baremetal:events:post", ""}, 0},
		}},

		{path: "/v1/nodes", auth: authUser, listed: true, ops: []op{
			{"GET", s.listNodes, routeRule{onNodeList, "", "baremetal:node:list"}, 0},
			{"POST", s.createNode, routeRule{onNodeCreate, "baremetal:node:create", ""}, 0},
		}},
		{path: "/v1/nodes/detail", auth: authUser, ops: []op{
			{"GET", s.listNodesDetail, routeRule{onNodeList, "", "baremetal:node:list"}, 0},
		}},
		{path: "/v1/nodes/:node", auth: authUser, ops: []op{
			{"GET", s.showNode, routeRule{onNode, "baremetal:node:get", ""}, 0},
			{"PATCH", s.onNode(s.patchNode), routeRule{onNodePatch, "", ""}, 0},
			{"DELETE", s.onNode(s.deleteNode), routeRule{onNodeDelete, "baremetal:node:delete", ""}, 0},
		}},
		{path: "/v1/nodes/:node/validate", auth: authUser, ops: []op{
			{"GET", s.onNode(s.validate), routeRule{onNode, "baremetal:node:validate", ""}, 0},
		}},
		{path: "/v1/nodes/:node/states", auth: authUser, ops: []op{
			{"GET", s.onNode(s.states), routeRule{onNode, "baremetal:node:get_states", ""}, 0},
		}},
		{path: "/v1/nodes/:node/states/provision", auth: authUser, ops: []op{
			{"PUT", s.provision, routeRule{onNodeProvision, "baremetal:node:set_provision_state", ""}, 0},
		}},
		{path: "/v1/nodes/:node/states/power", auth: authUser, ops: []op{
			{"PUT", s.power, routeRule{onNode, "baremetal:node:set_power_state", ""}, 0},
		}},
		// The console: nodes_console.go.
		{path: "/v1/nodes/:node/states/console", auth: authUser, ops: []op{
			{"GET", s.onNode(s.getConsole), routeRule{onNode, "baremetal:node:get_console", ""}, 0},
			{"PUT", s.onNode(s.setConsole), routeRule{onNode, "baremetal:node:set_console_state", ""}, 0},
		}},
		// Boot mode and secure boot: nodes_bootmode.go.
		{path: "/v1/nodes/:node/states/boot_mode", auth: authUser, since: v76BootModeChange, ops: []op{
			{"PUT", s.onNode(s.setBootMode), routeRule{onNode, "baremetal:node:set_boot_mode", ""}, 0},
		}},
		{path: "/v1/nodes/:node/states/secure_boot", auth: authUser, since: v76BootModeChange, ops: []op{
			{"PUT", s.onNode(s.setSecureBoot), routeRule{onNode, "baremetal:node:set_secure_boot", ""}, 0},
		}},
		// RAID: nodes_raid.go.
		{path: "/v1/nodes/:node/states/raid", auth: authUser, since: v12RAIDConfig, gate: gateNotAcceptable, ops: []op{
			{"PUT", s.onNode(s.setRAIDConfig), routeRule{onNode, "baremetal:node:set_raid_state", ""}, 0},
		}},
		{path: "/v1/nodes/:node/maintenance", auth: authUser, ops: []op{
			{"PUT", s.onNode(s.setMaintenance), routeRule{onNode, "baremetal:node:set_maintenance", ""}, 0},
			{"DELETE", s.onNode(s.unsetMaintenance), routeRule{onNode, "baremetal:node:clear_maintenance", ""}, 0},
		}},
		{path: "/v1/nodes/:node/management/boot_device", auth: authUser, ops: []op{
			{"GET", s.onNode(s.getBootDevice), routeRule{onNode, "baremetal:node:get_boot_device", ""}, 0},
			{"PUT", s.onNode(s.setBootDevice), routeRule{onNode, "baremetal:node:set_boot_device", ""}, 0},
		}},
		{path: "/v1/nodes/:node/management/boot_device/supported", auth: authUser, ops: []op{
			{"GET", s.onNode(s.supportedBootDevices), routeRule{onNode, "baremetal:node:get_boot_device", ""}, 0},
		}},
		{path: "/v1/nodes/:node/management/inject_nmi", auth: authUser, since: v29InjectNMI, ops: []op{
			{"PUT", s.onNode(s.injectNMI), routeRule{onNode, "baremetal:node:inject_nmi", ""}, 0},
		}},
		// Indicators: Ironic's API reference says 1.63, but its indicator
		// controller never checks the version, so Ironic serves them at
		// every version (the route contract, apiserver/testdata/ironic-routes.tsv).
		{path: "/v1/nodes/:node/management/indicators", auth: authUser, ops: []op{
			{"GET", s.onNode(s.listIndicators), routeRule{onNode, "baremetal:node:get_indicator_state", ""}, 0},
		}},
		{path: "/v1/nodes/:node/management/indicators/:indicator", auth: authUser, ops: []op{
			{"GET", s.onNode(s.getIndicator), routeRule{onNode, "baremetal:node:get_indicator_state", ""}, 0},
			{"PUT", s.onNode(s.setIndicator), routeRule{onNode, "baremetal:node:set_indicator_state", ""}, 0},
		}},
		{path: "/v1/nodes/:node/history", auth: authUser, since: v78History, ops: []op{
			{"GET", s.onNode(s.listHistory), routeRule{onNode, "baremetal:node:history:get", ""}, 0},
		}},
		{path: "/v1/nodes/:node/history/:event", auth: authUser, since: v78History, ops: []op{
			{"GET", s.onNode(s.showHistory), routeRule{onNode, "baremetal:node:history:get", ""}, 0},
		}},
		{path: "/v1/nodes/:node/inventory", auth: authUser, since: v81Inventory, ops: []op{
			{"GET", s.onNode(s.inventory), routeRule{onNode, "baremetal:node:inventory:get", ""}, 0},
		}},
		// BIOS settings (registry fields 1.74): nodes_bios.go.
		{path: "/v1/nodes/:node/bios", auth: authUser, since: v40BIOSIface, ops: []op{
			{"GET", s.onNode(s.listBIOS), routeRule{onNode, "baremetal:node:bios:get", ""}, 0},
		}},
		{path: "/v1/nodes/:node/bios/:setting", auth: authUser, since: v40BIOSIface, ops: []op{
			{"GET", s.onNode(s.showBIOS), routeRule{onNode, "baremetal:node:bios:get", ""}, 0},
		}},
		{path: "/v1/nodes/:node/firmware", auth: authUser, since: v86FirmwareInterface, ops: []op{
			{"GET", s.onNode(s.listFirmware), routeRule{onNode, "baremetal:node:firmware:get", ""}, 0},
		}},
		{path: "/v1/nodes/:node/children", auth: authUser, since: v83ParentChildNodes, ops: []op{
			{"GET", s.onNode(s.listChildren), routeRule{onNodeSubList, "baremetal:node:get", "baremetal:node:list"}, 0},
		}},
		// Attach and detach came in 1.89, reading the attachment in 1.93.
		{path: "/v1/nodes/:node/vmedia", auth: authUser, since: v89AttachDetachVmedia, ops: []op{
			{"POST", s.onNode(s.attachVirtualMedia), routeRule{onNode, "baremetal:node:vmedia:attach", ""}, 0},
			{"DELETE", s.onNode(s.detachVirtualMedia), routeRule{onNode, "baremetal:node:vmedia:detach", ""}, 0},
			{"GET", s.onNode(s.getVirtualMedia), routeRule{onNode, "baremetal:node:get", ""}, v93GetVmedia},
		}},
		// Vendor passthru: nodes_passthru.go. A method answers the HTTP
		// methods it declares (hardware/vendor.go).
		{path: "/v1/nodes/:node/vendor_passthru", auth: authUser, ops: vendorOps(requireVendorMethod(s.onNode(s.callVendorMethod)), routeRule{onNode, "baremetal:node:vendor_passthru", ""})},
		{path: "/v1/nodes/:node/vendor_passthru/methods", auth: authUser, ops: []op{
			{"GET", s.onNode(s.listVendorMethods), routeRule{onNode, "baremetal:node:vendor_passthru", ""}, 0},
		}},
		// The method as a path segment, as python-ironicclient calls it.
		{path: "/v1/nodes/:node/vendor_passthru/:method", auth: authUser, ops: vendorOps(s.onNode(s.callVendorMethod), routeRule{onNode, "baremetal:node:vendor_passthru", ""})},
		{path: "/v1/nodes/:node/allocation", auth: authUser, since: v52Allocation, ops: []op{
			{"GET", s.onNode(s.showNodeAllocation), routeRule{onNodeAllocation, "baremetal:allocation:get", ""}, 0},
			{"DELETE", s.onNode(s.deleteNodeAllocation), routeRule{onNodeAllocation, "baremetal:allocation:delete", ""}, 0},
		}},
		{path: "/v1/nodes/:node/traits", auth: authUser, since: v37Traits, gate: gateAsNode, ops: []op{
			{"GET", s.onNode(s.listTraits), routeRule{onNode, "baremetal:node:traits:list", ""}, 0},
			{"PUT", s.onNode(s.setTraits), routeRule{onNode, "baremetal:node:traits:set", ""}, 0},
			{"DELETE", s.onNode(s.removeTraits), routeRule{onNode, "baremetal:node:traits:delete", ""}, 0},
		}},
		{path: "/v1/nodes/:node/traits/:trait", auth: authUser, since: v37Traits, gate: gateAsNode, ops: []op{
			{"PUT", s.onNode(s.addTrait), routeRule{onNode, "baremetal:node:traits:set", ""}, 0},
			{"DELETE", s.onNode(s.removeTraits), routeRule{onNode, "baremetal:node:traits:delete", ""}, 0},
		}},
		{path: "/v1/nodes/:node/ports", auth: authUser, ops: []op{
			{"GET", s.onNode(s.listNodePorts), routeRule{onNodeSubList, "baremetal:port:get", "baremetal:port:list"}, 0},
		}},
		{path: "/v1/nodes/:node/ports/detail", auth: authUser, ops: []op{
			{"GET", s.onNode(s.listNodePortsDetail), routeRule{onNodeSubList, "baremetal:port:get", "baremetal:port:list"}, 0},
		}},
		{path: "/v1/nodes/:node/portgroups", auth: authUser, since: v24PortgroupSub, ops: []op{
			{"GET", s.onNode(s.listNodePortgroups), routeRule{onNodeSubList, "baremetal:portgroup:get", "baremetal:portgroup:list"}, 0},
		}},
		{path: "/v1/nodes/:node/portgroups/detail", auth: authUser, since: v24PortgroupSub, ops: []op{
			{"GET", s.onNode(s.listNodePortgroupsDetail), routeRule{onNodeSubList, "baremetal:portgroup:get", "baremetal:portgroup:list"}, 0},
		}},
		// VIFs: nodes_vifs.go.
		{path: "/v1/nodes/:node/vifs", auth: authUser, since: v28VIFs, ops: []op{
			{"GET", s.onNode(s.listVIFs), routeRule{onNode, "baremetal:node:vif:list", ""}, 0},
			{"POST", s.onNode(s.attachVIF), routeRule{onNode, "baremetal:node:vif:attach", ""}, 0},
		}},
		{path: "/v1/nodes/:node/vifs/:vif", auth: authUser, since: v28VIFs, ops: []op{
			{"DELETE", s.onNode(s.detachVIF), routeRule{onNode, "baremetal:node:vif:detach", ""}, 0},
		}},
		// A node's volume objects: its lists are served; Ironic has no
		// other route below a node (operationNotPermitted, 403 for
		// everyone who may see the node).
		{path: "/v1/nodes/:node/volume", auth: authUser, since: v32Volume, ops: []op{
			{"GET", s.volumeDocument, routeRule{onNode, "baremetal:volume:get", ""}, 0},
		}},
		{path: "/v1/nodes/:node/volume/connectors", auth: authUser, since: v32Volume, listed: true, ops: []op{
			{"GET", connectorKind.listHandler(s, true), routeRule{onNodeSubList, "baremetal:volume:get", "baremetal:volume:list"}, 0},
			{"POST", notUnderNode, routeRule{onNode, "baremetal:volume:get", ""}, 0},
		}},
		{path: "/v1/nodes/:node/volume/connectors/:uuid", auth: authUser, since: v32Volume, ops: []op{
			{"GET", notUnderNode, routeRule{onNode, "baremetal:volume:get", ""}, 0},
			{"PATCH", notUnderNode, routeRule{onNode, "baremetal:volume:get", ""}, 0},
			{"DELETE", notUnderNode, routeRule{onNode, "baremetal:volume:get", ""}, 0},
		}},
		{path: "/v1/nodes/:node/volume/targets", auth: authUser, since: v32Volume, listed: true, ops: []op{
			{"GET", targetKind.listHandler(s, true), routeRule{onNodeSubList, "baremetal:volume:get", "baremetal:volume:list"}, 0},
			{"POST", notUnderNode, routeRule{onNode, "baremetal:volume:get", ""}, 0},
		}},
		{path: "/v1/nodes/:node/volume/targets/:uuid", auth: authUser, since: v32Volume, ops: []op{
			{"GET", notUnderNode, routeRule{onNode, "baremetal:volume:get", ""}, 0},
			{"PATCH", notUnderNode, routeRule{onNode, "baremetal:volume:get", ""}, 0},
			{"DELETE", notUnderNode, routeRule{onNode, "baremetal:volume:get", ""}, 0},
		}},

		{path: "/v1/ports", auth: authUser, listed: true, ops: []op{
			{"GET", s.listPorts, routeRule{onNodeList, "", "baremetal:port:list"}, 0},
			{"POST", s.createPort, routeRule{onCreateForNode, "baremetal:port:create", ""}, 0},
		}},
		{path: "/v1/ports/detail", auth: authUser, ops: []op{
			{"GET", s.listPortsDetail, routeRule{onNodeList, "", "baremetal:port:list"}, 0},
		}},
		{path: "/v1/ports/:port", auth: authUser, ops: []op{
			{"GET", s.showPort, routeRule{onPort, "baremetal:port:get", ""}, 0},
			{"PATCH", s.onPort(s.patchPort), routeRule{onPort, "baremetal:port:update", ""}, 0},
			{"DELETE", s.onPort(s.deletePort), routeRule{onPort, "baremetal:port:delete", ""}, 0},
		}},

		// Port groups: portgroups_*.go.
		{path: "/v1/portgroups", auth: authUser, since: v23Portgroups, listed: true, ops: []op{
			{"GET", s.listPortgroups, routeRule{onNodeList, "", "baremetal:portgroup:list"}, 0},
			{"POST", s.createPortgroup, routeRule{onCreateForNode, "baremetal:portgroup:create", ""}, 0},
		}},
		{path: "/v1/portgroups/detail", auth: authUser, since: v23Portgroups, ops: []op{
			{"GET", s.listPortgroupsDetail, routeRule{onNodeList, "", "baremetal:portgroup:list"}, 0},
		}},
		{path: "/v1/portgroups/:portgroup", auth: authUser, since: v23Portgroups, ops: []op{
			{"GET", s.showPortgroup, routeRule{onPortgroup, "baremetal:portgroup:get", ""}, 0},
			{"PATCH", s.onPortgroup(s.patchPortgroup), routeRule{onPortgroup, "baremetal:portgroup:update", ""}, 0},
			{"DELETE", s.onPortgroup(s.deletePortgroup), routeRule{onPortgroup, "baremetal:portgroup:delete", ""}, 0},
		}},
		{path: "/v1/portgroups/:portgroup/ports", auth: authUser, since: v24PortgroupSub, ops: []op{
			{"GET", s.onPortgroup(s.listPortgroupPorts), routeRule{onPortgroupSubList, "baremetal:port:get", "baremetal:port:list"}, 0},
		}},
		{path: "/v1/portgroups/:portgroup/ports/detail", auth: authUser, since: v24PortgroupSub, ops: []op{
			{"GET", s.onPortgroup(s.listPortgroupPortsDetail), routeRule{onPortgroupSubList, "baremetal:port:get", "baremetal:port:list"}, 0},
		}},

		// Volume connectors and targets: volume_crud.go.
		{path: "/v1/volume", auth: authUser, since: v32Volume, listed: true, ops: []op{
			{"GET", s.volumeDocument, routeRule{onGlobal, "baremetal:volume:get", ""}, 0},
		}},
		{path: "/v1/volume/connectors", auth: authUser, since: v32Volume, listed: true, ops: []op{
			{"GET", connectorKind.listHandler(s, false), routeRule{onNodeList, "", "baremetal:volume:list"}, 0},
			{"POST", connectorKind.createHandler(s), routeRule{onCreateForNode, "baremetal:volume:create", ""}, 0},
		}},
		{path: "/v1/volume/connectors/:uuid", auth: authUser, since: v32Volume, ops: []op{
			{"GET", connectorKind.show(s), routeRule{onConnector, "baremetal:volume:get", ""}, 0},
			{"PATCH", connectorKind.patchHandler(s), routeRule{onConnector, "baremetal:volume:update", ""}, 0},
			{"DELETE", connectorKind.deleteHandler(s), routeRule{onConnector, "baremetal:volume:delete", ""}, 0},
		}},
		{path: "/v1/volume/targets", auth: authUser, since: v32Volume, listed: true, ops: []op{
			{"GET", targetKind.listHandler(s, false), routeRule{onNodeList, "", "baremetal:volume:list"}, 0},
			{"POST", targetKind.createHandler(s), routeRule{onCreateForNode, "baremetal:volume:create", ""}, 0},
		}},
		{path: "/v1/volume/targets/:uuid", auth: authUser, since: v32Volume, ops: []op{
			{"GET", targetKind.show(s), routeRule{onVolumeTarget, "baremetal:volume:get", ""}, 0},
			{"PATCH", targetKind.patchHandler(s), routeRule{onVolumeTarget, "baremetal:volume:update", ""}, 0},
			{"DELETE", targetKind.deleteHandler(s), routeRule{onVolumeTarget, "baremetal:volume:delete", ""}, 0},
		}},

		{path: "/v1/chassis", auth: authUser, listed: true, ops: []op{
			{"GET", s.listChassis, routeRule{onGlobal, "baremetal:chassis:get", ""}, 0},
			{"POST", s.createChassis, routeRule{onGlobal, "baremetal:chassis:create", ""}, 0},
		}},
		{path: "/v1/chassis/detail", auth: authUser, ops: []op{
			{"GET", s.listChassisDetail, routeRule{onGlobal, "baremetal:chassis:get", ""}, 0},
		}},
		{path: "/v1/chassis/:chassis", auth: authUser, ops: []op{
			{"GET", s.showChassis, routeRule{onGlobal, "baremetal:chassis:get", ""}, 0},
			{"PATCH", s.onChassis(s.patchChassis), routeRule{onGlobal, "baremetal:chassis:update", ""}, 0},
			{"DELETE", s.onChassis(s.deleteChassis), routeRule{onGlobal, "baremetal:chassis:delete", ""}, 0},
		}},
		{path: "/v1/chassis/:chassis/nodes", auth: authUser, ops: []op{
			{"GET", s.onChassis(s.listChassisNodes), routeRule{onNodeList, "", "baremetal:node:list"}, 0},
		}},
		{path: "/v1/chassis/:chassis/nodes/detail", auth: authUser, ops: []op{
			{"GET", s.onChassis(s.listChassisNodesDetail), routeRule{onNodeList, "", "baremetal:node:list"}, 0},
		}},
		{path: "/v1/shards", auth: authUser, since: v82Shard, listed: true, ops: []op{
			{"GET", s.listShards, routeRule{onGlobal, "baremetal:shards:get", ""}, 0},
		}},

		// Deploy templates and runbooks: deploy_templates_crud.go,
		// runbooks_crud.go. Runbooks are checked against their own owner,
		// with the public fallback of runbook.py (policy_runbooks.go).
		{path: "/v1/deploy_templates", auth: authUser, since: v55DeployTemplates, gate: gateNotAllowed, listed: true, ops: []op{
			{"GET", templateKind.listHandler(s), routeRule{onGlobal, "baremetal:deploy_template:get", ""}, 0},
			{"POST", templateKind.createHandler(s), routeRule{onGlobal, "baremetal:deploy_template:create", ""}, 0},
		}},
		{path: "/v1/deploy_templates/:ident", auth: authUser, since: v55DeployTemplates, gate: gateNotAllowed, ops: []op{
			{"GET", templateKind.show(s), routeRule{onGlobal, "baremetal:deploy_template:get", ""}, 0},
			{"PATCH", templateKind.patchHandler(s), routeRule{onGlobal, "baremetal:deploy_template:update", ""}, 0},
			{"DELETE", templateKind.deleteHandler(s), routeRule{onGlobal, "baremetal:deploy_template:delete", ""}, 0},
		}},
		{path: "/v1/runbooks", auth: authUser, since: v92Runbooks, gate: gateNotAllowed, listed: true, ops: []op{
			{"GET", runbookKind.listHandler(s), routeRule{onNodeList, "", "baremetal:runbook:list"}, 0},
			{"POST", runbookKind.createHandler(s), routeRule{onRunbookCreate, "baremetal:runbook:create", ""}, 0},
		}},
		{path: "/v1/runbooks/:ident", auth: authUser, since: v92Runbooks, gate: gateNotAllowed, ops: []op{
			{"GET", runbookKind.show(s), routeRule{onRunbook, "baremetal:runbook:get", ""}, 0},
			{"PATCH", runbookKind.patchHandler(s), routeRule{onRunbookPatch, "", ""}, 0},
			{"DELETE", runbookKind.deleteHandler(s), routeRule{onRunbook, "baremetal:runbook:delete", ""}, 0},
		}},
		// Runbook traits (API 1.112): runbooks_traits.go.
		{path: "/v1/runbooks/:ident/traits", auth: authUser, since: v112RunbookTraits, ops: []op{
			{"GET", s.listRunbookTraits, routeRule{onRunbookTraits, "baremetal:runbook:get", ""}, 0},
			{"PUT", s.putRunbookTraits, routeRule{onRunbookTraits, "baremetal:runbook:update", ""}, 0},
			{"DELETE", s.removeRunbookTraits, routeRule{onRunbookTraits, "baremetal:runbook:update", ""}, 0},
		}},
		{path: "/v1/runbooks/:ident/traits/:trait", auth: authUser, since: v112RunbookTraits, ops: []op{
			{"PUT", s.addRunbookTrait, routeRule{onRunbookTraits, "baremetal:runbook:update", ""}, 0},
			{"DELETE", s.removeRunbookTraits, routeRule{onRunbookTraits, "baremetal:runbook:update", ""}, 0},
		}},

		// Inspection rules: inspection_rules.go.
		{path: "/v1/inspection_rules", auth: authUser, since: v96InspectionRules, gate: gateNotAllowed, listed: true, ops: []op{
			{"GET", s.listInspectionRules, routeRule{onGlobal, "baremetal:inspection_rule:get", ""}, 0},
			{"POST", s.createInspectionRule, routeRule{onGlobal, "baremetal:inspection_rule:create", ""}, 0},
			{"DELETE", s.deleteAllInspectionRules, routeRule{onGlobal, "baremetal:inspection_rule:delete", ""}, 0},
		}},
		{path: "/v1/inspection_rules/:uuid", auth: authUser, since: v96InspectionRules, gate: gateNotAllowed, ops: []op{
			{"GET", s.showInspectionRule, routeRule{onGlobal, "baremetal:inspection_rule:get", ""}, 0},
			{"PATCH", s.patchInspectionRule, routeRule{onGlobal, "baremetal:inspection_rule:update", ""}, 0},
			{"DELETE", s.deleteInspectionRule, routeRule{onGlobal, "baremetal:inspection_rule:delete", ""}, 0},
		}},

		// Allocations: allocations_*.go, policy_allocations.go.
		{path: "/v1/allocations", auth: authUser, since: v52Allocation, gate: gateNotAllowed, listed: true, ops: []op{
			{"GET", s.listAllocations, routeRule{onNodeList, "", "baremetal:allocation:list"}, 0},
			{"POST", s.createAllocation, routeRule{onAllocationCreate, "baremetal:allocation:create", ""}, 0},
		}},
		{path: "/v1/allocations/:ident", auth: authUser, since: v52Allocation, gate: gateNotAllowed, ops: []op{
			{"GET", s.showAllocation, routeRule{onAllocation, "baremetal:allocation:get", ""}, 0},
			{"PATCH", s.patchAllocation, routeRule{onAllocation, "baremetal:allocation:update", ""}, v57AllocationUpdate},
			{"DELETE", s.deleteAllocation, routeRule{onAllocation, "baremetal:allocation:delete", ""}, 0},
		}},

		{path: "/v1/drivers", auth: authUser, listed: true, ops: []op{
			{"GET", writesOwnErrors(s.listDrivers), routeRule{onGlobal, "baremetal:driver:get", ""}, 0},
		}},
		{path: "/v1/drivers/:name", auth: authUser, ops: []op{
			{"GET", writesOwnErrors(s.showDriver), routeRule{onGlobal, "baremetal:driver:get", ""}, 0},
		}},
		{path: "/v1/drivers/:name/properties", auth: authUser, ops: []op{
			{"GET", writesOwnErrors(s.driverProperties), routeRule{onGlobal, "baremetal:driver:get_properties", ""}, 0},
		}},
		{path: "/v1/drivers/:name/vendor_passthru", auth: authUser, ops: vendorOps(s.callDriverVendorMethod, routeRule{onGlobal, "baremetal:driver:vendor_passthru", ""})},
		{path: "/v1/drivers/:name/vendor_passthru/methods", auth: authUser, ops: []op{
			{"GET", s.listDriverVendorMethods, routeRule{onGlobal, "baremetal:driver:vendor_passthru", ""}, 0},
		}},
		{path: "/v1/drivers/:name/vendor_passthru/:method", auth: authUser, ops: vendorOps(s.callDriverVendorMethod, routeRule{onGlobal, "baremetal:driver:vendor_passthru", ""})},
		{path: "/v1/drivers/:name/raid/logical_disk_properties", auth: authUser, since: v12RAIDConfig, gate: gateNotAcceptable, ops: []op{
			{"GET", s.raidLogicalDiskProperties, routeRule{onGlobal, "baremetal:driver:get_raid_logical_disk_properties", ""}, 0},
		}},
		{path: "/v1/conductors", auth: authUser, since: v49Conductors, listed: true, ops: []op{
			{"GET", s.listConductors, routeRule{onGlobal, "baremetal:conductor:get", ""}, 0},
		}},
		{path: "/v1/conductors/:name", auth: authUser, since: v49Conductors, ops: []op{
			{"GET", s.showConductor, routeRule{onGlobal, "baremetal:conductor:get", ""}, 0},
		}},
		// ironflow's rollouts (docs/rollouts.md): rollouts.go.
		{path: rolloutsRoot, auth: authUser, ops: []op{
			{"GET", s.listRollouts, routeRule{onRolloutList, "ironflow:rollout:list", ""}, 0},
			{"POST", s.createRollout, routeRule{onRolloutCreate, "ironflow:rollout:create", ""}, 0},
		}},
		{path: rolloutsRoot + "/:uuid", auth: authUser, ops: []op{
			{"GET", s.showRollout, routeRule{onRollout, "ironflow:rollout:get", ""}, 0},
		}},
		{path: rolloutsRoot + "/:uuid/pause", auth: authUser, ops: []op{
			{"POST", s.signalRollout(workflows.SignalRolloutPause), routeRule{onRollout, "ironflow:rollout:update", ""}, 0},
		}},
		{path: rolloutsRoot + "/:uuid/resume", auth: authUser, ops: []op{
			{"POST", s.signalRollout(workflows.SignalRolloutResume), routeRule{onRollout, "ironflow:rollout:update", ""}, 0},
		}},
		{path: rolloutsRoot + "/:uuid/approve", auth: authUser, ops: []op{
			{"POST", s.signalRollout(workflows.SignalRolloutApprove), routeRule{onRollout, "ironflow:rollout:update", ""}, 0},
		}},
		{path: rolloutsRoot + "/:uuid/abort", auth: authUser, ops: []op{
			{"POST", s.signalRollout(workflows.SignalRolloutAbort), routeRule{onRollout, "ironflow:rollout:update", ""}, 0},
		}},
	}
}

// register serves the table on r: /v1 paths behind microversion
// negotiation and the query check, authUser operations behind
// authentication and their policy rule, every operation behind its gate.
func (s *server) register(r *gin.Engine, table []route) {
	v1 := r.Group(v1Root, versionMiddleware, s.checkQuery)
	for _, rt := range table {
		for _, o := range rt.ops {
			var chain []gin.HandlerFunc
			if rt.auth == authUser {
				chain = append(chain, s.authenticate, s.authorize(o.policy))
			}
			chain = append(chain, s.handle(rt.gated(o)))
			if p, ok := strings.CutPrefix(rt.path, v1Root); ok {
				v1.Handle(o.method, p, chain...)
			} else {
				r.Handle(o.method, rt.path, chain...)
			}
		}
	}
}

// sinceFor is the microversion that introduced o on rt.
func (rt route) sinceFor(o op) int { return max(rt.since, o.since) }

// gated is o's handler behind rt's microversion gate.
func (rt route) gated(o op) handler {
	since := rt.sinceFor(o)
	switch {
	case rt.gate == gateInspection:
		return continueInspectionGate(since, o.h)
	case since == 0 || rt.gate == gateInHandler:
		return o.h
	case rt.gate == gateNotAllowed:
		// An operation introduced after its route (an allocation's
		// PATCH, 1.57) answers between the two in its handler, with its
		// own words (allocation.py's patch).
		return notAllowedBelow(rt.since, strings.ReplaceAll(rt.resource(), "_", " "), o.h)
	case rt.gate == gateNotAcceptable:
		return refusedBelow(since, notAcceptable(), o.h)
	case rt.gate == gateAsNode:
		switch o.method {
		case http.MethodGet:
			return refusedBelow(since, notAcceptable(), o.h)
		case http.MethodPut:
			return refusedBelow(since, methodNotAllowed(o.method), o.h)
		}
	}
	return introducedIn(since, o.h)
}

// hiddenBelow reports whether rt answers as an unknown path at minor: a
// 404 for any method, where Ironic hides the endpoint below its version.
func (rt route) hiddenBelow(minor int) bool {
	return minor < rt.since && (rt.gate == gateNotFound || rt.gate == gateInHandler)
}

// matchRoute finds the table's route of a request path, the one with the
// most literal segments when patterns overlap ("/v1/nodes/detail" over
// "/v1/nodes/:node").
func matchRoute(table []route, path string) (route, bool) {
	segs := strings.Split(path, "/")
	best, bestLiterals := -1, -1
	for i, rt := range table {
		pat := strings.Split(rt.path, "/")
		if len(pat) != len(segs) {
			continue
		}
		literals := 0
		for j, p := range pat {
			switch {
			case strings.HasPrefix(p, ":") && segs[j] != "":
			case p == segs[j]:
				literals++
			default:
				literals = -1
			}
			if literals < 0 {
				break
			}
		}
		if literals > bestLiterals {
			best, bestLiterals = i, literals
		}
	}
	if best < 0 {
		return route{}, false
	}
	return table[best], true
}

// resource is the first segment of the path below /v1: "nodes".
func (rt route) resource() string {
	seg, _, _ := strings.Cut(strings.TrimPrefix(rt.path, v1Root+"/"), "/")
	return seg
}

// notAllowedBelow hides h below minor as Ironic's deploy template and
// runbook controllers do: 404 for a GET, 405 naming what (plural) for the
// other methods.
func notAllowedBelow(minor int, what string, h handler) handler {
	return func(c *gin.Context) error {
		if ver(c) < minor {
			if c.Request.Method == http.MethodGet {
				return resourceNotFound()
			}
			return errorf(http.StatusMethodNotAllowed, "The API version does not allow %s", what)
		}
		return h(c)
	}
}

// vendorOps is a vendor passthru path: every HTTP method a vendor method
// may declare reaches h, which checks it against the method's.
func vendorOps(h handler, rule routeRule) []op {
	var ops []op
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		ops = append(ops, op{m, h, rule, 0})
	}
	return ops
}

// refusedBelow answers refusal below minor.
func refusedBelow(minor int, refusal *apiError, h handler) handler {
	return func(c *gin.Context) error {
		if ver(c) < minor {
			return refusal
		}
		return h(c)
	}
}

// writesOwnErrors adapts an endpoint that answers its errors itself.
func writesOwnErrors(h gin.HandlerFunc) handler {
	return func(c *gin.Context) error {
		h(c)
		return nil
	}
}

// indexEntry is a name an index document links, from a microversion on.
type indexEntry struct {
	name  string
	since int
}

// indexes are the links of each index document (by its path): the listed
// paths below it.
func indexes(table []route) map[string][]indexEntry {
	docs := map[string][]indexEntry{}
	for _, rt := range table {
		if !rt.listed {
			continue
		}
		doc := ""
		for _, up := range table {
			if strings.HasPrefix(rt.path, up.path+"/") && len(up.path) > len(doc) {
				doc = up.path
			}
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(rt.path, doc+"/"), "/")
		docs[doc] = append(docs[doc], indexEntry{name, rt.since})
	}
	return docs
}

// indexed are the names the index document at path doc links at version
// minor.
func (s *server) indexed(doc string, minor int) []string {
	var names []string
	for _, e := range s.indexes[doc] {
		if minor >= e.since {
			names = append(names, e.name)
		}
	}
	return names
}
