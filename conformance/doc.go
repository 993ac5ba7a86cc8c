// Package conformance owns what holds the protocol core to its promises across builds and
// schedules: the frozen builds of released cores (releases/<version>/core.wasm, recorded
// in RELEASES.md) and the tests that hold the current build to them; the deterministic
// simulator's test entry points (package sim is the simulator): TestSim over the CI's
// fixed seed range or one replayed seed, TestScenarios over the scenario files of
// testdata/scenarios, and TestMutationsAreCaught, which breaks one decision at a time and
// requires the simulator to notice; and the version matrix, TestVersionMatrix.
//
// Replaying: go test ./conformance -run 'TestSim$' -seed=N -sim.trace -v
// Exploring: make sim SEEDS=N (fresh seeds each run; NODES=16 for larger topologies)
// Scenarios: go test ./conformance -run TestScenarios [-rewrite after a deliberate change]
//
// # Versions
//
// A build keeps speaking every version it ever released: release 0.1's core (protocol
// version 1, ABI 1), 0.2's (versions 1 and 2, ABI 2) and 0.3's (1 to 3, ABI 4) run against
// this build, native and WASM, in both roles, and must negotiate the highest version both
// speak. The matrix expects what each version promises: nothing received twice from
// version 2 on, duplicates counted at version 1; a purged answer and no copy below a floor
// at versions 1 and 2, a base copy at version 3; ranges compared by anti-entropy at
// version 3 only. The simulator's random runs mix version-1 nodes with nodes at the
// newest version, upgraded and downgraded as they restart; scenario files pin a node to
// version 1 or 2 where a rule of that version is the point.
//
// # The jobs, by file
//
//   - releases.go: Release, one row of RELEASES.md, and ReadReleases;
//     releases_test.go: each frozen module is committed with its recorded SHA-256, its
//     commit is in main's history, it negotiates with this build as the rows of
//     protocol/SPEC.md's "Handshake" say, and it streams version 1 with it in either role.
//   - matrix_test.go: TestVersionMatrix, every release and this build against this build
//     through the simulator's scenarios, printed as a table.
//   - identity_test.go: this commit's core built to WASM gives every scenario's recorded
//     output, and the simulator's random runs the same trace natively and under WASM.
//   - sim_test.go: TestSim; scenario_test.go: TestScenarios; mutation_test.go:
//     TestMutationsAreCaught.
package conformance
