package apiserver

// Ironic's default policy, rule by rule as ironic/common/policy.py defines
// it (the 2023.x "secure RBAC" defaults: enforce_scope and
// enforce_new_defaults on). The composite check strings keep Ironic's names.
const (
	polSystemAdmin   = `role:admin and system_scope:all`
	polSystemMember  = `(role:member and system_scope:all) or rule:service_role`
	polSystemReader  = `(role:reader and system_scope:all) or (role:service and system_scope:all) or rule:service_role`
	polProjectAdmin  = `role:admin and project_id:%(node.owner)s`
	polProjectMember = `role:member and (project_id:%(node.owner)s or project_id:%(node.lessee)s)`
	polProjectReader = `role:reader and (project_id:%(node.owner)s or project_id:%(node.lessee)s)`
	polSystemService = `role:service and system_scope:all`
	polProjectSvc    = `role:service and project_id:%(node.owner)s`

	polSystemOrProjectMember = `(` + polSystemMember + `) or (` + polProjectMember + `) or (` + polSystemService + `)`
	polSystemOrProjectReader = `(` + polSystemReader + `) or (` + polProjectReader + `) or (` + polProjectSvc + `)`

	polOwnerAdmin    = `role:admin and project_id:%(node.owner)s`
	polOwnerManager  = `role:manager and project_id:%(node.owner)s`
	polOwnerMember   = `role:member and project_id:%(node.owner)s`
	polOwnerReader   = `role:reader and project_id:%(node.owner)s`
	polLesseeAdmin   = `role:admin and project_id:%(node.lessee)s`
	polLesseeManager = `role:manager and project_id:%(node.lessee)s`

	polAllocationOwnerMember = `role:member and project_id:%(allocation.owner)s`
	polAllocationOwnerReader = `role:reader and project_id:%(allocation.owner)s`

	polSystemOrOwnerMemberAndLesseeAdmin = `(` + polSystemMember + `) or (` + polSystemService + `) or (` + polOwnerMember + `) or (` + polLesseeAdmin + `) or (` + polLesseeManager + `) or (` + polProjectSvc + `)`
	polSystemAdminOrOwnerAdmin           = `(` + polSystemAdmin + `) or (` + polSystemService + `) or (` + polOwnerAdmin + `) or (` + polOwnerManager + `) or (` + polProjectSvc + `)`
	polSystemMemberOrOwnerAdmin          = `(` + polSystemMember + `) or (` + polSystemService + `) or (` + polOwnerAdmin + `) or (` + polOwnerManager + `) or (` + polProjectSvc + `)`
	polSystemMemberOrOwnerMember         = `(` + polSystemMember + `) or (` + polSystemService + `) or (` + polOwnerMember + `) or (` + polProjectSvc + `)`
	polSystemOrOwnerReader               = `(` + polSystemReader + `) or (` + polSystemService + `) or (` + polOwnerReader + `) or (` + polProjectSvc + `)`
	polSystemMemberOrOwnerLesseeAdmin    = `(` + polSystemMember + `) or (` + polSystemService + `) or (` + polOwnerAdmin + `) or (` + polOwnerManager + `) or (` + polLesseeAdmin + `) or (` + polLesseeManager + `) or (` + polProjectSvc + `)`

	polAllocationMember  = `(` + polSystemMember + `) or (` + polAllocationOwnerMember + `)`
	polAllocationReader  = `(` + polSystemReader + `) or (` + polAllocationOwnerReader + `)`
	polAllocationCreator = `(` + polSystemMember + `) or (role:member)`
	polAPIReader         = `(role:reader) or (role:service)`
	polTargetPropsReader = `(` + polSystemReader + `) or (role:admin)`

	// Runbooks (API 1.92) are checked against their own owner: a project
	// manager administers its project's runbooks, a project reader reads
	// them, and a public runbook is readable and usable by every project
	// (the public fallback is in policy_runbooks.go, not in a rule).
	polRunbookOwnerManager = `role:manager and project_id:%(runbook.owner)s`
	polRunbookOwnerReader  = `role:reader and project_id:%(runbook.owner)s`
	polRunbookAdmin        = `(` + polSystemMember + `) or (` + polRunbookOwnerManager + `) or role:service`
	polRunbookReader       = `(` + polSystemReader + `) or (` + polRunbookOwnerReader + `) or role:service`
	polRunbookCreator      = `(` + polSystemMember + `) or role:manager or role:service`
)

type defaultRule struct {
	name, check string
	scopes      []string
}

var (
	sysProj = []string{"system", "project"}
	sysOnly = []string{"system"}
)

// ironicDefaultRules are Ironic's rules by their names, so that a policy
// file written for Ironic overrides the same ones here.
var ironicDefaultRules = []defaultRule{
	{"service_role", `role:service and project_name:%(config.service_project_name)s`, nil},
	{"show_password", `!`, nil},
	{"show_instance_secrets", `!`, nil},

	{"baremetal:node:create", `(` + polSystemAdmin + `) or (` + polSystemService + `)`, sysProj},
	{"baremetal:node:create:self_owned_node", `(role:admin) or (role:service)`, sysProj},
	{"baremetal:node:list", polAPIReader, sysProj},
	{"baremetal:node:list_all", polSystemReader, sysProj},
	{"baremetal:node:get", polSystemOrProjectReader, sysProj},
	{"baremetal:node:get:filter_threshold", polSystemReader, sysProj},
	{"baremetal:node:get:last_error", polSystemOrOwnerReader, sysProj},
	{"baremetal:node:get:reservation", polSystemOrOwnerReader, sysProj},
	{"baremetal:node:get:driver_internal_info", polSystemOrOwnerReader, sysProj},
	{"baremetal:node:get:driver_info", polSystemOrOwnerReader, sysProj},
	{"baremetal:node:update:driver_info", polSystemMemberOrOwnerMember, sysProj},
	{"baremetal:node:update:properties", polSystemMemberOrOwnerMember, sysProj},
	{"baremetal:node:update:chassis_uuid", polSystemAdmin, sysProj},
	{"baremetal:node:update:instance_uuid", polSystemMemberOrOwnerMember, sysProj},
	{"baremetal:node:update:lessee", polSystemMemberOrOwnerMember, sysProj},
	{"baremetal:node:update:owner", polSystemMember, sysProj},
	{"baremetal:node:update:driver_interfaces", polSystemMemberOrOwnerAdmin, sysProj},
	{"baremetal:node:update:network_data", polSystemMemberOrOwnerMember, sysProj},
	{"baremetal:node:update:conductor_group", polSystemMember, sysProj},
	{"baremetal:node:update:name", polSystemMemberOrOwnerMember, sysProj},
	{"baremetal:node:update:retired", polSystemMemberOrOwnerMember, sysProj},
	{"baremetal:node:update", polSystemOrProjectMember, sysProj},
	{"baremetal:node:update_extra", polSystemOrProjectMember, sysProj},
	{"baremetal:node:update_instance_info", polSystemOrOwnerMemberAndLesseeAdmin, sysProj},
	{"baremetal:node:update_owner_provisioned", polSystemAdmin, sysOnly},
	{"baremetal:node:delete", polSystemAdmin, sysProj},
	{"baremetal:node:delete:self_owned_node", polProjectAdmin, sysProj},
	{"baremetal:node:validate", polSystemOrOwnerMemberAndLesseeAdmin, sysProj},
	{"baremetal:node:set_maintenance", polSystemOrOwnerMemberAndLesseeAdmin, sysProj},
	{"baremetal:node:clear_maintenance", polSystemOrOwnerMemberAndLesseeAdmin, sysProj},
	{"baremetal:node:get_boot_device", polSystemMemberOrOwnerAdmin, sysProj},
	{"baremetal:node:set_boot_device", polSystemMemberOrOwnerAdmin, sysProj},
	{"baremetal:node:get_indicator_state", polSystemOrProjectReader, sysProj},
	{"baremetal:node:set_indicator_state", polSystemMemberOrOwnerMember, sysProj},
	{"baremetal:node:inject_nmi", polSystemMemberOrOwnerAdmin, sysProj},
	{"baremetal:node:get_states", polSystemOrProjectReader, sysProj},
	{"baremetal:node:set_power_state", polSystemOrProjectMember, sysProj},
	{"baremetal:node:set_boot_mode", polSystemOrProjectMember, sysProj},
	{"baremetal:node:set_secure_boot", polSystemOrProjectMember, sysProj},
	{"baremetal:node:set_provision_state", polSystemOrOwnerMemberAndLesseeAdmin, sysProj},
	{"baremetal:node:set_raid_state", polSystemMemberOrOwnerMember, sysProj},
	{"baremetal:node:get_console", polSystemMemberOrOwnerMember, sysProj},
	{"baremetal:node:set_console_state", polSystemMemberOrOwnerMember, sysProj},
	{"baremetal:node:vif:list", polSystemOrProjectReader, sysProj},
	{"baremetal:node:vif:attach", polSystemOrOwnerMemberAndLesseeAdmin, sysProj},
	{"baremetal:node:vif:detach", polSystemOrOwnerMemberAndLesseeAdmin, sysProj},
	{"baremetal:node:traits:list", polSystemOrProjectReader, sysProj},
	{"baremetal:node:traits:set", polSystemMemberOrOwnerAdmin, sysProj},
	{"baremetal:node:traits:delete", polSystemMemberOrOwnerAdmin, sysProj},
	{"baremetal:node:bios:get", polSystemOrProjectReader, sysProj},
	{"baremetal:node:disable_cleaning", polSystemAdmin, sysOnly},
	{"baremetal:node:history:get", polSystemOrOwnerReader, sysProj},
	{"baremetal:node:inventory:get", polSystemOrOwnerReader, sysProj},
	{"baremetal:node:update:shard", polSystemAdmin, sysProj},
	{"baremetal:shards:get", polSystemReader, sysProj},
	{"baremetal:node:update:parent_node", polSystemMember, sysProj},
	{"baremetal:node:firmware:get", polSystemOrProjectReader, sysProj},
	{"baremetal:node:vmedia:attach", polSystemOrProjectMember, sysProj},
	{"baremetal:node:vmedia:detach", polSystemOrProjectMember, sysProj},
	{"baremetal:node:vendor_passthru", polSystemAdmin, sysProj},

	{"baremetal:port:get", polSystemOrProjectReader, sysProj},
	{"baremetal:port:list", polAPIReader, sysProj},
	{"baremetal:port:list_all", polSystemReader, sysProj},
	{"baremetal:port:create", polSystemAdminOrOwnerAdmin, sysProj},
	{"baremetal:port:delete", polSystemAdminOrOwnerAdmin, sysProj},
	{"baremetal:port:update", polSystemMemberOrOwnerAdmin, sysProj},

	{"baremetal:portgroup:get", polSystemOrProjectReader, sysProj},
	{"baremetal:portgroup:create", polSystemAdminOrOwnerAdmin, sysProj},
	{"baremetal:portgroup:delete", polSystemAdminOrOwnerAdmin, sysProj},
	{"baremetal:portgroup:update", polSystemMemberOrOwnerAdmin, sysProj},
	{"baremetal:portgroup:list", polAPIReader, sysProj},
	{"baremetal:portgroup:list_all", polSystemReader, sysProj},

	{"baremetal:chassis:get", polSystemReader, sysOnly},
	{"baremetal:chassis:create", polSystemAdmin, sysOnly},
	{"baremetal:chassis:delete", polSystemAdmin, sysOnly},
	{"baremetal:chassis:update", polSystemMember, sysOnly},

	{"baremetal:driver:get", polSystemReader, sysOnly},
	{"baremetal:driver:get_properties", polSystemReader, sysOnly},
	{"baremetal:driver:get_raid_logical_disk_properties", polSystemReader, sysOnly},
	{"baremetal:driver:vendor_passthru", polSystemAdmin, sysOnly},

	{"baremetal:node:ipa_heartbeat", ``, nil},
	{"baremetal:driver:ipa_lookup", ``, nil},
	{"baremetal:driver:ipa_continue_inspection", ``, nil},

	{"baremetal:volume:list_all", polSystemReader, sysProj},
	{"baremetal:volume:list", polAPIReader, sysProj},
	{"baremetal:volume:get", polSystemOrProjectReader, sysProj},
	{"baremetal:volume:create", polSystemMemberOrOwnerLesseeAdmin, sysProj},
	{"baremetal:volume:delete", polSystemMemberOrOwnerLesseeAdmin, sysProj},
	{"baremetal:volume:update", polSystemOrOwnerMemberAndLesseeAdmin, sysProj},
	{"baremetal:volume:view_target_properties", polTargetPropsReader, sysProj},

	{"baremetal:conductor:get", polSystemReader, sysProj},

	{"baremetal:allocation:get", polAllocationReader, sysProj},
	{"baremetal:allocation:list", polAPIReader, sysProj},
	{"baremetal:allocation:list_all", polSystemReader, sysProj},
	{"baremetal:allocation:create", polAllocationCreator, sysProj},
	{"baremetal:allocation:create_restricted", polSystemMember, sysProj},
	{"baremetal:allocation:delete", polAllocationMember, sysProj},
	{"baremetal:allocation:update", polAllocationMember, sysProj},

	{"baremetal:events:post", polSystemAdmin, sysOnly},

	{"baremetal:deploy_template:get", polSystemReader, sysProj},
	{"baremetal:deploy_template:create", polSystemAdmin, sysProj},
	{"baremetal:deploy_template:delete", polSystemAdmin, sysProj},
	{"baremetal:deploy_template:update", polSystemAdmin, sysProj},

	{"baremetal:inspection_rule:get", polSystemReader, sysProj},
	{"baremetal:inspection_rule:list_all", polSystemReader, sysProj},
	{"baremetal:inspection_rule:create", polSystemAdmin, sysProj},
	{"baremetal:inspection_rule:update", polSystemAdmin, sysProj},
	{"baremetal:inspection_rule:delete", polSystemAdmin, sysProj},

	{"baremetal:runbook:get", polRunbookReader, sysProj},
	{"baremetal:runbook:list", polAPIReader, sysProj},
	{"baremetal:runbook:list_all", polSystemReader, sysProj},
	{"baremetal:runbook:update", polRunbookAdmin, sysProj},
	{"baremetal:runbook:update:public", polSystemMember, sysProj},
	{"baremetal:runbook:update:owner", polSystemMember, sysProj},
	{"baremetal:runbook:create", polRunbookCreator, sysProj},
	{"baremetal:runbook:delete", polRunbookAdmin, sysProj},
	{"baremetal:runbook:use", polRunbookAdmin, sysProj},
}

// ironflowDefaultRules are the rules of ironflow's own resources, which
// Ironic does not have (docs/rollouts.md): a system member rolls out over
// any node, a project member over the nodes its project owns or leases
// (create without create_all); a rollout a project created is its
// project's to read (reader) and to pause, resume, approve and abort
// (member), as an allocation is its owner's.
const (
	polRolloutProjectMember = `role:member and project_id:%(rollout.project)s`
	polRolloutProjectReader = `role:reader and project_id:%(rollout.project)s`
)

var ironflowDefaultRules = []defaultRule{
	{"ironflow:rollout:get", `(` + polSystemReader + `) or (` + polRolloutProjectReader + `)`, sysProj},
	{"ironflow:rollout:list", polAPIReader, sysProj},
	{"ironflow:rollout:list_all", polSystemReader, sysProj},
	{"ironflow:rollout:create", `(` + polSystemMember + `) or (role:member)`, sysProj},
	{"ironflow:rollout:create_all", polSystemMember, sysProj},
	{"ironflow:rollout:update", `(` + polSystemMember + `) or (` + polRolloutProjectMember + `)`, sysProj},
}
