package activities

import (
	"context"

	"github.com/ironflow/ironflow/workflows"
)

// prepareAnaconda sets up deploy_interface=anaconda.
func (a *Activities) prepareAnaconda(ctx context.Context, node workflows.NodeInfo) error {
	return invalidConfig("node %s: deploy_interface anaconda is not available yet", node.UUID)
}
