module github.com/ironflow/ironflow/tests/metal3

go 1.26.8

require github.com/gophercloud/gophercloud/v2 v2.12.0

// The simulated agent (agent/sim) comes from this repository's tree.
replace github.com/ironflow/ironflow => ../..
