package replica_test

import (
	"errors"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/store/memstore"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// rawPeer is a bare protocol session connected to one replica, for peers that do what no
// replica would.
type rawPeer struct {
	t    *testing.T
	rep  *replica.Replica
	conn replica.ConnID
	s    *protocol.Session
	now  time.Time
}

func newRawPeer(t *testing.T, rep *replica.Replica, name string, origin wire.OriginID) *rawPeer {
	t.Helper()
	s, err := protocol.New(protocol.Config{Role: wire.RoleDialer, Name: name, Origin: origin, Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	p := &rawPeer{t: t, rep: rep, s: s, now: epoch}
	if p.conn, err = rep.Open(epoch, wire.RoleListener, "", make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(epoch, []byte("raw peer nonce 16")); err != nil {
		t.Fatal(err)
	}
	p.pump()
	if s.State() != protocol.StateEstablished {
		t.Fatalf("raw peer: %v, %v", s.State(), s.Err())
	}
	return p
}

// pump moves messages both ways until neither side has anything to send.
func (p *rawPeer) pump() {
	p.t.Helper()
	for range 1000 {
		moved := false
		for _, out := range p.rep.Output() {
			for _, m := range out.Messages {
				moved = true
				_ = p.s.Receive(p.now, m)
			}
		}
		for _, m := range p.s.Ready().Messages {
			moved = true
			if err := p.rep.Receive(p.now, p.conn, m); err != nil {
				p.t.Fatalf("replica: %v", err)
			}
		}
		if !moved {
			return
		}
	}
	p.t.Fatal("raw peer: still moving after 1000 rounds")
}

// TestSubscribeToAnUnknownOrigin: a peer may subscribe to an origin this node never heard
// of; the channel stays empty and the node goes on.
func TestSubscribeToAnUnknownOrigin(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	p := newRawPeer(t, a.rep, "X", wire.OriginID{0xee, 1})
	if err := p.s.V2().Subscribe([]vector.Entry{{Origin: wire.OriginID{0xdd, 2}}}); err != nil {
		t.Fatal(err)
	}
	p.pump()
	if seq := a.write(put("t", "k", "v")); seq != 1 {
		t.Fatalf("A's write after the subscription: seq %d", seq)
	}
	p.pump()
	if st := p.s.Stats(); st.TxnsReceived != 0 || p.s.State() != protocol.StateEstablished {
		t.Errorf("raw peer: %+v, state %v; want no entry and the connection up", st, p.s.State())
	}
}

// syncCounter is a memstore that counts its syncs.
type syncCounter struct {
	*memstore.Store
	syncs int
}

func (s *syncCounter) Sync() error { s.syncs++; return s.Store.Sync() }

// TestHoldUnsyncedSyncsOnOpen: after a process crash the store may hold applied writes
// that were never synced; a replica that holds unsynced writes syncs them before it
// counts them as servable, and one that does not hold them has no need to.
func TestHoldUnsyncedSyncsOnOpen(t *testing.T) {
	for _, hold := range []bool{true, false} {
		s := &syncCounter{Store: memstore.New(store.Identity{Origin: wire.OriginID{1}, Name: "A"})}
		if _, err := replica.New(replica.Config{HoldUnsynced: hold}, s); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: 0}[hold]; s.syncs != want {
			t.Errorf("HoldUnsynced %v: %d syncs on open, want %d", hold, s.syncs, want)
		}
	}
}

// TestNeedsSyncOnlyForWhatWaits: replicated applies need a sync only while a version-1
// peer waits for durable arrival positions; local writes always do.
func TestNeedsSyncOnlyForWhatWaits(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{HoldUnsynced: true})
	b := h.addNode("B", replica.Config{})
	h.connect(a, b)
	b.write(put("t", "b1", "v"))
	h.pump()
	if got := a.originStatus(b).AppliedSeq; got != 1 {
		t.Fatalf("A applied B up to %d", got)
	}
	if a.rep.NeedsSync() {
		t.Error("A needs a sync for a replicated apply with no version-1 peer")
	}
	a.write(put("t", "a1", "v"))
	if !a.rep.NeedsSync() {
		t.Error("A's local write does not need a sync")
	}
	h.check(a, a.rep.Synced(a.clock(), a.rep.SyncPoint()))
	c := h.addNode("C", replica.Config{MaxVersion: 1})
	h.connect(c, a)
	b.write(put("t", "b2", "v"))
	h.pump()
	if !a.rep.NeedsSync() {
		t.Error("A holds an arrival a version-1 peer waits for, and needs no sync")
	}
	p := a.rep.SyncPoint()
	b.write(put("t", "b3", "v")) // applied while the sync runs: not covered by it
	h.pump()
	h.check(a, a.rep.Synced(a.clock(), p))
	h.pump()
	if got := c.originStatus(b).AppliedSeq; got != 2 {
		t.Errorf("C (version 1, through A) applied B up to %d, want 2: what the sync covered", got)
	}
	h.check(a, a.rep.Synced(a.clock(), a.rep.SyncPoint()))
	h.pump()
	if got := c.originStatus(b).AppliedSeq; got != 3 {
		t.Errorf("C applied B up to %d after the second sync, want 3", got)
	}
}

// TestTooManyOriginsEndsTheConnection: a session that would name more origins than its
// bound ends that connection with too-many-origins; the node goes on. (A session names the
// origins it carries: each leaf's connection would carry the three other leaves.)
func TestTooManyOriginsEndsTheConnection(t *testing.T) {
	h := newHarness(t)
	hub := h.addNode("H", replica.Config{Limits: protocol.Limits{MaxOrigins: 2}})
	var leaves []*node
	for _, name := range []string{"L1", "L2", "L3", "L4"} {
		l := h.addNode(name, replica.Config{})
		h.connect(l, hub)
		l.write(put("t", name, "v"))
		leaves = append(leaves, l)
	}
	h.advance(time.Second)
	if _, err := hub.rep.Write(hub.clock(), []wire.Op{put("t", "h", "still running")}); err != nil {
		t.Fatalf("the hub stopped: %v", err)
	}
	closed := 0
	for _, l := range leaves {
		if e := l.rep.LastError("H"); e != nil && e.Err.Code == wire.CodeTooManyOrigins {
			closed++
		}
	}
	if closed == 0 {
		t.Error("no leaf saw a connection end with too-many-origins")
	}
	if errors.Is(hub.rep.Tick(hub.clock()), replica.ErrStopped) {
		t.Error("the hub is stopped")
	}
}
