//go:build !crashhook

package activities

import "context"

// crashPoint is a test hook that production builds compile to nothing: a
// worker built with -tags crashhook kills or pauses itself here when its
// environment asks it to (crashhook_on.go, docs/crash-safety.md).
func crashPoint(context.Context, string, string, string) {}
