// Package internal is the root of ironflow's tooling: what builds, tests and
// measures ironflow but never runs in it. Below it:
//
//	testkit/devstack   the whole stack as processes, Glance and Keystone, for tests and the benchmark
//	testkit/storetest  a migrated, empty database per test
//	testkit/...        other real parts for tests: the baremetal CLI, Debian's Ironic, a serial line
//	                   behind ipmi_sim, a container registry, an OTLP collector, Prometheus scrapes,
//	                   RFB and Chromium clients, self-signed certificates, a TCP proxy that
//	                   turns into a black hole (blackhole)
//	bench              make bench: ironflow against baselines measured in the same run
//	record-histories   make record-histories: the workflow histories later versions replay
//	withpostgres       make fuzz: one PostgreSQL cluster for every fuzz process's database
//
// Product code (everything cmd/ironflow and cmd/ironflow-agent build from)
// never imports a package below internal/ or tests/;
// TestProductImportsNoTooling fails when it does. Tooling may import the
// product, package embedded (what `ironflow dev` starts) above all.
package internal
