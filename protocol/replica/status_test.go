package replica_test

import (
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/wire"
)

// TestOriginLag: an origin whose heads are ahead of what is applied reports the lag in
// seqs (head minus applied) and in HLC milliseconds (the newest known entry's against the
// newest applied one's), the same in Status and Origin; once the entries arrive the lag is
// zero. A's entries 3 to 5 are lost on the way to C, written 40, 80 and 120 ms after entry
// 2, while A's heads still reach C.
// Version 3, whose heads reach a subscriber at once and every peer whatever its sources
// (version 4's quiet control plane: quiet_test.go).
func TestOriginLag(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{MaxVersion: 3})
	c := h.addNode("C", replica.Config{MaxVersion: 3})
	h.connect(a, c)
	a.write(put("t", "k1", "v"))
	a.write(put("t", "k2", "v"))
	h.pump()
	h.drop = func(from, to string, f wire.Decoded) bool {
		o, seq, ok := dataSeq(f)
		return ok && from == "A" && to == "C" && o == a.origin && seq >= 3
	}
	for range 3 {
		h.now = h.now.Add(40 * time.Millisecond) // before any timer of A or C
		a.write(put("t", "k", "v"))
		h.pump()
	}
	// LagSeq 5 - 2; LagMs from entry 5's HLC (+120 ms) and entry 2's (+0 ms, logical 1).
	want := replica.OriginStatus{Origin: a.origin, Name: "A", AppliedSeq: 2, HeadSeq: 5, LagSeq: 3, LagMs: 120, SourcePeer: "A",
		LogBytes: c.logBytes(a), Health: replica.HealthHealthy} // 120 ms behind: within HealthyLag
	got := c.originStatus(a)
	if got != want {
		t.Errorf("C's status of A with entries 3 to 5 held back = %+v\nwant %+v", got, want)
	}
	if o := c.rep.Origin(a.origin); o != got {
		t.Errorf("C's Origin(A) = %+v\nwant what Status says, %+v", o, got)
	}

	h.drop = nil
	h.advance(replica.DefaultStallTimeout) // the stall resend brings entries 3 to 5
	want.AppliedSeq, want.LagSeq, want.LagMs, want.LogBytes = 5, 0, 0, c.logBytes(a)
	if got := c.originStatus(a); got != want {
		t.Errorf("C's status of A once the entries arrived = %+v\nwant %+v", got, want)
	}
	if o := c.rep.Origin(a.origin); o != want {
		t.Errorf("C's Origin(A) once the entries arrived = %+v\nwant %+v", o, want)
	}
}
