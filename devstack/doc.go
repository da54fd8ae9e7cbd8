// Package devstack starts the embedded parts `ironflow dev` and the tests run
// on: a throwaway PostgreSQL cluster under a data directory and the Temporal
// dev server. Production deployments point ironflow at their own database and
// Temporal cluster instead and never use this package.
package devstack
