// Package devstack starts ironflow for the integration tests, the VM tests
// and the benchmark: the whole Stack as production runs it, each part its
// own process that can be killed and started again, on the PostgreSQL and
// Temporal of package embedded; and the OpenStack services some tests talk
// to, Glance and Keystone. It is tooling: no product package imports it.
package devstack
