package conformance_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"plait/conformance/sim"
	"plait/protocol/clustermap"
	"plait/protocol/lock"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// The lock handoff in the version matrix (docs/design.md §25, and §23.3's gate).

// lockMatrixConfig is a home's config in the lock handoff: leases of up to 2 s, so that a
// home's restart quarantine is about 2.5 s.
var lockMatrixConfig = replica.Config{Limits: sim.SimLimits, Locks: lock.Config{MaxTTL: 2 * time.Second}}

// lockMatrixQuarantine is how long lockMatrixConfig's restart quarantine lasts.
var lockMatrixQuarantine = lock.Config{MaxTTL: 2 * time.Second, Drift: lock.DefaultDrift, OffsetBound: replica.DefaultMaxClockOffset}.Quarantine()

const (
	lockMembersDoc = `{"generation":1,"nodes":[{"name":"A"},{"name":"B"}]}`
	// B is the only home, so A's lock requests cross the link to B through the session
	// of the build under test, and B's grants are local.
	lockHomesDoc = `{"fenced_tables":["f"],"generation":2,"lock_homes":["B"],"nodes":[{"name":"A"},{"name":"B"}]}`
)

// lockOn runs op on node and waits (simulated) for its answer, up to 10 s.
func lockOn(cl *sim.Cluster, node string, op replica.LockOp) (replica.Answer, error) {
	call, err := cl.Lock(node, op)
	if err != nil {
		return replica.Answer{}, err
	}
	for i := 0; i < 1000 && !call.Answered; i++ {
		cl.Run(10 * time.Millisecond)
	}
	if !call.Answered {
		return replica.Answer{}, fmt.Errorf("%s's %s of f/k not answered in 10 s", node, op.Kind)
	}
	return call.Answer, nil
}

// lockOK runs op on node and requires it answered without a code.
func lockOK(cl *sim.Cluster, node string, op replica.LockOp) (replica.LockResult, error) {
	a, err := lockOn(cl, node, op)
	if err != nil {
		return replica.LockResult{}, err
	}
	if a.Code != "" {
		return replica.LockResult{}, fmt.Errorf("%s's %s of f/k answered %s (%s)", node, op.Kind, a.Code, a.Message)
	}
	return replica.ParseLockReply(a.Body)
}

func fk(kind string) replica.LockOp {
	return replica.LockOp{Kind: kind, Table: "f", Key: []byte("k"), TTL: 2 * time.Second}
}

// holdAndWrite acquires f/k on node, waits until the node has applied the grant's fence,
// reads f/k there, writes value under the token, has the home confirm it and releases the
// lease. It returns the grant and the version the holder read.
func holdAndWrite(cl *sim.Cluster, node, value string) (replica.LockResult, store.Record, error) {
	g, err := lockOK(cl, node, fk(replica.KindLockAcquire))
	if err != nil {
		return g, store.Record{}, err
	}
	n := cl.Node(node)
	for _, p := range g.Fence {
		for i := 0; i < 500 && n.Rep.Origin(p.Origin).AppliedSeq < p.Seq; i++ {
			cl.Run(10 * time.Millisecond)
		}
		if got := n.Rep.Origin(p.Origin).AppliedSeq; got < p.Seq {
			return g, store.Record{}, fmt.Errorf("%s applied %s through %d in 5 s, the fence is at %d", node, p.Origin, got, p.Seq)
		}
	}
	read, _, err := n.Store.Get([]byte("f"), []byte("k"))
	if err != nil {
		return g, read, err
	}
	seq, err := cl.WriteTokened(node, g.Token, []wire.Op{{Kind: wire.OpPut, Table: []byte("f"), Key: []byte("k"), Value: []byte(value)}})
	if err != nil || seq == 0 {
		return g, read, fmt.Errorf("%s's write under %s: seq %d, %v", node, g.Token, seq, err)
	}
	confirm := fk(replica.KindLockConfirm)
	confirm.Token, confirm.Origin, confirm.Seq = g.Token, originOf(cl, node), seq
	if _, err := lockOK(cl, node, confirm); err != nil {
		return g, read, err
	}
	release := fk(replica.KindLockRelease)
	release.Token = g.Token
	_, err = lockOK(cl, node, release)
	return g, read, err
}

// scenarioLockHandoff: over version 4, B publishes a map that names B the lock home and
// fences table f; A acquires f/k through B, writes 1 under its token, has it confirmed and
// releases; B acquires f/k, whose fence covers A's write, reads A's version (its token
// with it), and writes 2 under a higher token; both end holding B's version. Below version
// 4 the gate holds: the map that would turn locks on is refused cluster-not-v4 while A is
// below (nothing of it adopted); once A was upgraded (the map taken) and is back on its
// older build, every lock request and every write under a token is refused
// cluster-not-v4, on either node, nothing tokened is written, the table stays fenced, and
// plain writes converge.
func scenarioLockHandoff(t *testing.T, c matrixCell) (string, error) {
	cfg := lockMatrixConfig
	cl := sim.New(sim.Options{Seed: 6, Config: cfg})
	cl.ExpectLocks()
	must(t, cl.AddNodeBuild("A", c.a.max, c.a.newSession))
	must(t, cl.AddNodeBuild("B", 0, c.b.newSession))
	if c.aDials {
		must(t, cl.Connect("A", "B"))
	} else {
		must(t, cl.Connect("B", "A"))
	}
	cl.Run(time.Second)
	if _, err := cl.PublishMap("B", []byte(lockMembersDoc)); err != nil {
		return "", err
	}
	cl.Run(time.Second)
	if c.version >= 4 {
		return lockHandoffV4(t, cl, c)
	}
	return lockRefusedBelowV4(t, cl, c)
}

func lockHandoffV4(t *testing.T, cl *sim.Cluster, c matrixCell) (string, error) {
	if _, err := cl.PublishMap("B", []byte(lockHomesDoc)); err != nil {
		return "", fmt.Errorf("publishing the lock homes over version 4: %v", err)
	}
	cl.Run(time.Second)
	if m := cl.Node("A").Rep.ClusterMap(); m.Generation != 2 || !m.Fenced([]byte("f")) {
		return "", fmt.Errorf("A holds generation %d (f fenced: %v), want 2", m.Generation, m.Fenced([]byte("f")))
	}
	cl.Run(lockMatrixQuarantine) // B's restart quarantine as a home
	g1, _, err := holdAndWrite(cl, "A", "1")
	if err != nil {
		return "", err
	}
	a := originOf(cl, "A")
	g2, read, err := holdAndWrite(cl, "B", "2")
	if err != nil {
		return "", err
	}
	if lock.Compare(g2.Token, g1.Token) <= 0 {
		return "", fmt.Errorf("B's token %s is not above A's %s", g2.Token, g1.Token)
	}
	if !slices.ContainsFunc(g2.Fence, func(p lock.Position) bool { return p.Origin == a && p.Seq >= 1 }) {
		return "", fmt.Errorf("B's grant's fence %v does not cover A's write", g2.Fence)
	}
	if string(read.Value) != "1" || read.Token != replica.WireToken(g1.Token) {
		return "", fmt.Errorf("B's holder read %q under token %s, want A's 1 under %s", read.Value, read.Token, g1.Token)
	}
	dups, err := converged(t, cl, c, "A", "B")
	if err != nil {
		return "", err
	}
	for _, n := range []string{"A", "B"} {
		r, found, err := cl.Node(n).Store.Get([]byte("f"), []byte("k"))
		if err != nil || !found || string(r.Value) != "2" || r.Token != replica.WireToken(g2.Token) {
			return "", fmt.Errorf("%s holds f/k %q under token %s (found %v, %v), want B's 2 under %s", n, r.Value, r.Token, found, err, g2.Token)
		}
	}
	if cs := counters(cl, "A", "B"); cs.ProtocolErrors != 0 {
		return "", fmt.Errorf("%d protocol errors", cs.ProtocolErrors)
	}
	return fmt.Sprintf("v4: handed off, token %d<%d, %s", g1.Token.Counter, g2.Token.Counter, outcome(c, dups)), nil
}

// isNotV4 reports whether err is the gate's refusal.
func isNotV4(err error) bool {
	var ce *clustermap.Error
	return errors.As(err, &ce) && ce.Code == clustermap.CodeClusterNotV4
}

func lockRefusedBelowV4(t *testing.T, cl *sim.Cluster, c matrixCell) (string, error) {
	b := cl.Node("B")
	if below := b.Rep.MapStatus().MembersBelowV4; !slices.Equal(below, []string{"A"}) {
		return "", fmt.Errorf("B lists %v below version 4, want [A]", below)
	}
	// The map that would turn locks on waits for A: refused, nothing of it adopted.
	if _, err := cl.PublishMap("B", []byte(lockHomesDoc)); !isNotV4(err) {
		return "", fmt.Errorf("publishing the lock homes with A at version %d: %v, want cluster-not-v4", c.version, err)
	}
	if m := b.Rep.ClusterMap(); m.Generation != 1 || len(m.LockHomes) != 0 || len(m.FencedTables) != 0 {
		return "", fmt.Errorf("B holds generation %d, homes %v, fenced %v after the refusal", m.Generation, m.LockHomes, m.FencedTables)
	}
	// A upgraded: the map is taken. A back on its older build: the gate closes again.
	must(t, cl.Crash("A"))
	cl.Node("A").NewSession = nil
	must(t, cl.Restart("A", 0))
	cl.Run(time.Second)
	if below := b.Rep.MapStatus().MembersBelowV4; len(below) != 0 {
		return "", fmt.Errorf("B lists %v below version 4 with A upgraded", below)
	}
	if _, err := cl.PublishMap("B", []byte(lockHomesDoc)); err != nil {
		return "", fmt.Errorf("publishing the lock homes with A upgraded: %v", err)
	}
	cl.Run(time.Second)
	must(t, cl.Crash("A"))
	cl.Node("A").NewSession = c.a.newSession
	must(t, cl.Restart("A", c.a.max))
	cl.Run(lockMatrixQuarantine)
	if below := b.Rep.MapStatus().MembersBelowV4; !slices.Equal(below, []string{"A"}) {
		return "", fmt.Errorf("B lists %v below version 4 with A back at %d, want [A]", below, c.version)
	}
	if m := b.Rep.ClusterMap(); m.Generation != 2 || !m.Fenced([]byte("f")) {
		return "", fmt.Errorf("B holds generation %d (f fenced: %v), want 2, f fenced", m.Generation, m.Fenced([]byte("f")))
	}
	for _, n := range []string{"A", "B"} {
		a, err := lockOn(cl, n, fk(replica.KindLockAcquire))
		if err != nil {
			return "", err
		}
		if a.Code != replica.CodeClusterNotV4 {
			return "", fmt.Errorf("%s's acquire with A at version %d answered %q (%s), want cluster-not-v4", n, c.version, a.Code, a.Message)
		}
	}
	tok := lock.Token{Generation: 2, Incarnation: 1, Counter: 1, Home: originOf(cl, "B")}
	head := b.Rep.Origin(originOf(cl, "B")).AppliedSeq
	if seq, err := cl.WriteTokened("B", tok, []wire.Op{{Kind: wire.OpPut, Table: []byte("f"), Key: []byte("k"), Value: []byte("x")}}); !isNotV4(err) || seq != 0 {
		return "", fmt.Errorf("B's write under a token with A at version %d: seq %d, %v, want cluster-not-v4", c.version, seq, err)
	}
	if now := b.Rep.Origin(originOf(cl, "B")).AppliedSeq; now != head {
		return "", fmt.Errorf("B's log went from %d to %d on a refused write", head, now)
	}
	write(t, cl, "A", 5)
	write(t, cl, "B", 5)
	dups, err := converged(t, cl, c, "A", "B")
	if err != nil {
		return "", err
	}
	for _, n := range []string{"A", "B"} {
		if tk, err := cl.Node(n).Store.RecordToken(); err != nil || !tk.IsZero() {
			return "", fmt.Errorf("%s holds a record written under token %s (%v)", n, tk, err)
		}
	}
	return fmt.Sprintf("v%d: refused, then cluster-not-v4, %s", c.version, outcome(c, dups)), nil
}
