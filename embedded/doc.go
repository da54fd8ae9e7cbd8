// Package embedded starts the embedded parts `ironflow dev` and the tests run
// on: a throwaway PostgreSQL cluster under a data directory and the Temporal
// dev server; and, for the integration tests, the VM tests and the
// benchmark, the whole Stack with ironflow's parts as processes that can be
// killed and restarted. Production deployments point ironflow at their own
// database and Temporal cluster instead and never use this package.
package embedded
