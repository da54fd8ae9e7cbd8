package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/workflows"
)

// InjectNMI pulses the node's NMI through its BMC (API 1.29). A driver
// that cannot is ErrTypeBMCUnsupported. An NMI the BMC took but whose
// answer was lost is sent again when the activity is retried: a second
// NMI reaches a kernel that is already handling the first.
func (a *Activities) InjectNMI(ctx context.Context, in workflows.IndicatorInput) error {
	d, err := a.driver(ctx, in.Node)
	if err != nil {
		return err
	}
	defer d.Close()
	n, ok := d.(bmc.NMIInjector)
	if !ok {
		return bmcErr(fmt.Errorf("%w: the driver injects no NMI", bmc.ErrUnsupported), "inject NMI into node %s", in.Node.UUID)
	}
	return bmcErr(n.InjectNMI(ctx), "inject NMI into node %s", in.Node.UUID)
}

// indicatorLights is the node's driver as one that has indicators.
func (a *Activities) indicatorLights(ctx context.Context, node workflows.NodeInfo) (bmc.Driver, bmc.IndicatorLights, error) {
	d, err := a.driver(ctx, node)
	if err != nil {
		return nil, nil, err
	}
	l, ok := d.(bmc.IndicatorLights)
	if !ok {
		d.Close()
		return nil, nil, bmcErr(fmt.Errorf("%w: the driver has no indicators", bmc.ErrUnsupported), "read the indicators of node %s", node.UUID)
	}
	return d, l, nil
}

// ReadIndicators reads the node's indicators and their states (API 1.63).
func (a *Activities) ReadIndicators(ctx context.Context, in workflows.IndicatorInput) ([]workflows.Indicator, error) {
	d, l, err := a.indicatorLights(ctx, in.Node)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	all, err := l.Indicators(ctx)
	if err != nil {
		return nil, bmcErr(err, "read the indicators of node %s", in.Node.UUID)
	}
	out := make([]workflows.Indicator, len(all))
	for i, x := range all {
		out[i] = workflows.Indicator(x)
	}
	return out, nil
}

// SetIndicator sets one indicator (API 1.63). An indicator the BMC does
// not have, or a state it cannot take, is the user's mistake: a
// non-retryable ErrTypeInvalidParameter whose message is Ironic's.
func (a *Activities) SetIndicator(ctx context.Context, in workflows.IndicatorInput) error {
	d, l, err := a.indicatorLights(ctx, in.Node)
	if err != nil {
		return err
	}
	defer d.Close()
	err = l.SetIndicator(ctx, in.Component, in.Indicator, in.State)
	switch {
	case errors.Is(err, bmc.ErrUnknownIndicator):
		// ironic/drivers/modules/redfish/management.py's MissingParameterValue.
		return temporal.NewNonRetryableApplicationError(hardware.UnknownIndicator(in.Indicator, in.Component, in.Node.UUID), workflows.ErrTypeInvalidParameter, nil)
	case errors.Is(err, bmc.ErrIndicatorState):
		return temporal.NewNonRetryableApplicationError(hardware.IndicatorStateRefused(in.Indicator, in.Component, in.Node.UUID, in.State), workflows.ErrTypeInvalidParameter, nil)
	}
	return bmcErr(err, "set indicator %s@%s of node %s to %s", in.Indicator, in.Component, in.Node.UUID, in.State)
}
