package replica_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// TestApplyRetryBudget: an entry of A that B's store refuses for what it holds (an error of
// the entry, not of the storage) is retried at a doubling backoff and never passed: B's
// cursor of A and its acknowledgement stay before it, while C's entries keep applying. After
// ApplyRetries failures A shows stuck apply-failed with the error; once the cause goes, the
// next retry applies it and everything after it, and the digests agree.
func TestApplyRetryBudget(t *testing.T) {
	for _, version := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			h := newHarness(t)
			cfg := replica.Config{MaxVersion: version, ApplyRetries: 3}
			a := h.addNode("A", cfg)
			c := h.addNode("C", cfg)
			b := h.addNode("B", cfg)
			faults := b.withFaults()
			ab := h.connect(a, b)
			h.connect(c, b)
			// Version 1 closes the connection of a failing entry: A redials, as a node
			// does, every 100 ms.
			advance := func(d time.Duration) {
				for step := 100 * time.Millisecond; d > 0; d -= step {
					h.advance(min(step, d))
					if ab.dialer.closed || ab.listener.closed {
						ab = h.connect(a, b)
					}
				}
			}
			a.write(put("t", "a1", "1"))
			a.write(put("t", "a2", "1"))
			h.advance(time.Second)
			if got := b.applied()[a.origin]; got != 2 {
				t.Fatalf("B applied %d of A before the fault, want 2", got)
			}
			ackedBefore := h.acked("B", "A", a.origin)

			faults.cannotApply[entryAt{a.origin, 3}] = true
			for i := 3; i <= 5; i++ {
				a.write(put("t", fmt.Sprint("a", i), "1"))
			}
			advance(500 * time.Millisecond)
			if o := b.originStatus(a); o.ApplyFailures != 1 || o.ApplyFailedSeq != 3 || o.Stuck != "" || o.AppliedSeq != 2 {
				t.Fatalf("B's status of A after one failure: %+v, want 1 failure of seq 3, not stuck, applied 2", o)
			}
			// Backoffs 1 s and 2 s: the third failure comes 3 s after the first, and
			// exhausts the budget of 3.
			for i := 0; i < 6; i++ {
				c.write(put("t", fmt.Sprint("c", i), "1"))
				advance(time.Second)
			}
			o := b.originStatus(a)
			if o.Stuck != replica.StuckApplyFailed || o.ApplyFailures != 3 || !strings.Contains(o.ApplyError, "entry 3") ||
				!strings.Contains(o.ApplyError, store.ErrCannotApply.Error()) {
				t.Errorf("B's status of A after the budget: %+v, want stuck apply-failed, 3 failures, the error", o)
			}
			if o.AppliedSeq != 2 || b.applied()[a.origin] != 2 {
				t.Errorf("B applied A up to %d while entry 3 fails, want 2", o.AppliedSeq)
			}
			if version >= 2 {
				if got := h.acked("B", "A", a.origin); got != ackedBefore {
					t.Errorf("B acknowledged A up to %d while entry 3 fails, want %d", got, ackedBefore)
				}
			}
			if got := b.applied()[c.origin]; got != 6 {
				t.Errorf("B applied %d of C while A is stuck, want 6: the rest of the cluster keeps flowing", got)
			}
			if faults.entryRefused != 3 || b.rep.Counters().ApplyFailures != 3 {
				t.Errorf("B tried entry 3 %d times (counter %d) in 6.5 s, want 3: the backoff bounds the tries",
					faults.entryRefused, b.rep.Counters().ApplyFailures)
			}
			if b.rep.Degraded() != nil {
				t.Errorf("an error of one entry degraded B's storage: %v", b.rep.Degraded())
			}
			// Retries go on at the backoff: the fourth try is 4 s after the third.
			advance(4 * time.Second)
			if faults.entryRefused != 4 {
				t.Errorf("B tried entry 3 %d times after the next backoff, want 4", faults.entryRefused)
			}

			delete(faults.cannotApply, entryAt{a.origin, 3})
			advance(replica.MaxApplyRetryDelay)
			o = b.originStatus(a)
			if o.AppliedSeq != 5 || o.Stuck != "" || o.ApplyFailures != 0 || o.ApplyError != "" {
				t.Errorf("B's status of A once the entry applies: %+v, want applied 5, not stuck, no failure", o)
			}
			if c := b.rep.Counters(); version >= 2 && c.DuplicatesReceived != 0 {
				t.Errorf("B counted %d duplicates, want 0", c.DuplicatesReceived)
			}
			for i := 1; i <= 5; i++ {
				if _, ok := b.get("t", fmt.Sprint("a", i)); !ok {
					t.Errorf("B lacks A's record a%d", i)
				}
			}
		})
	}
}

// TestApplyRetryStorageErrorNotCharged: a storage error degrades the node and never counts
// against the origin whose entry met it.
func TestApplyRetryStorageErrorNotCharged(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{ApplyRetries: 1})
	b := h.addNode("B", replica.Config{ApplyRetries: 1})
	faults := b.withFaults()
	h.connect(a, b)
	faults.fail["apply"] = wire.CodeStorageFull
	a.write(put("t", "a1", "1"))
	h.advance(5 * time.Second)
	if b.rep.Degraded() == nil {
		t.Fatal("B did not degrade for a storage error")
	}
	if o := b.originStatus(a); o.ApplyFailures != 0 || o.Stuck != "" || b.rep.Counters().ApplyFailures != 0 {
		t.Errorf("a storage error was charged to A: %+v, counter %d", o, b.rep.Counters().ApplyFailures)
	}
}

// TestApplyRetryDamagedRecord: an entry whose last-writer-wins read meets a damaged record
// (ErrRecordDamaged) counts against its origin like a refused apply; once the record reads
// again the entry applies, and last-writer-wins still keeps the newer version.
func TestApplyRetryDamagedRecord(t *testing.T) {
	h := newHarness(t)
	cfg := replica.Config{ApplyRetries: 2, MaxClockOffset: -1}
	a := h.addNode("A", cfg)
	b := h.addNode("B", cfg)
	a.skew = -time.Hour // A's entries are older than B's record: B reads the record to decide
	faults := b.withFaults()
	a.write(put("t", "k", "a"))
	b.write(put("t", "k", "b"))
	faults.damaged["t/k"] = true
	h.connect(a, b)
	h.advance(4 * time.Second)
	o := b.originStatus(a)
	// Tries at 0 s, 1 s and 3 s: stuck since the second, 3 failures by 4 s.
	if o.Stuck != replica.StuckApplyFailed || o.ApplyFailures != 3 || !strings.Contains(o.ApplyError, store.ErrRecordDamaged.Error()) {
		t.Errorf("B's status of A: %+v, want stuck apply-failed, 3 failures on the damaged record", o)
	}
	if o.AppliedSeq != 0 {
		t.Errorf("B applied A up to %d past a damaged record, want 0", o.AppliedSeq)
	}
	delete(faults.damaged, "t/k")
	h.advance(replica.MaxApplyRetryDelay)
	if got := b.applied()[a.origin]; got != 1 {
		t.Errorf("B applied %d of A once the record reads, want 1", got)
	}
	if r, ok := b.get("t", "k"); !ok || string(r.Value) != "b" {
		t.Errorf("B's record t/k is %+v, want B's newer value b", r)
	}
	if got := b.originStatus(a); got.Stuck != "" || got.ApplyFailures != 0 {
		t.Errorf("B's status of A after it applied: %+v", got)
	}
}
