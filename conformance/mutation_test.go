package conformance

import (
	"flag"
	"fmt"
	"os/exec"
	"slices"
	"testing"

	"plait/conformance/sim"
	"plait/internal/mutate"
	"plait/protocol/replica"
)

var mutationAll = flag.Bool("mutation.all", false, "TestMutationsAreCaught: run every seed of the range, count the failing ones")

// TestMutationsAreCaught breaks one decision of the core at a time by a test-only mutation
// and requires the simulator to fail within the CI seed range: the invariants have teeth.
// A mutation whose path the range rarely takes names the seeds past it that found the
// fault; they run first. Each mutation stops at the first failing seed, which it reports;
// with -mutation.all it runs the whole range and reports how many seeds fail.
func TestMutationsAreCaught(t *testing.T) {
	for _, m := range []struct {
		name  string
		set   mutate.Set
		seeds []uint64 // run before the range
	}{
		{"gap detection", mutate.Set{BreakGapDetection: true}, nil},
		{"routing rule", mutate.Set{BreakRouting: true}, nil},
		// Stamps (version 4): the round trip of a sample whose echo the peer held reads as
		// the hold, beyond the link's (checkClock).
		{"a stamp's round trip sampled with the peer's hold in it", mutate.Set{IgnoreStampHeld: true}, nil},
		{"durability (unsynced entries served)", mutate.Set{ServeUnsynced: true}, nil},
		{"failover isolation (every origin resubscribed)", mutate.Set{BreakFailoverIsolation: true}, nil},
		{"retention holds (entries a peer still needs purged)", mutate.Set{IgnoreHolds: true}, nil},
		{"a base copy that replaces instead of merging", mutate.Set{ReplacingCopy: true}, nil},
		{"a copy cursor written apart from its chunk, after it", mutate.Set{CopyCursorApart: true}, nil},
		{"tombstones dropped before every origin passed them", mutate.Set{DropTombstonesEarly: true}, nil},
		{"a cluster map chosen by its publication's HLC, not its generation", mutate.Set{MapByHLC: true}, nil},
		{"a cluster map repaired from a peer's, whatever its generation", mutate.Set{MapRepaired: true}, nil},
		// A record taken back from a peer that had not applied its delete, the tombstone
		// dropped by the sender of a base copy (seed 7000591: a seven-node chain).
		// Since the quiet control plane moved the schedules, seed 7000591 no longer takes
		// that path, and no seed of 7000000 to 7011000 was found that does: until one is,
		// its unit test (byUnitTest) must show the break (docs/testing.md §5).
		{"anti-entropy repairing a record this node lacks from a peer behind it", mutate.Set{RepairFromBehind: true}, []uint64{7000591}},
		{"a sender that ignores placement (entries sent whole to non-carriers)", mutate.Set{IgnorePlacement: true}, nil},
		{"a receiver that moves past a run of a table it carries", mutate.Set{PassCarriedSkip: true}, nil},
		{"a relay chosen that does not carry the subscriber's tables", mutate.Set{AnyRelay: true}, nil},
		// A copy from a node that does not carry t1 raising a carrier of t1 past t1's
		// entries (seed 22: a seven-node ring with retention).
		{"a base copy from a source that does not carry a table, past its entries", mutate.Set{CopyPastCarried: true}, []uint64{22}},
		{"a node that claims to hold every table whole (no HOLDS)", mutate.Set{HoldWhole: true}, nil},
		{"a node removed from a table that drops it at once", mutate.Set{DropAtOnce: true}, nil},
		{"a sender that ignores its links' directions and excluded tables", mutate.Set{IgnoreLinks: true}, nil},
		// A paused holder's late write, its clock ahead, applied over its successor's on a
		// node that had the successor's first (seed 674: a lock run, clocks within the bound).
		{"a token not compared on apply (last-writer-wins by HLC alone)", mutate.Set{IgnoreTokens: true}, []uint64{674}},
		{"a lock granted with an empty fence", mutate.Set{SkipLockFence: true}, nil},
		{"a restarted lock home that skips its quarantine", mutate.Set{SkipRestartQuarantine: true}, nil},
		{"a write under a lock acknowledged before the home has it", mutate.Set{ConfirmAtOnce: true}, nil},
		// A key's new home granting with its own applied positions once its move quarantine
		// is over, without its previous home's floor.
		{"a lock home that grants a moved key without its previous home's floor", mutate.Set{SkipMoveFloor: true}, nil},
		{"a delegate that keeps granting after it returned its delegation", mutate.Set{DelegateAfterReturn: true}, nil},
		// A write without a token taken in a fenced table: unlike a token not compared
		// (every write still carries its token, the order is by HLC), the order by token
		// stands and a write outside it enters, below every token (a lock run's client
		// tries one now and then).
		{"a write without a token taken in a fenced table (last-writer-wins there)", mutate.Set{UnfencedWrites: true}, nil},
		// Change feeds (conformance/sim/feeds.go): every run has consumers of t1's feed.
		{"a change feed that passes an entry with no event", mutate.Set{FeedSkipEntry: true}, nil},
		{"a change feed that gives changes again after a resume", mutate.Set{FeedRedeliverOnResume: true}, nil},
		// Runs naming t1 reach a feed in the runs that place it (a fifth of the seeds).
		{"a change feed that passes a run naming its table with no reread", mutate.Set{FeedPassNamedRun: true}, nil},
		// Fan-in hubs (conformance/sim/hubs.go): a tenth of the seeds run hubs and leaves,
		// and crash hubs under their leaves' writes.
		{"a hub that re-originates a leaf's writes again after a crash (its mark not written with its entry)", mutate.Set{ReoriginateTwiceAfterCrash: true}, nil},
		{"a hub whose re-originated records take its HLC and origin as their version", mutate.Set{HubHLCForConflicts: true}, nil},
		// The quiet control plane (protocol/replica/quiet.go): version-4 runs. (A hold
		// released while its peer still subscribes the origin breaks no invariant: the peer,
		// answered PURGED, takes a base copy and converges; TestQuietHoldKeptForSubscriber
		// catches it.)
		{"a node that does not go loud when it loses an origin's direct source", mutate.Set{NeverLoud: true}, nil},
		{"no head to a subscriber on a quiet link, behind or late", mutate.Set{SilentToSubscribers: true}, nil},
	} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel() // each mutation is a value of its own runs: nothing is shared
			caught, first := 0, ""
			seeds := slices.Clone(m.seeds)
			for seed := *simBase; seed < *simBase+uint64(*simSeeds); seed++ {
				seeds = append(seeds, seed)
			}
			for _, seed := range seeds {
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
				if unit, ok := byUnitTest[m.name]; ok {
					// The simulator's seeds miss it for now: the unit test that runs the
					// story with the break on must still see its effect.
					out, err := exec.Command("go", "test", "-count=1", "-run", "^"+unit[1]+"$", unit[0]).CombinedOutput()
					if err != nil {
						t.Errorf("with %s broken, no seed failed, and %s %s failed: %v\n%s", m.name, unit[0], unit[1], err, out)
						return
					}
					t.Logf("broken %s: no seed of the range caught it; %s %s did", m.name, unit[0], unit[1])
					return
				}
				t.Errorf("with %s broken, seeds %v and %d seeds from %d all passed: the invariants miss it", m.name, m.seeds, *simSeeds, *simBase)
				return
			}
			t.Logf("broken %s: first caught by %s", m.name, first)
			if *mutationAll {
				t.Logf("broken %s: %d of %d seeds fail", m.name, caught, len(seeds))
			}
		})
	}
}

// byUnitTest names, for a mutation no seed of the simulator's catches for now, the package
// and unit test that runs its story with the break on and must see its effect: a stopgap
// until a seed is found again, never a way to leave a mutation uncaught.
var byUnitTest = map[string][2]string{
	"anti-entropy repairing a record this node lacks from a peer behind it": {"plait/protocol/replica", "TestAntiEntropyNotFromAPeerBehind"},
}
