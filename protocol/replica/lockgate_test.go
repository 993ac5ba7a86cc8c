package replica_test

import (
	"errors"
	"testing"
	"time"

	"plait/protocol/clustermap"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// TestLockGateBelowV4: a member the map lists that is known below version 4 (its own
// handshake said so) closes the gate again on a cluster whose locks were on: the caller
// answers a lock request cluster-not-v4 at once, sending nothing; the home answers one
// that reaches it anyway (asked directly) the same, granting nothing; a write under a
// token is refused and writes nothing. Once that member speaks version 4 the gate opens.
func TestLockGateBelowV4(t *testing.T) {
	h, a, b, c := lockCluster(t, `"A"`)
	g := b.lockResult(b.acquire("k", time.Second, 0), "")
	cfg := lockCfg
	cfg.MaxVersion = 3
	d := h.addNode("D", cfg)
	h.connect(d, c)
	if _, err := a.publish(mapDoc(2, `,"lock_homes":["A"]`, "A", "B", "C", "D")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*node{a, b, c} {
		if below := n.rep.MapStatus().MembersBelowV4; len(below) != 1 || below[0] != "D" {
			t.Fatalf("%s lists %v below version 4, want [D]", n.name, below)
		}
	}
	sent, granted := b.rep.Counters().RequestsSent, a.rep.LockStatus().Table.Granted
	b.lockResult(b.acquire("k2", time.Second, 0), replica.CodeClusterNotV4)
	if n := b.rep.Counters().RequestsSent; n != sent {
		t.Fatalf("B sent %d requests for a lock request refused at once", n-sent)
	}
	body, err := wire.Marshal(replica.LockArgs{Table: "t", Key: []byte("k2"), TTLMS: 1000})
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.rep.Ask(c.clock(), "A", replica.KindLockAcquire, "write", body)
	if err != nil {
		t.Fatal(err)
	}
	h.pump()
	c.lockResult(id, replica.CodeClusterNotV4)
	if n := a.rep.LockStatus().Table.Granted; n != granted {
		t.Fatalf("the home granted %d leases while D is below version 4", n-granted)
	}
	head := b.originStatus(b).AppliedSeq
	if _, err := b.rep.WriteTokened(b.clock(), g.Token, []wire.Op{put("t", "k", "1")}); !notV4(err) {
		t.Fatalf("B's write under a token with D below version 4: %v, want cluster-not-v4", err)
	}
	if now := b.originStatus(b).AppliedSeq; now != head {
		t.Fatalf("B's log went from %d to %d on a refused write", head, now)
	}
	// D upgraded: the gate opens.
	d.cfg.MaxVersion = 0
	d.restart()
	h.connect(d, c)
	if below := b.rep.MapStatus().MembersBelowV4; len(below) != 0 {
		t.Fatalf("B lists %v below version 4 with D upgraded", below)
	}
	b.lockResult(b.acquire("k2", time.Second, 0), "")
}

// notV4 reports whether err is the version-4 gate's refusal.
func notV4(err error) bool {
	var ce *clustermap.Error
	return errors.As(err, &ce) && ce.Code == clustermap.CodeClusterNotV4
}
