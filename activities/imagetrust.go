package activities

import (
	"github.com/ironflow/ironflow/imagecache"
	"github.com/ironflow/ironflow/store"
)

// imageTrust reads the node's driver_info/image_verify_ca, the CA bundle
// from the conductor's disk included, and refuses a setting that cannot
// work with its reason.
func imageTrust(n *store.Node) (imagecache.Trust, error) {
	t, err := imagecache.TrustOf(n.DriverInfo)
	if err != nil {
		return t, invalidConfig("node %s: %v", n.UUID, err)
	}
	return t, nil
}

// withImageTrust adds to write_image's args how the agent verifies the
// image server (image_verify_ca: false, or the CA bundle's PEM, which is
// public and bounded; nothing for the system store). It is added by the
// activity that sends the command, never carried in workflow history. An
// image the agent fetches from the boot service's cache gets nothing: the
// cache verified the origin with the node's trust, and the agent talks to
// the boot service as it always does.
func withImageTrust(args map[string]any, n *store.Node) (map[string]any, error) {
	if imagecache.Cached(n.InstanceInfo) {
		return args, nil
	}
	t, err := imageTrust(n)
	if err != nil {
		return nil, err
	}
	v := t.AgentArg()
	if v == nil {
		return args, nil
	}
	if args == nil {
		args = map[string]any{}
	}
	args["image_verify_ca"] = v
	return args, nil
}
