package replica_test

import (
	"testing"
	"time"

	"plait/protocol/lock"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// TestLockConfirmByExpiry: the home confirms a write under a lease it applies while it
// still holds the lease (before its expiry, ttl·(1+ρ) from the grant), not while the
// holder may still write (its holder deadline, ttl·(1−ρ)): the table's Confirm, not its
// Check (docs/design.md §25.6). A holder writes just before its deadline and its entry
// reaches the home just after it: the home has not freed the key, so the next grant's
// fence covers the write, and the write is acknowledged, no confirm lost. A confirm that
// reaches the home after the expiry is lock-lost, and counted as an overlap the home saw.
func TestLockConfirmByExpiry(t *testing.T) {
	h, a, b, _ := lockCluster(t, `"A"`)
	ba := h.links[0]
	const ttl = 2 * time.Second // holder deadline 1.998 s after the grant, expiry 2.002 s

	// confirmAt acquires key for ttl, writes it under the token writeAt after the grant and
	// has the home apply the write and its confirm arriveAt after it.
	confirmAt := func(key string, writeAt, arriveAt time.Duration) replica.Answer {
		t.Helper()
		g := b.lockResult(b.acquire(key, ttl, 0), "")
		grant := h.now // the harness delivers at once: the home granted now, on its clock
		h.advance(grant.Add(writeAt).Sub(h.now))
		if _, ok := b.rep.HeldLease(b.clock(), g.Token); !ok {
			t.Fatalf("B no longer holds its lease %v after the grant", writeAt)
		}
		ba.hold = true
		seq, err := b.rep.WriteTokened(b.clock(), g.Token, []wire.Op{put("t", key, writeAt.String())})
		if err != nil {
			t.Fatal(err)
		}
		id := b.lockOp(replica.LockOp{Kind: replica.KindLockConfirm, Table: "t", Key: []byte(key), Token: g.Token, Origin: b.origin, Seq: seq})
		h.advance(grant.Add(arriveAt).Sub(h.now))
		ba.hold = false
		h.pump()
		a, ok := b.answerOf(id)
		if !ok {
			t.Fatalf("the confirm of the write at %v, applied at the home at %v, not answered", writeAt, arriveAt)
		}
		return a
	}

	// Written at 1.990 s, applied at the home at 2 s: past the holder deadline, before
	// the expiry.
	if ans := confirmAt("k1", 1990*time.Millisecond, 2*time.Second); ans.Code != "" {
		t.Fatalf("the confirm of a write the home applied at 2 s, its lease live until 2.002 s, answered %q (%s), want ok", ans.Code, ans.Message)
	}
	if st := a.rep.LockStatus(); st.Table.ConfirmsLost != 0 || st.Table.Overlaps != 0 {
		t.Fatalf("A's lock status %+v: no confirm lost", st.Table)
	}
	// Written at 1.997 s, applied at 2.010 s: the home freed the key at 2.002 s.
	if ans := confirmAt("k2", 1997*time.Millisecond, 2010*time.Millisecond); ans.Code != wire.Code(lock.CodeLost) {
		t.Fatalf("the confirm of a write the home applied after the lease's expiry answered %q (%s), want lock-lost", ans.Code, ans.Message)
	}
	if st := a.rep.LockStatus(); st.Table.ConfirmsLost != 1 || st.Table.Overlaps != 1 {
		t.Fatalf("A's lock status %+v: one confirm lost, an overlap", st.Table)
	}
}

// TestLockCheckByHolderDeadline: the other side of the difference. A lock-check (may a
// node other than the holder's take a write under the token now?) is answered by the
// holder's deadline on the home's clock, ttl·(1−ρ) from the grant, not by the expiry: a
// write taken after the holder stopped could land after its successor's grant. Past the
// holder deadline and before the expiry, the check is lock-lost, and it is no overlap (the
// home still holds the lease).
func TestLockCheckByHolderDeadline(t *testing.T) {
	h, a, b, c := lockCluster(t, `"A"`)
	const ttl = 2 * time.Second // holder deadline 1.998 s after the grant, expiry 2.002 s
	g := b.lockResult(b.acquire("k", ttl, 0), "")
	check := replica.LockOp{Kind: replica.KindLockCheck, Table: "t", Key: []byte("k"), Token: g.Token}
	h.advance(1997 * time.Millisecond)
	c.lockResult(c.lockOp(check), "")
	h.advance(2 * time.Millisecond) // 1.999 s
	c.lockResult(c.lockOp(check), wire.Code(lock.CodeLost))
	if st := a.rep.LockStatus(); st.Table.Leases != 1 || st.Table.ConfirmsLost != 1 || st.Table.Overlaps != 0 {
		t.Fatalf("A's lock status %+v: the lease held, one check lost, no overlap", st.Table)
	}
}
