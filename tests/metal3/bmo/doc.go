// Package bmo is a test client that makes the Ironic API calls Metal3's
// baremetal-operator (BMO) v0.13.2 makes, in the same order and with the
// same bodies, written from BMO's pkg/provisioner/ironic (provisioner
// methods TryInit, Register, GetFirmwareSettings, GetFirmwareComponents,
// InspectHardware, Prepare, Provision, PowerOn, PowerOff, Adopt,
// Deprovision, Delete) on the library BMO pins, gophercloud v2.12.0.
//
// BMO's Go module is not on the Go module proxy and brings Kubernetes with
// it, so ironflow proves it serves Metal3 with this client instead
// (docs/metal3.md). Each provisioner method is one reconcile pass of BMO's
// controller: it returns a Result, and Dirty means "call again after
// RequeueAfter" as the controller would. Run drives a method to its end.
// The requeue delays are BMO's (10 s) scaled by Config.RequeueDelay, so
// that tests stay fast.
package bmo
