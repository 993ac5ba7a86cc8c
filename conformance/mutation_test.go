package conformance

import (
	"testing"

	"plait/conformance/sim"
	"plait/internal/mutate"
)

// TestMutationsAreCaught breaks one decision of the core at a time by a test-only switch
// and requires the simulator to fail within the CI seed range: the invariants have teeth.
// Each mutation stops at the first failing seed, which it reports.
func TestMutationsAreCaught(t *testing.T) {
	for _, m := range []struct {
		name    string
		switch_ *bool
	}{
		{"gap detection", &mutate.BreakGapDetection},
		{"routing rule", &mutate.BreakRouting},
		{"durability (unsynced entries served)", &mutate.ServeUnsynced},
		{"failover isolation (every origin resubscribed)", &mutate.BreakFailoverIsolation},
	} {
		t.Run(m.name, func(t *testing.T) {
			*m.switch_ = true
			defer func() { *m.switch_ = false }()
			for seed := *simBase; seed < *simBase+uint64(*simSeeds); seed++ {
				if rep := sim.Random(seed, sim.Options{}); len(rep.Failures) > 0 {
					t.Logf("broken %s caught by seed %d: %s", m.name, seed, rep.Failures[0])
					return
				}
			}
			t.Errorf("with %s broken, %d seeds from %d all passed: the invariants miss it", m.name, *simSeeds, *simBase)
		})
	}
}
