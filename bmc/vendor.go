package bmc

import (
	"encoding/json"
	"strings"
	"sync"
)

// Machine vendors, as the BMC metrics name them (ironflow_bmc_calls_total's
// vendor label, docs/metrics.md): a fixed set, so that an odd BMC cannot
// make a label of anything. A Redfish BMC says its maker in the service
// root's Vendor (Redfish 1.5 and later) or, before that, in the
// ComputerSystem's Manufacturer, which is what Ironic's redfish management
// interface reads as the node's vendor (detect_vendor).
const (
	VendorUnknown = "unknown" // the BMC has not said yet (IPMI, or no answer since the process started)
	VendorOther   = "other"   // a maker outside the list
)

// vendorNames are the vendor labels and the words (lower case) that name
// them in Vendor or Manufacturer; "ironflow" is ironflow vbmc's emulated
// BMC.
var vendorNames = []struct {
	label string
	words []string
}{
	{"dell", []string{"dell"}},
	{"hpe", []string{"hpe", "hewlett packard enterprise", "hewlett-packard", "hp"}},
	{"lenovo", []string{"lenovo"}},
	{"supermicro", []string{"supermicro", "super micro"}},
	{"fujitsu", []string{"fujitsu"}},
	{"cisco", []string{"cisco"}},
	{"huawei", []string{"huawei"}},
	{"inspur", []string{"inspur"}},
	{"gigabyte", []string{"gigabyte"}},
	{"ironflow", []string{"ironflow"}},
}

// Vendors are every value the vendor label takes.
func Vendors() []string {
	out := make([]string, 0, len(vendorNames)+2)
	for _, v := range vendorNames {
		out = append(out, v.label)
	}
	return append(out, VendorOther, VendorUnknown)
}

// VendorLabel is the vendor label of a Redfish Vendor or Manufacturer
// string ("Dell Inc.", "HPE", "Supermicro"): a word of vendorNames among
// its words, else other; unknown for an empty string.
func VendorLabel(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return VendorUnknown
	}
	fields := strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == ',' || r == '.' || r == '(' || r == ')'
	})
	joined := " " + strings.Join(fields, " ") + " "
	for _, v := range vendorNames {
		for _, w := range v.words {
			if strings.Contains(joined, " "+w+" ") {
				return v.label
			}
		}
	}
	return VendorOther
}

// bmcVendors remembers the vendor of each Redfish endpoint
// (scheme://host[:port]) once it has said it, for the life of the process:
// one short entry per BMC, so that a BMC that stops answering is still
// counted under its maker.
var bmcVendors sync.Map // endpoint → learnedVendor

type learnedVendor struct {
	label    string
	fromRoot bool // the service root's Vendor, which no system overrides
}

// vendorOf is the vendor label of a Redfish endpoint.
func vendorOf(endpoint string) string {
	if v, ok := bmcVendors.Load(endpoint); ok {
		return v.(learnedVendor).label
	}
	return VendorUnknown
}

// learnVendor reads the maker from a Redfish answer of the endpoint: the
// service root's Vendor wins over a system's Manufacturer (vbmc's system
// is made by QEMU, its BMC by ironflow). action is redfishAction's name
// of the request; other answers are not read, and a known vendor is not
// read again.
func learnVendor(endpoint, action string, payload []byte) {
	root := action == "GET ServiceRoot"
	if !root && action != "GET Systems" {
		return
	}
	if v, ok := bmcVendors.Load(endpoint); ok && (v.(learnedVendor).fromRoot || !root) {
		return
	}
	var doc struct{ Vendor, Manufacturer string }
	if json.Unmarshal(payload, &doc) != nil {
		return
	}
	if root {
		if l := VendorLabel(doc.Vendor); l != VendorUnknown {
			bmcVendors.Store(endpoint, learnedVendor{label: l, fromRoot: true})
		}
		return
	}
	if l := VendorLabel(doc.Manufacturer); l != VendorUnknown {
		bmcVendors.LoadOrStore(endpoint, learnedVendor{label: l})
	}
}
