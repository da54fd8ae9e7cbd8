module github.com/ironflow/ironflow/tests/metal3/simmachine

go 1.26.8

require github.com/ironflow/ironflow v0.0.0

require (
	github.com/diskfs/go-diskfs v1.9.4 // indirect
	github.com/djherbis/times v1.6.0 // indirect
	github.com/elliotwutingfeng/asciiset v0.0.0-20260129054604-cfde2086bc57 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

// The simulated agent (agent/sim) comes from this repository's tree.
replace github.com/ironflow/ironflow => ../../..
