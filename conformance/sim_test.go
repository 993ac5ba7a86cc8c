package conformance

import (
	"flag"
	"testing"
	"time"

	"plait/conformance/sim"
)

var (
	simSeed   = flag.Uint64("seed", 0, "replay one simulator seed (TestSim); any value, 0 included")
	simSeeds  = flag.Int("seeds", 500, "how many seeds TestSim runs from -seed-base")
	simBase   = flag.Uint64("seed-base", 1, "the first seed of TestSim's range")
	simTrace  = flag.Bool("sim.trace", false, "log the simulator's trace of a replayed seed")
	simNodes  = flag.Int("sim.nodes", 0, "nodes of every random run (0: 3 to 8, drawn from the seed)")
	simLeaves = flag.Int("sim.leaves", 0, "leaves of every random run, each a run with fan-in hubs (0: a tenth of the seeds have hubs and 1 to 20 leaves)")
	simFrames = flag.Bool("sim.frames", false, "log the frames of a replayed seed (-seed) by type, sent and delivered, as a Markdown table (for BENCHMARKS.md)")
)

// TestSim runs the CI's fixed range of simulator seeds (500 from 1), or replays one with
// -seed=N (add -trace for what happened). Every failing seed is printed; make sim runs
// fresh ranges.
func TestSim(t *testing.T) {
	replay := false
	flag.Visit(func(f *flag.Flag) { replay = replay || f.Name == "seed" })
	if replay {
		opts := sim.Options{Nodes: *simNodes, Leaves: *simLeaves}
		if *simTrace {
			opts.Trace = func(s string) { t.Log(s) }
		}
		rep := sim.Random(*simSeed, opts)
		t.Log(rep)
		if *simFrames {
			t.Logf("frames of seed %d:\n%s", *simSeed, rep.FrameTable())
		}
		for _, f := range rep.Failures {
			t.Error(f)
		}
		return
	}
	start := time.Now()
	failed, largest, retaining, purgedRuns := 0, 0, 0, 0
	copyRuns, copies, resumed, copyCrashes, tombstones := 0, 0, uint64(0), 0, uint64(0)
	linkRuns, oneWay, excluding, linkChanges, linkChecked := 0, 0, 0, 0, 0
	lockRuns, lockGrants, lockAcked, lockLost, lockHomeCrashes := 0, 0, 0, 0, 0
	lockBeyond, lockOverlaps, lockDelegated, lockVia, lockViaDelegated := 0, 0, 0, 0, 0
	var fd sim.Report // the change feeds' counts, summed
	var hb sim.Report // the hub runs' counts, summed; their largest core cost
	hubRuns := 0
	var virtual time.Duration
	var frames uint64
	writes := 0
	for seed := *simBase; seed < *simBase+uint64(*simSeeds); seed++ {
		rep := sim.Random(seed, sim.Options{Nodes: *simNodes, Leaves: *simLeaves})
		if rep.Hubs > 0 {
			hubRuns++
			hb.Leaves, hb.LeafWrites, hb.LeafMoves, hb.MoveDoubles = hb.Leaves+rep.Leaves, hb.LeafWrites+rep.LeafWrites, hb.LeafMoves+rep.LeafMoves, hb.MoveDoubles+rep.MoveDoubles
			hb.LeafReoriginated, hb.LeafDuplicates, hb.LeafTwice = hb.LeafReoriginated+rep.LeafReoriginated, hb.LeafDuplicates+rep.LeafDuplicates, hb.LeafTwice+rep.LeafTwice
			hb.CoreVector, hb.CoreRows, hb.CoreBytes = max(hb.CoreVector, rep.CoreVector), max(hb.CoreRows, rep.CoreRows), max(hb.CoreBytes, rep.CoreBytes)
			hb.Messages, hb.Virtual, hb.Nodes = hb.Messages+rep.Messages, hb.Virtual+rep.Virtual, max(hb.Nodes, rep.Nodes)
		}
		largest, virtual = max(largest, rep.Nodes), virtual+rep.Virtual
		frames, writes = frames+rep.Frames(), writes+rep.Writes
		if rep.RetainBytes > 0 {
			retaining++
			if rep.Purged > 0 {
				purgedRuns++
			}
			if rep.Copies > 0 {
				copyRuns++
			}
			copies, resumed, copyCrashes, tombstones = copies+rep.Copies, resumed+rep.CopyResumes, copyCrashes+rep.CopyCrashes, tombstones+rep.TombstonesDropped
		}
		if rep.OneWay+rep.Excluding+rep.LinkChanges > 0 {
			linkRuns++
			oneWay, excluding, linkChanges, linkChecked = oneWay+rep.OneWay, excluding+rep.Excluding, linkChanges+rep.LinkChanges, linkChecked+rep.LinkChecked
		}
		if rep.LockGrants+rep.LockHomeCrashes > 0 {
			lockRuns++
			lockGrants, lockAcked, lockLost, lockHomeCrashes = lockGrants+rep.LockGrants, lockAcked+rep.LockAcked, lockLost+rep.LockLost, lockHomeCrashes+rep.LockHomeCrashes
			lockBeyond, lockOverlaps = lockBeyond+rep.LockBeyond, lockOverlaps+rep.LockOverlaps
			lockDelegated += rep.LockDelegated
			lockVia, lockViaDelegated = lockVia+rep.LockVia, lockViaDelegated+rep.LockViaDelegated
		}
		fd.FeedChanges, fd.FeedRereads, fd.FeedDisconnects = fd.FeedChanges+rep.FeedChanges, fd.FeedRereads+rep.FeedRereads, fd.FeedDisconnects+rep.FeedDisconnects
		fd.FeedResumes, fd.FeedBehind, fd.FeedPurged = fd.FeedResumes+rep.FeedResumes, fd.FeedBehind+rep.FeedBehind, fd.FeedPurged+rep.FeedPurged
		fd.FeedSkipped, fd.FeedCopy, fd.FeedRepair = fd.FeedSkipped+rep.FeedSkipped, fd.FeedCopy+rep.FeedCopy, fd.FeedRepair+rep.FeedRepair
		if len(rep.Failures) > 0 {
			failed++
			t.Errorf("FAILING SEED %d (replay: go test ./conformance -run 'TestSim$' -seed=%d -sim.nodes=%d -sim.leaves=%d -sim.trace -v): %s\n  %v",
				seed, seed, *simNodes, *simLeaves, rep, rep.Failures)
		}
	}
	// Whether the range exercises retention, copies and tombstones is judged over enough
	// runs with retention (the CI range has about 170): a handful of seeds, as make sim
	// NODES=100 SEEDS=2 runs, cannot be expected to crash a copy and drop a tombstone.
	const judged = 20
	if retaining > 0 && retaining < judged {
		t.Logf("coverage not judged: %d runs with retention, %d needed", retaining, judged)
	}
	if retaining >= judged && purgedRuns < retaining*9/10 {
		t.Errorf("%d of %d runs with retention purged anything: the range does not exercise it", purgedRuns, retaining)
	}
	// Half the runs with retention keep a node away past its holds: most of those copy, and
	// some copies are crashed and resumed.
	if retaining >= judged && (copyRuns < retaining/4 || copyCrashes == 0 || resumed == 0 || tombstones == 0) {
		t.Errorf("of %d runs with retention, %d took %d base copies (%d resumed, %d crashed) and %d tombstones were dropped: the range does not exercise them",
			retaining, copyRuns, copies, resumed, copyCrashes, tombstones)
	}
	// Links (conformance/sim/links.go): over enough runs that draw them (the CI range has
	// about 80), some make links one-way, exclude t0, change a link live, and send entries
	// the per-link checks look at.
	if linkRuns >= judged && (oneWay == 0 || excluding == 0 || linkChanges == 0 || linkChecked == 0) {
		t.Errorf("of %d runs with links, %d links were made one-way, %d excluded t0, %d changed live, %d entries were checked: the range does not exercise them",
			linkRuns, oneWay, excluding, linkChanges, linkChecked)
		t.Logf("%d with locks: %d leases held, %d writes under them acknowledged, %d refused at the confirm, %d home crashes",
			lockRuns, lockGrants, lockAcked, lockLost, lockHomeCrashes)
	}
	// Locks (conformance/sim/locks.go): over enough runs that draw them (the CI range has
	// about 80), leases are granted, writes under them acknowledged and refused, and homes
	// crash under them.
	if lockRuns >= judged && (lockGrants == 0 || lockAcked == 0 || lockLost == 0 || lockHomeCrashes == 0) {
		t.Errorf("of %d runs with locks, %d leases were granted, %d writes acknowledged, %d refused, %d homes crashed: the range does not exercise them",
			lockRuns, lockGrants, lockAcked, lockLost, lockHomeCrashes)
	}
	// Half the lock runs delegate, and a third of the writes go through a node other than
	// the holder's: some of those are under a delegated lease, whose home asks the delegate.
	if lockRuns >= judged && (lockVia == 0 || lockViaDelegated == 0) {
		t.Errorf("of %d runs with locks, %d writes acknowledged through another node, %d of them under a delegated lease: the range does not exercise them",
			lockRuns, lockVia, lockViaDelegated)
	}
	// Change feeds (conformance/sim/feeds.go): every run has consumers; over enough runs
	// with retention (copies, purges) they resume, wait for a node behind them, are told
	// to reread for a copy and for a purge.
	if retaining >= judged && (fd.FeedChanges == 0 || fd.FeedResumes == 0 || fd.FeedBehind == 0 || fd.FeedCopy == 0 || fd.FeedPurged == 0) {
		t.Errorf("the feeds' consumers were given %d changes, resumed %d times (%d behind), told to reread %d times for a copy, %d purged: the range does not exercise them",
			fd.FeedChanges, fd.FeedResumes, fd.FeedBehind, fd.FeedCopy, fd.FeedPurged)
	}
	// Fan-in hubs (conformance/sim/hubs.go): over enough hub runs (the CI range has 50),
	// leaves write and move, hubs re-originate, and some writes are carried by two hubs.
	if hubRuns >= judged && (hb.LeafWrites == 0 || hb.LeafMoves == 0 || hb.LeafReoriginated == 0 || hb.MoveDoubles == 0) {
		t.Errorf("of %d runs with hubs, %d leaf writes acknowledged, %d leaf moves, %d re-originated, %d carried by two hubs: the range does not exercise them",
			hubRuns, hb.LeafWrites, hb.LeafMoves, hb.LeafReoriginated, hb.MoveDoubles)
	}
	took := time.Since(start)
	t.Logf("%d seeds from %d: %d failed, %s; %d with retention, %d of them purged, %d took %d base copies (%d resumed, %d crashed), %d tombstones dropped",
		*simSeeds, *simBase, failed, took.Round(time.Millisecond), retaining, purgedRuns, copyRuns, copies, resumed, copyCrashes, tombstones)
	t.Logf("%d with links: %d links made one-way, %d excluding t0, %d changed live; %d entries checked against their link's settings",
		linkRuns, oneWay, excluding, linkChanges, linkChecked)
	t.Logf("%d with locks: %d leases held (%d granted by a delegate), %d writes under them acknowledged (%d through another node, %d of those under a delegated lease), %d refused at the confirm, %d home crashes; %d with a clock beyond the bounds, %d overlaps the homes saw",
		lockRuns, lockGrants, lockDelegated, lockAcked, lockVia, lockViaDelegated, lockLost, lockHomeCrashes, lockBeyond, lockOverlaps)
	t.Logf("feeds: %d changes given, %d rereads (%d of runs naming the table, %d for copies, %d for repairs), %d disconnects, %d resumes (%d waiting for a node behind), %d purged restarts",
		fd.FeedChanges, fd.FeedRereads, fd.FeedSkipped, fd.FeedCopy, fd.FeedRepair, fd.FeedDisconnects, fd.FeedResumes, fd.FeedBehind, fd.FeedPurged)
	t.Logf("hubs: %d runs with hubs (%d leaves), %d leaf writes acknowledged, %d re-originated (%d duplicates from leaves), %d leaf moves, %d writes carried by two hubs (counted twice %d); a core node's cost at most: %d vector entries, %d status rows, %d store bytes; %d messages over %s virtual, largest %d nodes",
		hubRuns, hb.Leaves, hb.LeafWrites, hb.LeafReoriginated, hb.LeafDuplicates, hb.LeafMoves, hb.MoveDoubles, hb.LeafTwice, hb.CoreVector, hb.CoreRows, hb.CoreBytes, hb.Messages, hb.Virtual.Round(time.Millisecond), hb.Nodes)
	perWrite := 0.0
	if writes > 0 {
		perWrite = float64(frames) / float64(writes)
	}
	t.Logf("traffic: %d frames delivered for %d writes, %.1f frames per write", frames, writes, perWrite)
	t.Logf("%.1f schedules per second; %.0fx virtual time; largest topology %d nodes",
		float64(*simSeeds)/took.Seconds(), virtual.Seconds()/took.Seconds(), largest)
}
