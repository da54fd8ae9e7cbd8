package hardware

// Keys several hardware types share. The power-wait keys are ironflow's
// own (Ironic keeps them as conductor-wide options); a node's driver_info
// may set them for a BMC known to be slow.
const (
	// KeyPowerStateTimeout bounds the wait for a power change to show in
	// the BMC's power state (seconds or a Go duration).
	KeyPowerStateTimeout = "power_state_change_timeout"
	// KeyPowerPollInterval is how often the power state is read while
	// waiting.
	KeyPowerPollInterval = "power_poll_interval"
	// KeySoftPowerOffTimeout is how long a graceful shutdown may take
	// before it fails with the power left on (Ironic's PowerStateFailure).
	KeySoftPowerOffTimeout = "soft_power_off_timeout"

	// KeyDeployKernel and KeyDeployRamdisk are Ironic's agent images; they
	// override the boot service's own agent and come as a pair.
	KeyDeployKernel  = "deploy_kernel"
	KeyDeployRamdisk = "deploy_ramdisk"

	// KeyRescueKernel and KeyRescueRamdisk are Ironic's rescue images for
	// network boot; without them the agent images boot for rescue too.
	KeyRescueKernel  = "rescue_kernel"
	KeyRescueRamdisk = "rescue_ramdisk"

	// KeyImageVerifyCA is how the image's HTTPS server is trusted: True
	// (the system store, the default), False (no verification), or the
	// path of a PEM CA bundle on the conductor, whose content the agent
	// and the image cache trust. Ironic keeps the equivalent as
	// conductor-wide options (webserver_verify_ca, the agent's
	// ipa-insecure/ipa-cafile); ironflow reads it per node, as
	// redfish_verify_ca is.
	KeyImageVerifyCA = "image_verify_ca"
)

// powerWaitKeys are read by the BMC drivers that wait for a real BMC.
var powerWaitKeys = []Key{
	{Name: KeyPowerStateTimeout, Description: "Seconds (or a Go duration) to wait for a power change to show in the BMC's power state; default 120. Optional."},
	{Name: KeyPowerPollInterval, Description: "Seconds (or a Go duration) between power state reads while waiting; default 2. Optional."},
	{Name: KeySoftPowerOffTimeout, Description: "Seconds (or a Go duration) a soft power off may take before it fails, the power left on (the API's timeout, when given, instead); default 120. Optional."},
}

// agentImageKeys are read by the network and virtual-media boot
// interfaces when they boot the agent (implementation.go).
var agentImageKeys = []Key{
	{Name: KeyDeployKernel, Description: "URL of the agent kernel to boot instead of the boot service's own agent; set it with deploy_ramdisk. Optional."},
	{Name: KeyDeployRamdisk, Description: "URL of the agent ramdisk to boot instead of the boot service's own agent; set it with deploy_kernel. Optional."},
}

// rescueImageKeys are read by the agent rescue interface when the rescue
// agent network-boots (implementation.go).
var rescueImageKeys = []Key{
	{Name: KeyRescueKernel, Description: "URL of the kernel to network-boot for rescue instead of the agent's; set it with rescue_ramdisk. Optional."},
	{Name: KeyRescueRamdisk, Description: "URL of the ramdisk to network-boot for rescue instead of the agent's; it must run an agent with rescue.finalize_rescue; set it with rescue_kernel. Optional."},
}

// imageTrustKeys are read by the direct deploy interface when the agent or
// the image cache downloads the instance image.
var imageTrustKeys = []Key{
	{Name: KeyImageVerifyCA, Description: "How the HTTPS server of an http(s) image_source is verified: True (the system's trusted CAs, the default), False (not verified), or the path of a PEM CA bundle on the conductor (at most 1 MiB), which the agent and the image cache trust. Optional."},
}

// keys joins key lists into one.
func keys(lists ...[]Key) []Key {
	var all []Key
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}
