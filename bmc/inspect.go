package bmc

import (
	"context"

	agentclient "github.com/ironflow/ironflow/agent/client"
)

// Inspector is implemented by drivers that can read a machine's hardware
// out of band (Ironic's inspect_interface=redfish). Callers type-assert a
// Driver to it; drivers that cannot inspect (ipmi) simply do not implement it.
//
// The inventory has the agent's shape (one schema, Ironic Python Agent's),
// filled as far as a BMC can: a BMC knows no kernel device names, IP
// addresses or link state, so those fields stay empty and are left out
// rather than guessed; disk and interface names are the BMC's.
type Inspector interface {
	Inspect(ctx context.Context) (agentclient.Inventory, error)
}
