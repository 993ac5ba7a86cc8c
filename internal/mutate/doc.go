// Package mutate owns the test-only mutations: switches that break one decision of the
// core on purpose, so that a test can show that the simulator's invariants catch the
// breakage (the mutation check). A Set is a value handed to a session (protocol.Config)
// or a replica (replica.Config), never global state: tests that use it run in parallel,
// and a production configuration holds the zero Set, which breaks nothing.
//
// # The jobs, by file
//
// mutate.go holds them all: Set, one switch per decision a test may break.
package mutate
