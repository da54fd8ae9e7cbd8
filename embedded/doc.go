// Package embedded starts what `ironflow dev` (make run, make run-cluster)
// runs beside ironflow on one machine: a throwaway PostgreSQL cluster under
// the data directory, the Temporal dev server on a file-backed database or
// the Temporal server built from go.temporal.io/server on that PostgreSQL
// with mTLS, and the programs they are, each in a process group of its own.
// It is product code: cmd/ironflow imports it. Production deployments point
// ironflow at their own database and Temporal cluster and never start it.
//
// It must never import the project's tooling (internal/): the test stack
// built on it lives in internal/testkit/devstack.
package embedded
