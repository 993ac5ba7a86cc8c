package conformance_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"plait/conformance/sim"
	"plait/protocol"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// matrixBuild is a build of the core in the version matrix.
type matrixBuild struct {
	name       string
	newSession func(protocol.Config) (replica.Session, error) // nil: the native core
	max        uint64                                         // the highest protocol version it speaks
}

// matrixCell is one row of the matrix: build a (frozen or current) against the current
// build b, a dialing b or b dialing a.
type matrixCell struct {
	a, b    matrixBuild
	aDials  bool
	version uint64 // the version they must negotiate: the highest both speak
}

// A scenario runs one cell and returns its outcome for the table, or an error when the
// cell's expectation fails. Expectations: the negotiated version is the highest both
// speak; every run converges (the same logs and records everywhere); under version 2
// nothing already applied is received again (duplicates 0), under version 1 duplicates
// are allowed and counted; every injected gap and corruption is detected by the build that
// receives it; every malformed-frame class closes the session with the class the current
// build reports.
type scenario struct {
	name string
	run  func(t *testing.T, c matrixCell) (string, error)
}

var matrixScenarios = []scenario{
	{"handshake", scenarioHandshake},
	{"stream+converge", scenarioConverge},
	{"resume", scenarioResume},
	{"relay failover", scenarioRelayFailover},
	{"credit", scenarioCredit},
	{"gap+corrupt", scenarioFaults},
	{"malformed", scenarioMalformed},
	{"retention hold", scenarioRetentionHold},
	{"purged+copy", scenarioPurgedCopy},
	{"anti-entropy", scenarioAntiEntropy},
	{"cluster map", scenarioClusterMap},
	{"placed table", scenarioPlacedTable},
	{"lock handoff", scenarioLockHandoff},
}

// TestVersionMatrix runs every frozen release and the current build (native and WASM)
// against the current build, in both roles, through the simulator's scenarios, and prints
// the matrix (make conformance shows it with -v).
func TestVersionMatrix(t *testing.T) {
	wasm := currentModule(t)
	currents := []matrixBuild{{"current native", nil, 4}, {"current wasm", wasm.NewSessionFunc(0), 4}}
	var builds []matrixBuild
	for _, r := range releases(t) {
		builds = append(builds, matrixBuild{"release " + r.Name, loadRelease(t, r).NewSessionFunc(0), r.MaxProto})
	}
	builds = append(builds, currents...)
	var table strings.Builder
	header := []string{"build", "against", "dials"}
	for _, s := range matrixScenarios {
		header = append(header, s.name)
	}
	fmt.Fprintf(&table, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	start := time.Now()
	for _, a := range builds {
		for _, b := range currents {
			for _, aDials := range []bool{true, false} {
				c := matrixCell{a: a, b: b, aDials: aDials, version: min(a.max, b.max)}
				dialer := "build"
				if !aDials {
					dialer = "against"
				}
				row := []string{a.name, b.name, dialer}
				for _, s := range matrixScenarios {
					out, err := s.run(t, c)
					if err != nil {
						t.Errorf("%s against %s, %s dials, %s: %v", a.name, b.name, dialer, s.name, err)
						out = "FAIL: " + out
					}
					row = append(row, out)
				}
				fmt.Fprintf(&table, "| %s |\n", strings.Join(row, " | "))
			}
		}
	}
	t.Logf("the version matrix (%s):\n%s", time.Since(start).Round(time.Millisecond), table.String())
}

// pairCluster is a cluster of node A (build a) and node B (build b), connected as the cell
// says.
func pairCluster(t *testing.T, c matrixCell) *sim.Cluster {
	return pairClusterOf(t, c, sim.Options{Seed: 1, Config: replica.Config{Limits: sim.SimLimits}})
}

// pairClusterOf is pairCluster with the cluster's options.
func pairClusterOf(t *testing.T, c matrixCell, opts sim.Options) *sim.Cluster {
	t.Helper()
	cl := sim.New(opts)
	must(t, cl.AddNodeBuild("A", 0, c.a.newSession))
	must(t, cl.AddNodeBuild("B", 0, c.b.newSession))
	if c.aDials {
		must(t, cl.Connect("A", "B"))
	} else {
		must(t, cl.Connect("B", "A"))
	}
	return cl
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// peer is node's status of its connection to peer.
func peer(cl *sim.Cluster, node, name string) (replica.PeerStatus, bool) {
	for _, p := range cl.Node(node).Rep.Status(cl.Now()).Peers {
		if p.Name == name {
			return p, true
		}
	}
	return replica.PeerStatus{}, false
}

// counters sums the replica counters of the named nodes.
func counters(cl *sim.Cluster, nodes ...string) replica.Counters {
	var sum replica.Counters
	for _, n := range nodes {
		c := cl.Node(n).Rep.Status(cl.Now()).Counters
		sum.TxnsApplied += c.TxnsApplied
		sum.DuplicatesReceived += c.DuplicatesReceived
		sum.GapsDetected += c.GapsDetected
		sum.ResendsRequested += c.ResendsRequested
		sum.ProtocolErrors += c.ProtocolErrors
		sum.Divergences += c.Divergences
		sum.PurgedAnswers += c.PurgedAnswers
		sum.EntriesPurged += c.EntriesPurged
		sum.CopiesStarted += c.CopiesStarted
		sum.CopiesCompleted += c.CopiesCompleted
	}
	return sum
}

// write puts n records on node, keys shared among nodes so that writers collide.
func write(t *testing.T, cl *sim.Cluster, node string, n int) {
	t.Helper()
	for i := range n {
		_, err := cl.Write(node, []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: fmt.Appendf(nil, "k%d", i%7),
			Value: fmt.Appendf(nil, "%s-%d-%d", node, i, cl.Now().UnixNano())}})
		must(t, err)
		cl.Run(10 * time.Millisecond)
	}
}

// converged stabilizes the cluster and checks the end state and the invariants; it
// returns the duplicates received, which must be 0 where every connection speaks 2.
func converged(t *testing.T, cl *sim.Cluster, c matrixCell, nodes ...string) (uint64, error) {
	if !cl.Stabilize(60 * time.Second) {
		_, why := cl.Converged()
		return 0, fmt.Errorf("did not converge: %s", why)
	}
	cl.CheckConverged()
	if f := cl.Failures(); len(f) > 0 {
		return 0, fmt.Errorf("invariants: %v", f)
	}
	dups := counters(cl, nodes...).DuplicatesReceived
	if c.version >= 2 && dups != 0 {
		return dups, fmt.Errorf("%d duplicates received over version 2", dups)
	}
	return dups, nil
}

func outcome(c matrixCell, dups uint64) string {
	if c.version >= 2 {
		return fmt.Sprintf("v%d, dup 0", c.version)
	}
	return fmt.Sprintf("v%d, dup %d", c.version, dups)
}

func scenarioHandshake(t *testing.T, c matrixCell) (string, error) {
	cl := pairCluster(t, c)
	cl.Run(2 * time.Second)
	for _, side := range [][2]string{{"A", "B"}, {"B", "A"}} {
		p, ok := peer(cl, side[0], side[1])
		if !ok || p.State != "streaming" || p.Version != c.version {
			return fmt.Sprintf("%+v", p), fmt.Errorf("%s's connection to %s: state %q version %d, want streaming at %d", side[0], side[1], p.State, p.Version, c.version)
		}
	}
	return fmt.Sprintf("v%d", c.version), nil
}

func scenarioConverge(t *testing.T, c matrixCell) (string, error) {
	cl := pairCluster(t, c)
	for range 3 {
		write(t, cl, "A", 10)
		write(t, cl, "B", 10)
	}
	dups, err := converged(t, cl, c, "A", "B")
	return outcome(c, dups), err
}

func scenarioResume(t *testing.T, c matrixCell) (string, error) {
	cl := pairCluster(t, c)
	write(t, cl, "A", 10)
	write(t, cl, "B", 10)
	if _, err := converged(t, cl, c, "A", "B"); err != nil {
		return "", err
	}
	must(t, cl.SetLink("A", "B", false)) // a partition: the connection drops, both write on
	write(t, cl, "A", 15)
	write(t, cl, "B", 15)
	cl.Run(time.Second)
	must(t, cl.SetLink("A", "B", true))
	dups, err := converged(t, cl, c, "A", "B")
	return outcome(c, dups), err
}

// writeThroughCut: A and B write and converge, are cut apart for 5 s while both write on,
// and are joined again (the prelude of the retention scenarios).
func writeThroughCut(t *testing.T, cl *sim.Cluster) error {
	write(t, cl, "A", 5)
	write(t, cl, "B", 5)
	if !cl.Stabilize(30 * time.Second) {
		return fmt.Errorf("did not converge before the cut")
	}
	must(t, cl.SetLink("A", "B", false))
	for range 10 {
		write(t, cl, "A", 1)
		write(t, cl, "B", 1)
		cl.Run(500 * time.Millisecond)
	}
	must(t, cl.SetLink("A", "B", true))
	return nil
}

// scenarioPurgedCopy: B (the current build) keeps one second of history, with holds that
// lapse after 2 s, and so does A when it is a current build (a frozen release's node
// purged nothing: it keeps the defaults). They are cut apart for 5 s while both write,
// so B purges its own log past A's position (and a current A past B's). Joined again,
// over version 3 A is answered below B's floor and takes a base copy of B (and B of a
// current A), and they converge with nothing received twice and every write kept (the
// simulator's oracle); over versions 1 and 2, which cannot copy, B closes the
// connection with purged (class unsupported), the release's session reports that code,
// and nothing is copied.
func scenarioPurgedCopy(t *testing.T, c matrixCell) (string, error) {
	retaining := map[string]bool{"A": c.a.max >= 3, "B": true}
	cl := pairClusterOf(t, c, sim.Options{Seed: 3,
		Retaining: retaining, Config: replica.Config{Limits: sim.SimLimits, RetainAge: time.Second, RetainHold: 2 * time.Second, CopyChunk: 1024}})
	if err := writeThroughCut(t, cl); err != nil {
		return "", err
	}
	ka, kb := counters(cl, "A"), counters(cl, "B")
	if kb.EntriesPurged == 0 || retaining["A"] != (ka.EntriesPurged > 0) {
		return "", fmt.Errorf("retention purged %d entries on A and %d on B while they were apart", ka.EntriesPurged, kb.EntriesPurged)
	}
	if c.version >= 3 {
		dups, err := converged(t, cl, c, "A", "B")
		if err != nil {
			return "", err
		}
		ka, kb = counters(cl, "A"), counters(cl, "B")
		if ka.CopiesCompleted == 0 || retaining["A"] != (kb.CopiesCompleted > 0) {
			return "", fmt.Errorf("copies completed: A %d, B %d; A was below B's floor (and B below a current A's)", ka.CopiesCompleted, kb.CopiesCompleted)
		}
		return fmt.Sprintf("copies A %d B %d, %s", ka.CopiesCompleted, kb.CopiesCompleted, outcome(c, dups)), nil
	}
	cl.Run(2 * time.Second)
	if f := cl.Failures(); len(f) > 0 {
		return "", fmt.Errorf("invariants: %v", f)
	}
	ka, kb = counters(cl, "A"), counters(cl, "B")
	if e := cl.Node("A").Rep.LastError("B"); e == nil || e.Err == nil || e.Err.Code != wire.CodePurged || e.Err.Class != wire.ClassUnsupported {
		return "", fmt.Errorf("A's last error with B is %+v, want purged (unsupported)", e)
	}
	if kb.PurgedAnswers == 0 || ka.CopiesStarted+kb.CopiesStarted != 0 {
		return "", fmt.Errorf("purged answers A %d B %d, copies started A %d B %d: want answers and no copy over version %d",
			ka.PurgedAnswers, kb.PurgedAnswers, ka.CopiesStarted, kb.CopiesStarted, c.version)
	}
	return fmt.Sprintf("v%d: purged, no copy", c.version), nil
}

// scenarioRetentionHold: B (the current build) keeps one second of history with holds of
// 30 s, and so does A when it is a current build. They are cut apart for 5 s while both
// write: each keeps what the other has not acknowledged, since the other fell silent less
// than a hold ago, so joined again they resume from their cursors at every version, with no
// purged answer and no copy; once caught up, the acknowledged entries are purged.
func scenarioRetentionHold(t *testing.T, c matrixCell) (string, error) {
	retaining := map[string]bool{"A": c.a.max >= 3, "B": true}
	cl := pairClusterOf(t, c, sim.Options{Seed: 4,
		Retaining: retaining, Config: replica.Config{Limits: sim.SimLimits, RetainAge: time.Second, RetainHold: 30 * time.Second}})
	if err := writeThroughCut(t, cl); err != nil {
		return "", err
	}
	dups, err := converged(t, cl, c, "A", "B")
	if err != nil {
		return "", err
	}
	cl.Run(3 * time.Second) // the acknowledgements, then a retention step
	k := counters(cl, "A", "B")
	if k.PurgedAnswers != 0 || k.CopiesStarted != 0 {
		return "", fmt.Errorf("%d purged answers and %d copies within the hold", k.PurgedAnswers, k.CopiesStarted)
	}
	kb := counters(cl, "B")
	if kb.EntriesPurged == 0 {
		return "", fmt.Errorf("B purged nothing once A had caught up")
	}
	if f := cl.Failures(); len(f) > 0 {
		return "", fmt.Errorf("invariants: %v", f)
	}
	return fmt.Sprintf("held, B purged %d after, %s", kb.EntriesPurged, outcome(c, dups)), nil
}

// scenarioAntiEntropy: A and B run anti-entropy passes every 100 ms. Over version 3 (both
// offer the capability anti-entropy) a record lost from A's store and one altered in B's
// are repaired from the other, and every record ends the same on both. Below version 3
// neither side can ask a range: no range is compared, and the session stays up.
func scenarioAntiEntropy(t *testing.T, c matrixCell) (string, error) {
	cl := pairClusterOf(t, c, sim.Options{Seed: 5, Config: replica.Config{Limits: sim.SimLimits, AntiEntropyInterval: 100 * time.Millisecond}})
	write(t, cl, "A", 10)
	write(t, cl, "B", 10)
	if _, err := converged(t, cl, c, "A", "B"); err != nil {
		return "", err
	}
	cl.Run(2 * time.Second)
	compared := func(n string) uint64 { return cl.Node(n).Rep.Counters().AntiEntropyRangesCompared }
	if c.version < 3 {
		if a, b := compared("A"), compared("B"); a != 0 || b != 0 {
			return "", fmt.Errorf("ranges compared over version %d: A %d, B %d", c.version, a, b)
		}
		if _, err := converged(t, cl, c, "A", "B"); err != nil {
			return "", err
		}
		return fmt.Sprintf("v%d: none asked", c.version), nil
	}
	if compared("A") == 0 || compared("B") == 0 {
		return "", fmt.Errorf("no range compared over version 3: A %d, B %d", compared("A"), compared("B"))
	}
	cl.Node("A").Store.Corrupt([]byte("t"), []byte("k1"), nil)
	r, ok, err := cl.Node("B").Store.Get([]byte("t"), []byte("k2"))
	if err != nil || !ok {
		return "", fmt.Errorf("B holds no t/k2 (%v)", err)
	}
	cl.Node("B").Store.Corrupt([]byte("t"), []byte("k2"), &store.Record{Value: []byte("rot"), HLC: r.HLC, Origin: r.Origin})
	repaired := func() uint64 {
		return cl.Node("A").Rep.Counters().AntiEntropyRecordsRepaired + cl.Node("B").Rep.Counters().AntiEntropyRecordsRepaired
	}
	for i := 0; i < 300 && repaired() < 2; i++ {
		cl.Run(100 * time.Millisecond)
	}
	if n := repaired(); n < 2 {
		return "", fmt.Errorf("%d records repaired in 30 s, want 2", n)
	}
	cl.CheckConverged() // the records too, versions included
	if f := cl.Failures(); len(f) > 0 {
		return "", fmt.Errorf("invariants: %v", f)
	}
	return fmt.Sprintf("repaired %d", repaired()), nil
}

// scenarioClusterMap: B (a current build) publishes a map listing A and B. Over version 4 A
// adopts it, neither lists the other below version 4, and A's request for B's map is
// answered. Below version 4 nothing of it reaches A (a build that never sees version-4
// frames), B lists A below version 4 from A's handshake, A's request has no route, and
// the connection stays up with no protocol error either way.
func scenarioClusterMap(t *testing.T, c matrixCell) (string, error) {
	cl := pairCluster(t, c)
	cl.Run(time.Second)
	if _, err := cl.PublishMap("B", []byte(`{"generation":1,"nodes":[{"name":"A"},{"name":"B"}]}`)); err != nil {
		return "", err
	}
	must(t, cl.Ask("A", "B"))
	cl.Run(time.Second)
	a, b := cl.Node("A").Rep.MapStatus(), cl.Node("B").Rep.MapStatus()
	if cs := counters(cl, "A", "B"); cs.ProtocolErrors != 0 {
		return "", fmt.Errorf("%d protocol errors", cs.ProtocolErrors)
	}
	if c.version >= 4 {
		if a.Generation != 1 || len(a.MembersBelowV4) != 0 || len(b.MembersBelowV4) != 0 {
			return "", fmt.Errorf("over version 4: A holds generation %d, below version 4 at A %v, at B %v", a.Generation, a.MembersBelowV4, b.MembersBelowV4)
		}
		if served := cl.Node("B").Rep.Counters().RequestsServed; served != 1 {
			return "", fmt.Errorf("B served %d requests, want A's", served)
		}
		return "v4: adopted, asked", nil
	}
	if a.Generation != 0 || !slices.Equal(b.MembersBelowV4, []string{"A"}) {
		return "", fmt.Errorf("over version %d: A holds generation %d, B lists %v below version 4 (want [A])", c.version, a.Generation, b.MembersBelowV4)
	}
	if refused := cl.Node("A").Rep.Counters().RequestsRefused; refused != 1 {
		return "", fmt.Errorf("A's request over version %d: %d refused, want 1 (no route)", c.version, refused)
	}
	return fmt.Sprintf("v%d: not sent, A below", c.version), nil
}

// scenarioPlacedTable: B (the current build) holds a map that places table t on A alone; A
// (the build under test) writes t and u. Over version 4 B is sent runs for t's entries
// (SKIP) and whole entries for u's; below it, an older A knows no placement and sends every
// entry whole. Either way B stores no record of t and every record of u, and its position
// in A's log is A's head.
func scenarioPlacedTable(t *testing.T, c matrixCell) (string, error) {
	cl := pairCluster(t, c)
	cl.Run(time.Second)
	if _, err := cl.PublishMap("B", []byte(`{"generation":1,"nodes":[{"name":"A"},{"name":"B"}],"placement":{"t":["A"]}}`)); err != nil {
		return "", err
	}
	cl.Run(time.Second)
	for i := range 12 {
		table := "t"
		if i%3 == 2 {
			table = "u"
		}
		_, err := cl.Write("A", []wire.Op{{Kind: wire.OpPut, Table: []byte(table), Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}})
		must(t, err)
		cl.Run(10 * time.Millisecond)
	}
	if !cl.Stabilize(30 * time.Second) {
		_, why := cl.Converged()
		return "", fmt.Errorf("did not converge: %s", why)
	}
	b := cl.Node("B")
	count := func(table string) int {
		n := 0
		_ = b.Store.Scan([]byte(table), nil, func(store.Record) bool { n++; return true })
		return n
	}
	if n := count("t"); n != 0 {
		return "", fmt.Errorf("B holds %d records of t, placed on A alone", n)
	}
	if n := count("u"); n != 4 {
		return "", fmt.Errorf("B holds %d records of u, want 4", n)
	}
	skips := b.Rep.Counters().SkipsReceived
	if cs := counters(cl, "A", "B"); cs.ProtocolErrors != 0 {
		return "", fmt.Errorf("%d protocol errors", cs.ProtocolErrors)
	}
	if c.version >= 4 {
		if skips == 0 {
			return "", fmt.Errorf("over version 4 B took no run of t")
		}
		return fmt.Sprintf("v4: %d runs, t not stored", skips), nil
	}
	if skips != 0 {
		return "", fmt.Errorf("over version %d B took %d runs", c.version, skips)
	}
	return fmt.Sprintf("v%d: whole, t not stored", c.version), nil
}

// scenarioRelayFailover: A (the build under test) is the origin; two relays R1 and R2 (the
// current build b) both carry it to C (b), which takes A through one of them. That relay
// crashes while A writes on: C's channel of A moves to the other relay. C's own
// connections speak b's version, so C receives nothing twice even when A speaks 1 only.
func scenarioRelayFailover(t *testing.T, c matrixCell) (string, error) {
	cl := sim.New(sim.Options{Seed: 2, Config: replica.Config{Limits: sim.SimLimits}})
	must(t, cl.AddNodeBuild("A", 0, c.a.newSession))
	for _, n := range []string{"R1", "R2", "C"} {
		must(t, cl.AddNodeBuild(n, 0, c.b.newSession))
	}
	for _, r := range []string{"R1", "R2"} {
		if c.aDials {
			must(t, cl.Connect("A", r))
		} else {
			must(t, cl.Connect(r, "A"))
		}
		must(t, cl.Connect("C", r))
	}
	write(t, cl, "A", 20)
	if !cl.Stabilize(30 * time.Second) {
		return "", fmt.Errorf("did not converge before the failover")
	}
	src := cl.Node("C").Rep.Origin(originOf(cl, "A")).SourcePeer
	if src != "R1" && src != "R2" {
		return "", fmt.Errorf("C takes A from %q, not a relay", src)
	}
	before := counters(cl, "C").DuplicatesReceived
	must(t, cl.Crash(src))
	write(t, cl, "A", 20)
	if !cl.Stabilize(30 * time.Second) {
		_, why := cl.Converged()
		return "", fmt.Errorf("did not converge after %s crashed: %s", src, why)
	}
	after := cl.Node("C").Rep.Origin(originOf(cl, "A"))
	if after.SourcePeer == src || after.SourcePeer == "" {
		return "", fmt.Errorf("C still takes A from %q", after.SourcePeer)
	}
	if f := cl.Failures(); len(f) > 0 {
		return "", fmt.Errorf("invariants: %v", f)
	}
	if d := counters(cl, "C").DuplicatesReceived - before; d != 0 {
		return "", fmt.Errorf("C received %d duplicates in the failover", d)
	}
	return fmt.Sprintf("%s -> %s, dup 0", src, after.SourcePeer), nil
}

func originOf(cl *sim.Cluster, name string) wire.OriginID {
	id, _ := cl.Node(name).Store.Identity()
	return id.Origin
}

// scenarioCredit: B holds back while A writes far more than the windows (sim.SimLimits:
// 4 KiB per version-2 channel, 16 KiB per connection, 4 KiB unacknowledged under version
// 1), so the stream runs out of credit (or window) again and again and recovers each time.
func scenarioCredit(t *testing.T, c matrixCell) (string, error) {
	cl := pairCluster(t, c)
	must(t, cl.SetLink("A", "B", false))
	written := 0
	for i := range 120 {
		ops := make([]wire.Op, 4)
		for j := range ops {
			ops[j] = wire.Op{Kind: wire.OpPut, Table: []byte("t"), Key: fmt.Appendf(nil, "c%d-%d", i, j), Value: make([]byte, 200)}
			written += 200
		}
		_, err := cl.Write("A", ops)
		must(t, err)
	}
	must(t, cl.SetLink("A", "B", true))
	dups, err := converged(t, cl, c, "A", "B")
	if written < 4*sim.SimLimits.MaxSessionBuffer {
		return "", fmt.Errorf("only %d bytes written: not beyond the windows", written)
	}
	return fmt.Sprintf("%d KiB through 4 KiB windows, %s", written>>10, outcome(c, dups)), err
}

// scenarioFaults: a faulty link drops one entry, then corrupts one, each way. The
// receiving build, whichever it is, detects both (a gap, a divergence), never applies the
// corrupt entry, and the pair converges. Version 1 is held to the gap (see below).
func scenarioFaults(t *testing.T, c matrixCell) (string, error) {
	cl := pairCluster(t, c)
	write(t, cl, "A", 3)
	write(t, cl, "B", 3)
	if !cl.Stabilize(30 * time.Second) {
		return "", fmt.Errorf("did not converge before the faults")
	}
	var outs []string
	for _, dir := range [][2]string{{"B", "A"}, {"A", "B"}} { // first into the build under test
		from, to := dir[0], dir[1]
		found := map[sim.FaultKind]uint64{}
		kinds := []sim.FaultKind{sim.Drop, sim.Corrupt}
		if c.version < 2 {
			// A version-1 TXN1 frame carries no chain hash of its own: a corrupted entry
			// that still parses is found only at the next entry, after it was applied. The
			// simulator corrupts version-2 entries only; version 1 is held to gaps.
			kinds = kinds[:1]
		}
		for _, kind := range kinds {
			before, injected := counters(cl, to), cl.Faults().Injected
			must(t, cl.Inject(from, to, kind))
			write(t, cl, from, 4)
			if !cl.Stabilize(60 * time.Second) {
				_, why := cl.Converged()
				return "", fmt.Errorf("%s->%s %s: did not converge: %s", from, to, kind, why)
			}
			after := cl.Faults()
			if after.Injected != injected+1 {
				return "", fmt.Errorf("%s->%s %s: the fault hit %d entries", from, to, kind, after.Injected-injected)
			}
			c := counters(cl, to)
			if kind == sim.Drop {
				found[kind] = c.GapsDetected - before.GapsDetected
			} else {
				found[kind] = c.Divergences - before.Divergences
			}
			if found[kind] == 0 {
				return "", fmt.Errorf("%s->%s %s: %s counted nothing (counters %+v, before %+v; faults %+v)", from, to, kind, to, c, before, after)
			}
		}
		if c.version < 2 {
			outs = append(outs, fmt.Sprintf("%s: gap %d", to, found[sim.Drop]))
			continue
		}
		outs = append(outs, fmt.Sprintf("%s: gap %d div %d", to, found[sim.Drop], found[sim.Corrupt]))
	}
	cl.CheckConverged()
	if f := cl.Failures(); len(f) > 0 {
		return "", fmt.Errorf("invariants: %v", f)
	}
	return strings.Join(outs, "; "), nil
}

// malformed is one class of malformed input, as the message a peer sends once the
// handshake is done; data is the version's data frame type.
var malformed = []struct {
	class string
	msg   func(data wire.Type, channel uint32) []byte
}{
	{"truncated header", func(wire.Type, uint32) []byte { return []byte{byte(wire.TypePing), 0, 0, 0, 0} }},
	{"length past the message", func(wire.Type, uint32) []byte {
		return append(wire.AppendHeader(nil, wire.Header{Type: wire.TypePing, Length: 100}), 1, 2)
	}},
	{"oversized frame", func(wire.Type, uint32) []byte {
		return wire.AppendHeader(nil, wire.Header{Type: wire.TypePing, Length: wire.MaxFrameBody + 1})
	}},
	{"unknown required type", func(wire.Type, uint32) []byte { return wire.AppendHeader(nil, wire.Header{Type: 0x7e}) }},
	{"bad control body", func(wire.Type, uint32) []byte {
		return append(wire.AppendHeader(nil, wire.Header{Type: wire.TypePing, Length: 1}), 0xff)
	}},
	{"bad transaction", func(data wire.Type, channel uint32) []byte {
		body := make([]byte, 48) // room for a position or a chain hash, then no transaction
		body[40] = 0xde
		return append(wire.AppendHeader(nil, wire.Header{Type: data, Channel: channel, Length: uint32(len(body))}), body...)
	}},
	{"HELLO again", func(wire.Type, uint32) []byte {
		return append(wire.AppendHeader(nil, wire.Header{Type: wire.TypeHello, Length: 1}), 0xa0)
	}},
}

// established returns a session of newSession (nil: native) and a native peer that speaks
// versions up to version, through their handshake, the first dialing when dials.
func established(t *testing.T, newSession func(protocol.Config) (replica.Session, error), dials bool, version uint64) (replica.Session, replica.Session, time.Time) {
	t.Helper()
	if newSession == nil {
		newSession = replica.NativeSession
	}
	role := wire.RoleListener
	if dials {
		role = wire.RoleDialer
	}
	secret := []byte("matrix secret")
	s, err := newSession(protocol.Config{Role: role, Name: "A", Origin: wire.OriginID{1, 15: 1}, Secret: secret})
	must(t, err)
	p, err := replica.NativeSession(protocol.Config{Role: 1 - role, Name: "B", Origin: wire.OriginID{2, 15: 2}, Secret: secret, MaxVersion: version})
	must(t, err)
	now := sim.Epoch
	must(t, s.Start(now, make([]byte, 16)))
	must(t, p.Start(now, append(make([]byte, 15), 1)))
	for range 20 {
		now = now.Add(time.Millisecond)
		for _, pair := range [][2]replica.Session{{s, p}, {p, s}} {
			for _, m := range pair[0].Ready().Messages {
				must(t, pair[1].Receive(now, m))
			}
		}
	}
	if s.State() != protocol.StateEstablished || p.State() != protocol.StateEstablished {
		t.Fatalf("no handshake: %v / %v (%v, %v)", s.State(), p.State(), s.Err(), p.Err())
	}
	return s, p, now
}

// scenarioMalformed: each class of malformed input closes the build's session with the
// code and class the current native build gives for the same bytes at the same version,
// and the peer is told (a CLOSE with that code).
func scenarioMalformed(t *testing.T, c matrixCell) (string, error) {
	for _, m := range malformed {
		got, gotPeer := closeOn(t, c.a.newSession, c.aDials, c.version, m.msg)
		want, _ := closeOn(t, nil, c.aDials, c.version, m.msg)
		if got == nil || want == nil || got.Code != want.Code || got.Class != want.Class {
			return "", fmt.Errorf("%s: closed with %v, the current build with %v", m.class, got, want)
		}
		if gotPeer == nil || gotPeer.Code != got.Code {
			return "", fmt.Errorf("%s: the peer was told %v, want %s", m.class, gotPeer, got.Code)
		}
	}
	return fmt.Sprintf("%d classes as current", len(malformed)), nil
}

// closeOn establishes a session of newSession with a native peer and has it receive the
// malformed message; it returns the session's error and the error the peer was told.
func closeOn(t *testing.T, newSession func(protocol.Config) (replica.Session, error), dials bool, version uint64, msg func(wire.Type, uint32) []byte) (*wire.Error, *wire.Error) {
	s, p, now := established(t, newSession, dials, version)
	if v := s.Handshake().Version; v != version {
		t.Fatalf("negotiated %d, want %d", v, version)
	}
	data, channel := wire.TypeTxn1, uint32(0)
	if version >= 2 {
		data, channel = wire.TypeData, 1
	}
	_ = s.Receive(now, msg(data, channel))
	var told *wire.Error
	for _, m := range s.Ready().Messages {
		_ = p.Receive(now, m)
	}
	for _, e := range p.Ready().Events {
		if e.Kind == protocol.EventClosed && e.ByPeer {
			told = e.Err
		}
	}
	return s.Err(), told
}
