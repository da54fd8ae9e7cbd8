package activities

import (
	"context"

	"github.com/ironflow/ironflow/crashhook"
)

// crashPoint is where an activity may be killed or paused by a test
// (crashhook; nothing in production builds).
func crashPoint(ctx context.Context, node, point, phase string) {
	crashhook.Point(ctx, node, point, phase)
}
