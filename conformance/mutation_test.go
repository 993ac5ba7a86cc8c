package conformance

import (
	"flag"
	"fmt"
	"testing"

	"plait/conformance/sim"
	"plait/internal/mutate"
	"plait/protocol/replica"
)

var mutationAll = flag.Bool("mutation.all", false, "TestMutationsAreCaught: run every seed of the range, count the failing ones")

// TestMutationsAreCaught breaks one decision of the core at a time by a test-only mutation
// and requires the simulator to fail within the CI seed range: the invariants have teeth.
// Each mutation stops at the first failing seed, which it reports; with -mutation.all it
// runs the whole range and reports how many seeds fail.
func TestMutationsAreCaught(t *testing.T) {
	for _, m := range []struct {
		name string
		set  mutate.Set
	}{
		{"gap detection", mutate.Set{BreakGapDetection: true}},
		{"routing rule", mutate.Set{BreakRouting: true}},
		{"durability (unsynced entries served)", mutate.Set{ServeUnsynced: true}},
		{"failover isolation (every origin resubscribed)", mutate.Set{BreakFailoverIsolation: true}},
		{"retention holds (entries a peer still needs purged)", mutate.Set{IgnoreHolds: true}},
		{"a base copy that replaces instead of merging", mutate.Set{ReplacingCopy: true}},
		{"a copy cursor written apart from its chunk, after it", mutate.Set{CopyCursorApart: true}},
		{"tombstones dropped before every origin passed them", mutate.Set{DropTombstonesEarly: true}},
		{"a cluster map chosen by its publication's HLC, not its generation", mutate.Set{MapByHLC: true}},
		{"a cluster map repaired from a peer's, whatever its generation", mutate.Set{MapRepaired: true}},
	} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel() // each mutation is a value of its own runs: nothing is shared
			caught, first := 0, ""
			for seed := *simBase; seed < *simBase+uint64(*simSeeds); seed++ {
				if rep := sim.Random(seed, sim.Options{Config: replica.Config{Mutations: m.set}}); len(rep.Failures) > 0 {
					caught++
					if first == "" {
						first = fmt.Sprintf("seed %d: %s", seed, rep.Failures[0])
					}
					if !*mutationAll {
						break
					}
				}
			}
			if caught == 0 {
				t.Errorf("with %s broken, %d seeds from %d all passed: the invariants miss it", m.name, *simSeeds, *simBase)
				return
			}
			t.Logf("broken %s: first caught by %s", m.name, first)
			if *mutationAll {
				t.Logf("broken %s: %d of %d seeds fail", m.name, caught, *simSeeds)
			}
		})
	}
}
