package sim

import (
	"fmt"
	"testing"
	"time"

	"plait/protocol/replica"
)

// TestDamagedRecordStuckOrigin: in a star A - B - C, B's record t/k is damaged (anti-entropy
// off: nothing else writes the record again). A's write of
// k, made a second before B's own while they were apart, makes B read the record to
// decide last-writer-wins, and the read fails: A's origin is charged, retried, and shows
// stuck apply-failed on B after the budget, while C's writes keep flowing through B to A
// and B passes nothing of A's it did not apply. Once the record reads again, A's entries
// apply on the next retry, B's newer value stays, and the cluster converges.
func TestDamagedRecordStuckOrigin(t *testing.T) {
	c := newV2Cluster(t, Options{Seed: 7, Config: replica.Config{AntiEntropyInterval: -1}}, []string{"A", "B", "C"})
	b := damagedStar(t, c)
	for i := range 30 {
		if _, err := c.Write("C", put(fmt.Sprint("c", i), "c")); err != nil {
			t.Fatal(err)
		}
		c.Run(time.Second)
	}
	a := b.Rep.Origin(c.Node("A").origin)
	if a.Stuck != replica.StuckApplyFailed || a.ApplyFailures < replica.DefaultApplyRetries || a.ApplyFailedSeq != 1 || a.AppliedSeq != 0 {
		t.Fatalf("B's status of A after 30 s: %+v, want stuck apply-failed on seq 1 after at least %d failures, nothing applied",
			a, replica.DefaultApplyRetries)
	}
	if got := b.Rep.Origin(c.Node("C").origin).AppliedSeq; got != 30 {
		t.Errorf("B applied %d of C while A is stuck, want 30", got)
	}
	if got := c.Node("A").Rep.Origin(c.Node("C").origin).AppliedSeq; got != 30 {
		t.Errorf("A applied %d of C through B while A is stuck on B, want 30", got)
	}
	if got := c.Node("C").Rep.Origin(c.Node("A").origin).AppliedSeq; got != 0 {
		t.Errorf("C applied %d of A through B, which applied none", got)
	}

	b.Repair("t", "k")
	if !c.Stabilize(2 * replica.MaxApplyRetryDelay) {
		_, why := c.Converged()
		t.Fatal("not converged after the repair:", why, c.Failures())
	}
	c.CheckConverged()
	if a := b.Rep.Origin(c.Node("A").origin); a.Stuck != "" || a.ApplyFailures != 0 || a.AppliedSeq != 2 {
		t.Errorf("B's status of A after the repair: %+v", a)
	}
	if r, ok, _ := b.Store.Get([]byte("t"), []byte("k")); !ok || string(r.Value) != "b" {
		t.Errorf("B's record k is %q, want B's newer b", r.Value)
	}
	if f := c.Failures(); len(f) > 0 {
		t.Fatal(f)
	}
}

// TestDamagedRecordRepairedByAntiEntropy: the same damaged record with anti-entropy on.
// A's entry fails on the record first (its range is asked a second after the connections);
// then B's scans leave the record out of its digests, the range differs from C's, and C's
// version of it (B's own write, applied on B) is written over it; A's entry applies at its
// next retry, with no one repairing the store by hand, and the cluster
// converges.
func TestDamagedRecordRepairedByAntiEntropy(t *testing.T) {
	c := newV2Cluster(t, Options{Seed: 7}, []string{"A", "B", "C"})
	b := damagedStar(t, c)
	if !c.Stabilize(2 * time.Minute) {
		_, why := c.Converged()
		t.Fatal("not converged:", why, c.Failures())
	}
	c.CheckConverged()
	a := b.Rep.Origin(c.Node("A").origin)
	if a.AppliedSeq != 2 || a.Stuck != "" || a.ApplyFailures != 0 {
		t.Errorf("B's status of A: %+v, want applied 2, not stuck", a)
	}
	if cs := b.Rep.Counters(); cs.RecordsDamaged == 0 || cs.AntiEntropyRecordsRepaired == 0 || cs.ApplyFailures == 0 {
		t.Errorf("B's counters: %d damaged met, %d repaired, %d apply failures; want each above 0", cs.RecordsDamaged,
			cs.AntiEntropyRecordsRepaired, cs.ApplyFailures)
	}
	if r, ok, err := b.Store.Get([]byte("t"), []byte("k")); err != nil || !ok || string(r.Value) != "b" {
		t.Errorf("B's record k: %q, %v, %v; want B's newer b, readable", r.Value, ok, err)
	}
	if f := c.Failures(); len(f) > 0 {
		t.Fatal(f)
	}
}

// damagedStar makes the scene of both tests on c (nodes A, B, C, not connected): A writes k
// and a2, B writes k a second later, B's record k is damaged, and A and C connect to B. A's
// entry of k is older than B's record, so B's last-writer-wins reads the record to decide.
func damagedStar(t *testing.T, c *Cluster) *Node {
	t.Helper()
	for _, k := range []string{"k", "a2"} {
		if _, err := c.Write("A", put(k, "a")); err != nil {
			t.Fatal(err)
		}
	}
	c.Run(time.Second)
	if _, err := c.Write("B", put("k", "b")); err != nil {
		t.Fatal(err)
	}
	b := c.Node("B")
	b.Damage("t", "k")
	for _, l := range [][2]string{{"A", "B"}, {"C", "B"}} {
		if err := c.Connect(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	return b
}
