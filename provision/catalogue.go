package provision

// The step catalogue: the in-band steps the ironflow agent offers, written
// once. The agent advertises them (agent/steps.go: get_deploy_steps,
// get_clean_steps, get_service_steps); the API and the workflows check a
// user's steps against them before the agent has run on the node
// (workflows.KnownAgentSteps), as Ironic checks them against the steps its
// agent last reported.

// AgentSteps are the agent's steps of kind with IPA's priorities: the
// deploy steps write_image (80) and erase_devices_metadata (0, run only
// when named); the clean steps, of which the two automated erase steps run
// by priority and every other one only when asked for; and the service
// steps, the clean steps that leave an instance's disks and boot entries
// alone, none of them run unless asked for. The argument names keep IPA's
// [DEFAULT] options for the erase steps (enable_ata_secure_erase, ...) and
// IPA's driver_info knobs without their agent_burnin_<tool>_ prefix for
// the burn-ins (timeout for stress-ng's CPU and VM stressors, runtime and
// loops for fio), since ironflow runs neither tool.
func AgentSteps(kind StepKind) []Step {
	switch kind {
	case StepKindDeploy:
		return []Step{
			{StepID: StepWriteImage, Priority: 80, ArgsInfo: map[string]ArgInfo{
				"image_info":  {Description: "image to write: urls, checksum or os_hash_algo/os_hash_value, disk_format"},
				"configdrive": {Description: "gzip+base64 ISO 9660 config drive or its URL"},
			}},
			{StepID: StepEraseDevicesMetadata},
		}
	case StepKindClean:
		return []Step{
			{StepID: StepEraseDevicesMetadata, Priority: 99, Abortable: true},
			{StepID: StepEraseDevices, Priority: 10, Abortable: true, ArgsInfo: eraseArgs()},
			{StepID: stepEraseDevicesExpress, Abortable: true, ArgsInfo: map[string]ArgInfo{
				"enable_nvme_secure_erase": eraseArgs()["enable_nvme_secure_erase"]}},
			{StepID: stepErasePstore, Abortable: true},
			{StepID: stepCleanUEFINVRAM, Abortable: true, ArgsInfo: map[string]ArgInfo{
				"match_patterns": {Description: "regular expressions (a list, or one string) matched against each UEFI boot entry's description and device path; matching entries are removed from NVRAM and BootOrder. Default: \"(?i)^(ironflow|ironic|ipa)\""},
			}},
			{StepID: stepBurninCPU, Abortable: true, ArgsInfo: burninCPUArgs()},
			{StepID: stepBurninDisk, Abortable: true, ArgsInfo: map[string]ArgInfo{
				"runtime": {Description: "seconds of write/verify passes over every disk; 0 runs loops passes (IPA's agent_burnin_fio_disk_runtime)"},
				"loops":   {Description: "passes over every disk when runtime is 0 (default 4, IPA's agent_burnin_fio_disk_loops)"},
			}},
			{StepID: stepBurninMemory, Abortable: true, ArgsInfo: burninMemoryArgs()},
			{StepID: stepBurninNetwork, Abortable: true, ArgsInfo: burninNetworkArgs()},
		}
	case StepKindService:
		return []Step{
			{StepID: stepErasePstore, Abortable: true},
			{StepID: stepBurninCPU, Abortable: true, ArgsInfo: burninCPUArgs()},
			{StepID: stepBurninMemory, Abortable: true, ArgsInfo: burninMemoryArgs()},
			{StepID: stepBurninNetwork, Abortable: true, ArgsInfo: burninNetworkArgs()},
		}
	}
	return nil
}

// RAIDSteps are the raid interface's clean steps, as Ironic's raid
// interfaces declare them: the out-of-band ones (fake, redfish) and the
// agent's in-band software RAID (raid_interface agent) alike.
func RAIDSteps() []Step {
	return []Step{
		{StepID: StepID{Interface: "raid", Step: "create_configuration"}, ArgsInfo: map[string]ArgInfo{
			"create_root_volume":     {Description: "This specifies whether to create the root volume. Defaults to `True`."},
			"create_nonroot_volumes": {Description: "This specifies whether to create the non-root volumes. Defaults to `True`."},
			"delete_existing":        {Description: "Setting this to `True` indicates to delete RAID configuration prior to creating the new configuration. Default value is `False`."},
		}},
		{StepID: StepID{Interface: "raid", Step: "delete_configuration"}},
	}
}

// RAIDDeploySteps are the agent's raid deploy steps: IPA's
// apply_configuration, priority 0 (it runs when a deploy template or the
// request names it).
func RAIDDeploySteps() []Step {
	return []Step{
		{StepID: StepID{Interface: "raid", Step: "apply_configuration"}, ArgsInfo: map[string]ArgInfo{
			"raid_config":     {Description: "The RAID configuration to apply.", Required: true},
			"delete_existing": {Description: "Setting this to 'True' indicates to delete existing RAID configuration prior to creating the new configuration. Default value is 'True'."},
		}},
	}
}

// The agent's steps that only the catalogue names.
var (
	stepEraseDevicesExpress = StepID{Interface: "deploy", Step: "erase_devices_express"}
	stepErasePstore         = StepID{Interface: "deploy", Step: "erase_pstore"}
	stepCleanUEFINVRAM      = StepID{Interface: "deploy", Step: "clean_uefi_nvram"}
	stepBurninCPU           = StepID{Interface: "deploy", Step: "burnin_cpu"}
	stepBurninDisk          = StepID{Interface: "deploy", Step: "burnin_disk"}
	stepBurninMemory        = StepID{Interface: "deploy", Step: "burnin_memory"}
	stepBurninNetwork       = StepID{Interface: "deploy", Step: "burnin_network"}
)

func eraseArgs() map[string]ArgInfo {
	return map[string]ArgInfo{
		"enable_ata_secure_erase":           {Description: "use ATA Security Erase Unit where the drive supports it and is not frozen (default true)"},
		"enable_nvme_secure_erase":          {Description: "use NVMe Format with Secure Erase where the controller supports it (default true)"},
		"continue_if_secure_erase_failed":   {Description: "fall back to shredding a disk whose secure erase failed instead of failing the step (default false)"},
		"shred_random_overwrite_iterations": {Description: "random passes over a disk that has no secure erase (default 1)"},
		"shred_final_overwrite_with_zeros":  {Description: "a final pass of zeros after the random ones (default true)"},
	}
}

// checkpointArg is the argument of a burn-in that resumes.
var checkpointArg = ArgInfo{Description: "the progress.checkpoint object an interrupted run of this step published: the step resumes from it"}

func burninCPUArgs() map[string]ArgInfo {
	return map[string]ArgInfo{
		"timeout":    {Description: "seconds to load every CPU (default 86400, IPA's agent_burnin_cpu_timeout)"},
		"checkpoint": checkpointArg,
	}
}

func burninMemoryArgs() map[string]ArgInfo {
	return map[string]ArgInfo{
		"timeout":    {Description: "seconds to write and verify memory patterns (default 86400, IPA's agent_burnin_vm_timeout)"},
		"vm_bytes":   {Description: "memory to test: a percentage of the available memory (\"50%\") or a size (\"512M\", bytes); at most 90% of what is available (default 50%)"},
		"checkpoint": checkpointArg,
	}
}

func burninNetworkArgs() map[string]ArgInfo {
	return map[string]ArgInfo{
		"runtime":    {Description: "seconds of traffic (default 21600, IPA's agent_burnin_fio_network_runtime)"},
		"role":       {Description: "\"writer\" sends to the partner, \"reader\" listens for it; without a partner the agent talks to itself over loopback"},
		"partner":    {Description: "the other node's agent host (IP or name); the reader needs none"},
		"port":       {Description: "TCP port the reader listens on (default 9998)"},
		"checkpoint": checkpointArg,
	}
}
