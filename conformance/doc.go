// Package conformance owns what holds the protocol core to its promises across builds and
// schedules: the frozen builds of released cores (releases/<version>/core.wasm, recorded
// in RELEASES.md) and the tests that hold the current build to them; the deterministic
// simulator's test entry points (package sim is the simulator): TestSim over the CI's
// fixed seed range or one replayed seed, TestScenarios over the scenario files of
// testdata/scenarios, and TestMutationsAreCaught, which breaks one decision at a time and
// requires the simulator to notice. The version matrix joins it.
//
// Replaying: go test ./conformance -run 'TestSim$' -seed=N -sim.trace -v
// Exploring: make sim SEEDS=N (fresh seeds each run; NODES=16 for larger topologies)
// Scenarios: go test ./conformance -run TestScenarios [-rewrite after a deliberate change]
package conformance
