package apiserver

import "reflect"

// Keys of a port's local_link_connection that came with a microversion:
// Ironic refuses them below it with 406 (allow_local_link_connection_*).
// network_type arrived with API 1.64, the OVN VTEP switch keys with 1.90.
// The other keys (port_id, switch_id, switch_info, hostname) are stored
// as given; docs/api-versions.md says what ironflow does not check.
var llcKeySince = map[string]int{
	"network_type":         v64LLCNetworkType,
	"vtep-logical-switch":  v90OVNVtep,
	"vtep-physical-switch": v90OVNVtep,
}

// checkLocalLinkKeys refuses the keys of llc the request's version does
// not know.
func checkLocalLinkKeys(llc map[string]any, minor int) error {
	for k := range llc {
		if since, ok := llcKeySince[k]; ok && minor < since {
			return notAcceptable()
		}
	}
	return nil
}

// addedLocalLinkKeys are the keys of after a PATCH set or changed: a key
// stored by a newer client does not make an older one's PATCH fail.
func addedLocalLinkKeys(before, after map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range after {
		if old, ok := before[k]; !ok || !reflect.DeepEqual(old, v) {
			out[k] = v
		}
	}
	return out
}
