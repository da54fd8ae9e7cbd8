package apiserver

import "reflect"

// Keys of a port's local_link_connection that came with a microversion:
// Ironic refuses them outside it with 406 (allow_local_link_connection_*,
// allow_ovn_vtep_version). network_type arrived with API 1.64; the OVN
// VTEP switch keys came with 1.90 and went with 1.105, which removed
// Ironic's OVN VTEP support. The other keys (port_id, switch_id,
// switch_info, hostname) are stored as given; docs/api-versions.md says
// what ironflow does not check.
var llcKeyVersions = map[string]struct{ since, until int }{
	"network_type":         {since: v64LLCNetworkType},
	"vtep-logical-switch":  {since: v90OVNVtep, until: v105RemoveOVNVtep},
	"vtep-physical-switch": {since: v90OVNVtep, until: v105RemoveOVNVtep},
}

// llcKeyAllowed reports whether the request's version knows key.
func llcKeyAllowed(key string, minor int) bool {
	r, ok := llcKeyVersions[key]
	return !ok || minor >= r.since && (r.until == 0 || minor < r.until)
}

// checkLocalLinkKeys refuses the keys of llc the request's version does
// not know.
func checkLocalLinkKeys(llc map[string]any, minor int) error {
	for k := range llc {
		if !llcKeyAllowed(k, minor) {
			return notAcceptable()
		}
	}
	return nil
}

// viewLocalLinkConnection shows a local_link_connection that holds the OVN
// VTEP keys as {} to a version that does not know them (below 1.90, from
// 1.105), as Ironic's port controller does: the key stays, its value is
// empty.
func viewLocalLinkConnection(p *port, v viewCtx) any {
	for _, k := range []string{"vtep-logical-switch", "vtep-physical-switch"} {
		if _, ok := p.LocalLinkConnection[k]; ok && !llcKeyAllowed(k, v.minor) {
			return map[string]any{}
		}
	}
	return mapOrEmpty(p.LocalLinkConnection)
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
