package conformance_test

import (
	"testing"

	"github.com/cockroachdb/datadriven"

	"plait/conformance/sim"
	"plait/protocol"
	"plait/protocol/replica"
)

// TestScenarios runs every scenario file of testdata/scenarios: readable scripts of the
// simulator (add-nodes, connect, write, run, partition, crash, stabilize, check, ...),
// each command followed by the exact trace and report it must produce. After a deliberate
// change, regenerate the expectations with -rewrite and review the diff.
func TestScenarios(t *testing.T) { runScenarios(t, nil) }

// runScenarios runs the scenario files with every session made by newSession (nil: the
// native core).
func runScenarios(t *testing.T, newSession func(protocol.Config) (replica.Session, error)) {
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		s := sim.NewScript()
		s.NewSession = newSession
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			args := make([]sim.Arg, len(d.CmdArgs))
			for i, a := range d.CmdArgs {
				args[i] = sim.Arg{Key: a.Key, Vals: a.Vals}
			}
			return s.Run(d.Cmd, args)
		})
		if c := s.Cluster(); c != nil {
			for _, f := range c.Failures() {
				t.Errorf("%s: invariant failed: %s", path, f)
			}
		}
	})
}
