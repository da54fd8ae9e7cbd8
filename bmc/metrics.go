package bmc

import (
	"strings"
	"time"

	"github.com/ironflow/ironflow/metrics"
)

// errorOutcomes label a BMC call's typed failure (docs/metrics.md,
// ironflow_bmc_calls_total).
var errorOutcomes = []metrics.ErrorClass{
	{Outcome: metrics.OutcomeUnreachable, Err: ErrUnreachable},
	{Outcome: metrics.OutcomeAuth, Err: ErrAuth},
	{Outcome: metrics.OutcomeBusy, Err: ErrBusy},
	{Outcome: metrics.OutcomeUnsupported, Err: ErrUnsupported},
	{Outcome: metrics.OutcomeInvalidConfig, Err: ErrInvalidConfig},
}

// observe records one BMC request of a driver (its retries included)
// whose machine's vendor the driver cannot tell (IPMI, fake-hardware).
// action is one of the driver's fixed words ("get power state", "power
// on", "set boot device pxe"), never a node's data.
func observe(driver, action string, start time.Time, err error) {
	observeVendor(driver, VendorUnknown, action, start, err)
}

// observeVendor is observe with the machine's vendor label (vendor.go).
func observeVendor(driver, vendor, action string, start time.Time, err error) {
	metrics.ObserveBMC(driver, vendor, strings.ReplaceAll(action, " ", "_"), outcomeOf(err), start)
}

// outcomeOf is the outcome label of a call's error.
func outcomeOf(err error) string { return metrics.ErrorOutcome(err, errorOutcomes) }

// redfishAction names a Redfish request by what it does rather than by
// its URL, which carries the BMC's identifiers: the action
// (".../Actions/ComputerSystem.Reset" is "POST ComputerSystem.Reset"),
// else the service, a service's collection, or a member's sub-resource
// ("/redfish/v1/Systems/1/Bios" is "GET Systems/Bios",
// "/redfish/v1/Managers/1/VirtualMedia/Cd" is "GET Managers/VirtualMedia"),
// as the Redfish specification lays out its URIs.
func redfishAction(method, path string) string {
	if i := strings.Index(path, "://"); i >= 0 {
		path = path[i+3:]
		if j := strings.IndexByte(path, '/'); j >= 0 {
			path = path[j:]
		} else {
			path = "/"
		}
	}
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	if i := strings.Index(path, "/Actions/"); i >= 0 {
		return method + " " + bounded(path[i+len("/Actions/"):])
	}
	segs := strings.Split(strings.Trim(strings.TrimPrefix(path, "/redfish/v1"), "/"), "/")
	switch {
	case len(segs) == 0 || segs[0] == "":
		return method + " ServiceRoot"
	case strings.HasSuffix(segs[0], "Service") && len(segs) >= 2:
		// A service's collections: /TaskService/Tasks/{id}.
		return method + " " + bounded(segs[0]) + "/" + bounded(segs[1])
	case len(segs) >= 3:
		// A member's sub-resource: /Systems/{id}/Bios.
		return method + " " + bounded(segs[0]) + "/" + bounded(segs[2])
	}
	return method + " " + bounded(segs[0])
}

// bounded keeps a Redfish name short and to its schema's alphabet, so that
// an odd BMC cannot make a label of anything.
func bounded(s string) string {
	var b strings.Builder
	for _, c := range s {
		if b.Len() >= 48 {
			break
		}
		if c == '.' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		}
	}
	if b.Len() == 0 {
		return "other"
	}
	return b.String()
}
