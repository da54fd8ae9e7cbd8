// Package crashhook lets a test kill or pause an ironflow process at an
// exact point of an exact node's operation: a worker's activity, or the API
// between a verb's state write and its workflow start. Only a build with
// -tags crashhook contains it (on.go); every other build compiles Point to
// nothing (off.go). docs/crash-safety.md says how tests use it.
package crashhook
