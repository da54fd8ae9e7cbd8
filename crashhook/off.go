//go:build !crashhook

package crashhook

import "context"

// Point is a test hook that production builds compile to nothing: a
// worker or API built with -tags crashhook kills or pauses itself here when
// its environment asks it to (on.go, docs/crash-safety.md).
func Point(context.Context, string, string, string) {}
