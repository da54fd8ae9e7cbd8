// Package hardware is ironflow's registry of hardware types (Ironic's
// drivers: ipmi, redfish, fake-hardware) and of the interfaces they are
// built from. Each hardware type declares in one place the driver_info keys
// it reads, the interfaces it supports per kind with their defaults, the
// boot devices it accepts and its capabilities; each interface ironflow
// implements is declared once with the code that serves it and what the
// workflows may ask of it. The API (GET /v1/drivers, node validation,
// enabled_*_interfaces), the BMC drivers, the activities and the workflows
// all read this package instead of comparing names; comparisons_test.go
// fails when code outside hardware/, bmc/ and vbmc/ compares a driver or
// an interface against a registered name.
//
// The package is a table and the questions asked of it: it does no I/O and
// imports nothing of ironflow, so that the deterministic workflows can
// import it as well as the API and the workers. docs/contributing.md ("Add
// a BMC driver") says how to add a hardware type.
package hardware
