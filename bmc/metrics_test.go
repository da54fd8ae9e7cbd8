package bmc

import (
	"fmt"
	"testing"
)

// A Redfish request is named by its action or resource, never by the
// BMC's identifiers in its URL.
func TestRedfishActionIsBounded(t *testing.T) {
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/redfish/v1/", "GET ServiceRoot"},
		{"GET", "/redfish/v1/Systems/System.Embedded.1", "GET Systems"},
		{"PATCH", "/redfish/v1/Systems/437XR1138R2", "PATCH Systems"},
		{"POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", "POST ComputerSystem.Reset"},
		{"GET", "/redfish/v1/Systems/1/Bios", "GET Systems/Bios"},
		{"POST", "/redfish/v1/Managers/1/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", "POST VirtualMedia.InsertMedia"},
		{"GET", "https://10.0.0.9:8443/redfish/v1/Managers/bmc/VirtualMedia/CD1?$expand=.", "GET Managers/VirtualMedia"},
		{"GET", "/redfish/v1/TaskService/Tasks/JID_123", "GET TaskService/Tasks"},
		{"GET", "/redfish/v1/SessionService/Sessions", "GET SessionService/Sessions"},
	} {
		if got := redfishAction(c.method, c.path); got != c.want {
			t.Errorf("redfishAction(%s %s) = %q, want %q", c.method, c.path, got, c.want)
		}
	}
}

// The outcome label is the driver's typed error.
func TestObserveClassifiesTypedErrors(t *testing.T) {
	for err, want := range map[error]string{
		nil: "ok",
		fmt.Errorf("%w: no answer", ErrUnreachable): "unreachable",
		fmt.Errorf("%w: 401", ErrAuth):              "auth",
		fmt.Errorf("%w: 503", ErrBusy):              "busy",
		fmt.Errorf("plain"):                         "error",
	} {
		if got := outcomeOf(err); got != want {
			t.Errorf("outcome of %v = %q, want %q", err, got, want)
		}
	}
}
