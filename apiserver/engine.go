package apiserver

import (
	"context"
	"errors"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/workflows"
)

// Engine starts and signals a node's workflows. The API never talks to a
// BMC or an agent itself: every action goes through the engine (Temporal in
// production, a fake in unit tests).
type Engine interface {
	// StartProvision starts the workflow for a provision verb. It returns
	// ErrNodeLocked when a workflow for the node is already running.
	StartProvision(ctx context.Context, req provision.Request) error
	// StartPower starts a power-state change (ErrNodeLocked as above).
	StartPower(ctx context.Context, req workflows.PowerRequest) error
	// SetBootDevice runs a boot-device change and waits for its result.
	SetBootDevice(ctx context.Context, req workflows.BootDeviceRequest) error
	// ChangeVirtualMedia attaches or detaches virtual media (API 1.89) and
	// waits for the result; a BMC failure wraps ErrHardware.
	ChangeVirtualMedia(ctx context.Context, req workflows.VirtualMediaRequest) error
	// ReadVirtualMedia reads the node's virtual media devices from its BMC
	// (API 1.93) without the node lock; a BMC failure wraps ErrHardware.
	ReadVirtualMedia(ctx context.Context, req workflows.VirtualMediaRequest) ([]workflows.VirtualMediaDevice, error)
	// Manage runs a management call (API 1.29's NMI, 1.63's indicators)
	// under the node's lock and waits for its result: the indicators for
	// a read. ErrNodeLocked as above; a refused request wraps
	// ErrInvalidParameter, a BMC failure ErrHardware.
	Manage(ctx context.Context, req workflows.ManagementRequest) ([]workflows.Indicator, error)
	// VendorPassthru runs a vendor method on the node's BMC under the node
	// lock (ErrNodeLocked as above) and waits for its return value; a
	// failure carries the activity's *temporal.ApplicationError.
	VendorPassthru(ctx context.Context, req workflows.VendorPassthruRequest) (any, error)
	// Signal sends a named signal (workflows.Signal*) to the node's running
	// workflow. It returns ErrNoWorkflow when none is running.
	Signal(ctx context.Context, nodeUUID, name string, arg any) error
	// Running reports whether a workflow holds the node.
	Running(ctx context.Context, nodeUUID string) (bool, error)
	// StartAllocation starts filling an allocation (API 1.52,
	// workflows.Allocate) and returns at once.
	StartAllocation(ctx context.Context, allocationUUID string) error
	// SetConsole starts enabling or disabling the node's console
	// (workflows.SetConsoleNode) and returns at once (ErrNodeLocked as
	// above).
	SetConsole(ctx context.Context, req workflows.ConsoleRequest) error
}

var (
	// ErrNodeLocked: a workflow already holds the node (HTTP 409 NodeLocked).
	ErrNodeLocked = errors.New("node locked")
	// ErrNoWorkflow: no workflow runs for the node.
	ErrNoWorkflow = errors.New("no workflow running for node")
)
