//go:build multiprocess || scale

package multiprocess

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"plait/internal/certs"
	"plait/internal/cluster"
	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
	"plait/shells/native/httpapi"
)

// advEnv is the cluster the adversarial tests run against: N, the node under attack,
// serving wss:// with mutual TLS and ws:// beside it; M, a plaintext node whose connection
// window is one channel's; and G, a good peer that dials N over wss:// and M over ws://, and
// writes to table t. Every adversary but one dials N.
type advEnv struct {
	t                *testing.T
	n, m, g          *proc
	certDir          string
	gOrigin, nOrigin wire.OriginID     // G's and N's origin ids
	gKeys            int               // the keys G wrote to table t
	redials          map[string]uint64 // G's redials of N and M when the scenario began
}

// advWindow is the window of N's channels and of M's channels and connections: the least a
// node accepts, one largest frame (16 MiB + 10), so that one message (16 MiB + 64 KiB at
// most) can pass it.
const advWindow = wire.MaxFrameBody + wire.HeaderSize

// sendQueue is N's --send-queue: past it, a peer that does not read is closed.
const sendQueue = 4 << 20

// advCertNames are the nodes that get a certificate: N, G and the adversaries over TLS.
var advCertNames = []string{"N", "G", "ADV-CREDIT", "ADV-NAME", "ADV-STALL", "ADV-IMPOSTOR"}

func newAdvEnv(t *testing.T) *advEnv {
	t.Helper()
	e := &advEnv{t: t, certDir: t.TempDir()}
	o := certs.Options{Dir: e.certDir}
	if err := certs.NewCA(o); err != nil {
		t.Fatal(err)
	}
	for _, name := range advCertNames {
		if err := certs.NewNode(o, name, []string{"127.0.0.1"}); err != nil {
			t.Fatal(err)
		}
	}
	window := strconv.Itoa(advWindow)
	e.n = serve(t, "N", append(e.tlsFlags("N"), "--tls-accept-plaintext", "--channel-window", window, "--send-queue", strconv.Itoa(sendQueue))...)
	e.m = serve(t, "M", "--channel-window", window, "--session-window", window)
	e.g = serve(t, "G", append(e.tlsFlags("G"), "--tls-accept-plaintext", "--peer", "N="+wss(e.n), "--peer", e.m.PeerFlag())...)
	waitFor(t, "G streaming to N and M", 30*time.Second, func() bool {
		return e.n.connected("G") && e.g.connected("N") && e.m.connected("G") && e.g.connected("M")
	})
	e.nOrigin = e.originID(e.n, "N")
	e.goodWrite() // G's origin is known to N from here
	e.gOrigin = e.originID(e.n, "G")
	return e
}

// tlsFlags are plait serve's TLS flags for the node name.
func (e *advEnv) tlsFlags(name string) []string {
	return []string{"--tls-cert", filepath.Join(e.certDir, name+".crt"), "--tls-key", filepath.Join(e.certDir, name+".key"),
		"--tls-ca", filepath.Join(e.certDir, "ca.crt")}
}

// clientTLS is the TLS configuration of a dialer holding name's certificate.
func (e *advEnv) clientTLS(name string) *tls.Config {
	e.t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(e.certDir, name+".crt"), filepath.Join(e.certDir, name+".key"))
	if err != nil {
		e.t.Fatal(err)
	}
	// The node is dialed by address: the test checks who answers through the handshake's
	// MAC (N's name is expected), not through the listener's certificate.
	return &tls.Config{Certificates: []tls.Certificate{pair}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
}

// wss is the node's replication endpoint over TLS.
func wss(p *proc) string { return "wss://" + strings.TrimPrefix(p.URL, "ws://") }

// originID is the origin id p's status gives the origin named name.
func (e *advEnv) originID(p *proc, name string) wire.OriginID {
	e.t.Helper()
	o, ok := p.status().Origin(name)
	if !ok {
		e.t.Fatalf("%s has no origin named %s", p.Name, name)
	}
	b, err := hex.DecodeString(o.Origin)
	if err != nil || len(b) != len(wire.OriginID{}) {
		e.t.Fatalf("origin id %q: %v", o.Origin, err)
	}
	return wire.OriginID(b)
}

// named makes name one of p's peers (POST /v1/peers, at an address nobody listens on), so
// that p's status keeps that peer's last error once its connection is gone.
func (e *advEnv) named(p *proc, name string) {
	e.t.Helper()
	body := fmt.Sprintf(`{"name":%q,"url":"ws://127.0.0.1:1"}`, name)
	resp, err := http.Post("http://"+p.HTTP+"/v1/peers", "application/json", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		e.t.Fatalf("adding peer %s to %s: %s", name, p.Name, resp.Status)
	}
}

// goodWrite writes one key on G and waits until N and M applied it: G streams to both.
func (e *advEnv) goodWrite() {
	e.t.Helper()
	e.gKeys++
	e.g.put("t", fmt.Sprintf("g%05d", e.gKeys), "good")
	e.caughtUp()
}

// caughtUp waits until N and M applied everything G wrote.
func (e *advEnv) caughtUp() {
	e.t.Helper()
	seq := e.g.origin("G").AppliedSeq
	waitFor(e.t, "G's writes up to "+strconv.FormatUint(seq, 10)+" on N and M", 20*time.Second, func() bool {
		return e.n.origin("G").AppliedSeq >= seq && e.m.origin("G").AppliedSeq >= seq
	})
}

// closeCounts is what a node counts of connections that ended in an error.
type closeCounts struct {
	errors, refused map[string]float64 // the metrics, by code
	connErrors      uint64             // counters.connection_errors
	connRefused     uint64             // counters.connections_refused
}

// closeCounts reads p's counts: the two labelled metrics and the two counters.
func (e *advEnv) closeCounts(p *proc) closeCounts {
	e.t.Helper()
	c := closeCounts{errors: map[string]float64{}, refused: map[string]float64{}}
	resp, err := http.Get("http://" + p.HTTP + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for prefix, m := range map[string]map[string]float64{
			`plait_connection_errors_total{code="`:   c.errors,
			`plait_connections_refused_total{code="`: c.refused} {
			rest, ok := strings.CutPrefix(line, prefix)
			if !ok {
				continue
			}
			code, value, ok := strings.Cut(rest, `"} `)
			if !ok {
				e.t.Fatalf("metrics line %q", line)
			}
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				e.t.Fatalf("metrics line %q: %v", line, err)
			}
			m[code] = v
		}
	}
	if err := sc.Err(); err != nil {
		e.t.Fatal(err)
	}
	st := p.status()
	c.connErrors, c.connRefused = st.Counters.ConnectionErrors, st.Counters.ConnectionsRefused
	return c
}

// expectCounted waits until p counted one more connection of code since before, as a
// connection error (refused false) or a refusal, and checks that nothing else moved: no
// other code, and the other kind not at all (G's connection did not fail).
func (e *advEnv) expectCounted(p *proc, before closeCounts, refused bool, code wire.Code) {
	e.t.Helper()
	now := e.awaitCounted(p, before, refused, code)
	want := closeCounts{errors: copyCounts(before.errors), refused: copyCounts(before.refused),
		connErrors: before.connErrors, connRefused: before.connRefused}
	if refused {
		want.refused[string(code)]++
		want.connRefused++
	} else {
		want.errors[string(code)]++
		want.connErrors++
	}
	if got, w := fmt.Sprint(now), fmt.Sprint(want); got != w {
		e.t.Errorf("%s's counts of failed connections:\n got %s\nwant %s", p.Name, got, w)
	}
}

// awaitCounted waits until p counted more connections of code since before, and returns
// its counts.
func (e *advEnv) awaitCounted(p *proc, before closeCounts, refused bool, code wire.Code) closeCounts {
	e.t.Helper()
	var now closeCounts
	waitFor(e.t, p.Name+" counting "+string(code), 10*time.Second, func() bool {
		now = e.closeCounts(p)
		if refused {
			return now.refused[string(code)] > before.refused[string(code)]
		}
		return now.errors[string(code)] > before.errors[string(code)]
	})
	return now
}

func copyCounts(m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// expectNothingCounted checks that no connection to p ended in an error since before.
func (e *advEnv) expectNothingCounted(p *proc, before closeCounts) {
	e.t.Helper()
	if got, w := fmt.Sprint(e.closeCounts(p)), fmt.Sprint(before); got != w {
		e.t.Errorf("%s counted failed connections:\n got %s\nwant %s", p.Name, got, w)
	}
}

// lastError is p's status of its peer name's last error (nil: none).
func (e *advEnv) lastError(p *proc, name string) *wire.Error {
	e.t.Helper()
	for _, d := range p.status().Peers {
		if d.Name == name && d.LastError != nil {
			return &wire.Error{Code: wire.Code(d.LastError.Code), Message: d.LastError.Message}
		}
	}
	return nil
}

// expectLastError checks p's status of the named adversary's last error.
func (e *advEnv) expectLastError(p *proc, name string, code wire.Code) {
	e.t.Helper()
	if got := e.lastError(p, name); got == nil || got.Code != code {
		e.t.Errorf("%s's last error of peer %s: %v, want %s", p.Name, name, got, code)
	}
}

// unharmed checks what every scenario leaves as it was, on N and M: both serve (/healthz
// 200); G's connections to them are the ones it had when the scenario began, and a write on
// G arrives at both; their table t holds G's keys and nothing else (the same digest as G's); and N
// and M applied of each adversary origin exactly the seq given (what a conforming peer
// could have written, relayed to M through G).
func (e *advEnv) unharmed(applied map[wire.OriginID]uint64) {
	e.t.Helper()
	for _, p := range []*proc{e.n, e.m} {
		if code, body := p.get("/healthz"); code != 200 {
			e.t.Fatalf("%s's /healthz: %d %s", p.Name, code, body)
		}
	}
	e.goodWrite()
	for _, peer := range []string{"N", "M"} {
		if r := e.g.peerReconnects(peer) - e.redials[peer]; r != 0 {
			e.t.Errorf("G redialed %s %d times: its connection did not survive", peer, r)
		}
	}
	dg := e.g.digest("t")
	for _, p := range []*proc{e.n, e.m} {
		dp := p.digest("t")
		var d struct{ Count int }
		if err := json.Unmarshal([]byte(dp), &d); err != nil {
			e.t.Fatalf("%s's digest %q: %v", p.Name, dp, err)
		}
		if dp != dg || d.Count != e.gKeys {
			e.t.Errorf("table t: %s's digest %s, G's %s; want G's %d keys on both", p.Name, dp, dg, e.gKeys)
		}
	}
	for o, seq := range applied {
		for _, p := range []*proc{e.n, e.m} {
			var got uint64
			if err := cluster.WaitFor("", 10*time.Second, func() bool { got = e.originByID(p, o).AppliedSeq; return got == seq }); err != nil {
				e.t.Errorf("%s applied origin %s up to %d, want %d", p.Name, o, got, seq)
			}
		}
	}
}

// originByID is p's status of the origin with id o (the zero value when p does not know
// it).
func (e *advEnv) originByID(p *proc, o wire.OriginID) httpapi.OriginDoc {
	e.t.Helper()
	id := hex.EncodeToString(o[:])
	for _, d := range p.status().Origins {
		if d.Origin == id {
			return d
		}
	}
	return httpapi.OriginDoc{}
}

// bind begins a scenario: it points the environment's helpers, and its nodes', at the
// subtest t until it ends, and notes G's redials so far.
// adversary starts a scenario: it binds e to t, names the adversary as a peer of N (for its
// last error), takes N's close counts, and dials N with cfg (ws://) within the deadline,
// through its handshake.
func (e *advEnv) adversary(t *testing.T, within time.Duration, cfg advConfig) (*adversary, closeCounts, context.Context) {
	t.Helper()
	e.bind(t)
	e.named(e.n, cfg.name)
	before := e.closeCounts(e.n)
	ctx := deadline(t, within)
	a := dialAdversary(ctx, t, e.n.URL, cfg)
	a.established()
	return a, before, ctx
}

func (e *advEnv) bind(t *testing.T) {
	prev := e.t
	set := func(t *testing.T) {
		e.t = t
		for _, p := range []*proc{e.n, e.g, e.m} {
			p.t = t
		}
	}
	set(t)
	t.Cleanup(func() { set(prev) })
	e.redials = map[string]uint64{"N": e.g.peerReconnects("N"), "M": e.g.peerReconnects("M")}
}

// TestAdversarialPeer: adversaries with valid credentials (the cluster secret; over wss://
// a certificate of the cluster's CA) misbehave against N, and M, while G streams to both.
// Each is refused or closed with its typed error, counted once under its code and kept as
// its peer's last error, or, where the protocol defines no error, handled as
// protocol/SPEC.md says; N stays up, G's connection survives and its writes go on
// arriving, and no entry of an adversary lands beyond what a conforming peer could write.
func TestAdversarialPeer(t *testing.T) {
	e := newAdvEnv(t)

	// DATA past the credit the node granted: past one channel's window on N, past the
	// connection's window on M (whose connection window is one channel's). Two entries past
	// a gap (seq 2 and 3, never 1, so that neither could land) pass the window by 2 KiB in
	// one message, before the node could grant more; the connection's credit is checked
	// first, so on M the connection's is the one overrun. Over TLS on N, ws:// on M.
	overrun := func(t *testing.T, p *proc, url string, tlsCfg *tls.Config, channel bool) {
		name := "ADV-CREDIT"
		e.named(p, name)
		before := e.closeCounts(p)
		ctx := deadline(t, 20*time.Second)
		a := dialAdversary(ctx, t, url, advConfig{name: name, tls: tlsCfg, expect: p.Name})
		a.established()
		a.offer(ctx, 3)
		es := txnChain(a.origin, "t", 1, wire.Hash{1}, 2, 8<<20+1<<10)
		a.message(dataFrame(a.channel, es[0].Hash, es[0].Raw), dataFrame(a.channel, es[1].Hash, es[1].Raw))
		where := "connection:"
		if channel {
			where = "channel " + strconv.FormatUint(uint64(a.channel), 10) + ":"
		}
		if err := a.awaitClose(ctx); err.Code != wire.CodeCreditOverrun || !strings.Contains(err.Message, where) {
			t.Errorf("%s closed with %v, want credit-overrun (%s)", p.Name, err, where)
		}
		e.expectCounted(p, before, false, wire.CodeCreditOverrun)
		e.expectLastError(p, name, wire.CodeCreditOverrun)
		e.unharmed(map[wire.OriginID]uint64{a.origin: 0})
	}
	t.Run("credit-overrun-channel", func(t *testing.T) {
		e.bind(t)
		overrun(t, e.n, wss(e.n), e.clientTLS("ADV-CREDIT"), true)
	})
	t.Run("credit-overrun-connection", func(t *testing.T) {
		e.bind(t)
		overrun(t, e.m, e.m.URL, nil, false)
	})

	// A HELLO naming another node than the client certificate: the MAC verifies (the
	// right secret, bound to the channel), and N refuses the name after it, before the
	// session is established: a refusal, on record in refusals[].
	t.Run("hello-name-not-the-certificate", func(t *testing.T) {
		e.bind(t)
		e.named(e.n, "ADV-NAME")
		before := e.closeCounts(e.n)
		ctx := deadline(t, 10*time.Second)
		a := dialAdversary(ctx, t, wss(e.n), advConfig{name: "ADV-OTHER", tls: e.clientTLS("ADV-NAME")})
		if err := a.awaitClose(ctx); err.Code != wire.CodePeerNameMismatch || err.Class != wire.ClassRefused {
			t.Errorf("N closed with %v, want peer-name-mismatch (refused)", err)
		}
		e.expectCounted(e.n, before, true, wire.CodePeerNameMismatch)
		e.expectLastError(e.n, "ADV-NAME", wire.CodePeerNameMismatch)
		st := e.n.status()
		var newest httpapi.RefusalDoc
		if len(st.Refusals) > 0 {
			newest = st.Refusals[len(st.Refusals)-1]
		}
		if newest.Code != string(wire.CodePeerNameMismatch) || newest.Class != string(wire.ClassRefused) || newest.Peer != "ADV-NAME" || newest.Dialed {
			t.Errorf("N's newest refusal: %+v, want peer-name-mismatch (refused) of ADV-NAME (its certificate's name), not dialed", newest)
		}
		if _, ok := st.Origin("ADV-OTHER"); ok {
			t.Error("N learned the refused peer's name as an origin's")
		}
		e.unharmed(map[wire.OriginID]uint64{a.origin: 0})
	})

	// Seqs and heads going back. In version 2 an entry below the channel's position is a
	// duplicate (protocol/SPEC.md, version 2's receive checks): skipped, counted, no
	// error; a head going back is out-of-order. In version 1 a TXN1 position not above the last is
	// out-of-order; the adversary relays G's origin there, with an entry below what N holds
	// of it (a duplicate, whatever its bytes), so nothing of it could land.
	t.Run("seq-regress", func(t *testing.T) {
		a, before, ctx := e.adversary(t, 10*time.Second, advConfig{name: "ADV-REGRESS"})
		a.offer(ctx, 3)
		es := txnChain(a.origin, "adv", 0, wire.Hash{}, 3, 8)
		a.send(es)
		a.awaitCursor(ctx, 3)
		dups := e.n.status().Counters.DuplicatesReceived
		a.rawData(es[1].Hash, es[1].Raw) // seq 2 again, on a channel at 3
		waitFor(t, "N counting the duplicate", 10*time.Second, func() bool { return e.n.status().Counters.DuplicatesReceived == dups+1 })
		e.expectNothingCounted(e.n, before)
		a.message(prototest.Frame(&wire.Heads{Heads: []wire.Head{{Origin: a.origin, Seq: 1, HLC: wire.MakeHLC(stampBase+1, 0)}}}))
		if err := a.awaitClose(ctx); err.Code != wire.CodeOutOfOrder {
			t.Errorf("N closed with %v, want out-of-order", err)
		}
		e.expectCounted(e.n, before, false, wire.CodeOutOfOrder)
		e.expectLastError(e.n, "ADV-REGRESS", wire.CodeOutOfOrder)
		e.unharmed(map[wire.OriginID]uint64{a.origin: 3})
	})
	t.Run("seq-regress-v1", func(t *testing.T) {
		e.bind(t)
		e.named(e.n, "ADV-V1")
		for e.n.origin("G").AppliedSeq < 2 {
			e.goodWrite()
		}
		before := e.closeCounts(e.n)
		ctx := deadline(t, 10*time.Second)
		a := dialAdversary(ctx, t, e.n.URL, advConfig{name: "ADV-V1", maxVersion: 1})
		a.established()
		for !hasEvent(a.events, protocol.EventSubscribed) { // N's SUBSCRIBE1
			a.receive(ctx)
		}
		dups := e.n.status().Counters.DuplicatesReceived
		bogus := txnChain(e.gOrigin, "t", 0, wire.Hash{}, 1, 8)[0] // "G's" seq 1, not G's
		a.message(prototest.Frame(&wire.Origin{Origin: e.gOrigin, Name: "G"}), txn1Frame(10, bogus.Raw), txn1Frame(9, bogus.Raw))
		if err := a.awaitClose(ctx); err.Code != wire.CodeOutOfOrder {
			t.Errorf("N closed with %v, want out-of-order", err)
		}
		if d := e.n.status().Counters.DuplicatesReceived; d != dups+1 {
			t.Errorf("N counted %d duplicates, want 1: the TXN1 at position 10", d-dups)
		}
		e.expectCounted(e.n, before, false, wire.CodeOutOfOrder)
		e.expectLastError(e.n, "ADV-V1", wire.CodeOutOfOrder)
		e.unharmed(nil)
	})

	// ORIGIN frames renaming origins that have names: its own, G's and N's.
	// protocol/SPEC.md defines no error for it ("A receiver records the name; it carries
	// no other meaning"); the node keeps the first name it learned of each origin and the
	// connection goes on.
	t.Run("origin-renamed", func(t *testing.T) {
		a, before, ctx := e.adversary(t, 10*time.Second, advConfig{name: "ADV-RENAME"})
		a.offer(ctx, 1)
		a.message(prototest.Frame(&wire.Origin{Origin: a.origin, Name: "ADV-RENAMED"}),
			prototest.Frame(&wire.Origin{Origin: e.gOrigin, Name: "EVIL-G"}),
			prototest.Frame(&wire.Origin{Origin: e.nOrigin, Name: "EVIL-N"}))
		second := wire.OriginID{0xad, 0x02}
		a.offerOrigin(ctx, second, "ADV-RENAME-2", 1) // N answers in order: the renames were processed
		if a.s.State() != protocol.StateEstablished {
			t.Fatalf("N closed the connection: %v", a.s.Err())
		}
		e.expectNothingCounted(e.n, before)
		names := map[wire.OriginID]string{e.gOrigin: "G", e.nOrigin: "N"}
		for _, p := range []*proc{e.g, e.n} { // G never hears of the adversary's origin: it holds no entry
			for o, want := range names {
				if got := e.originByID(p, o).Name; got != want {
					t.Errorf("%s names origin %s %q, want %q", p.Name, o, got, want)
				}
			}
			names[a.origin] = "ADV-RENAME"
		}
		a.leave()
		e.unharmed(map[wire.OriginID]uint64{a.origin: 0})
	})

	// A chain that forks: entries 1 and 2 of its origin, then a 3 whose prev is not
	// 2's hash. Version 2 closes the channel, not the connection: N counts the divergence,
	// reports it with DIVERGENCE, marks the origin diverged and never applies the fork.
	t.Run("fork", func(t *testing.T) {
		a, before, ctx := e.adversary(t, 10*time.Second, advConfig{name: "ADV-FORK"})
		a.offer(ctx, 3)
		a.send(txnChain(a.origin, "adv", 0, wire.Hash{}, 2, 8))
		a.awaitCursor(ctx, 2)
		divs := e.n.status().Counters.Divergences
		fork := txnChain(a.origin, "t", 2, wire.Hash{0xf0}, 1, 8)[0] // seq 3, off the chain
		a.rawData(fork.Hash, fork.Raw)
		for !hasEvent(a.events, protocol.EventDivergence) { // N's DIVERGENCE: the channel is closed
			a.receive(ctx)
		}
		if d := e.n.status().Counters.Divergences; d != divs+1 {
			t.Errorf("N counted %d divergences, want 1", d-divs)
		}
		if o := e.n.origin("ADV-FORK"); !o.Diverged || o.AppliedSeq != 2 {
			t.Errorf("N's status of the forked origin: %+v, want diverged at 2", o)
		}
		if a.s.State() != protocol.StateEstablished {
			t.Errorf("N closed the connection: %v", a.s.Err())
		}
		e.expectNothingCounted(e.n, before)
		a.leave()
		e.unharmed(map[wire.OriginID]uint64{a.origin: 2})
	})

	// A flood of PINGs: 100,000 in 100 messages, as fast as the socket takes them.
	// Nothing bounds them: each is answered with a PONG, and the node keeps serving G.
	t.Run("ping-flood", func(t *testing.T) {
		a, before, ctx := e.adversary(t, 20*time.Second, advConfig{name: "ADV-PING"})
		const perMessage, messages = 1000, 100
		var pongs atomic.Int64
		readDone := make(chan struct{})
		go func() { // the PONGs are counted here, past the session, which expects one per PING it sent
			defer close(readDone)
			for {
				_, msg, err := a.ws.Read(ctx)
				if err != nil {
					return
				}
				r := wire.NewReader(msg, 0)
				for r.More() {
					if f, err := r.Next(); err == nil && f.Type == wire.TypePong {
						pongs.Add(1)
					}
				}
			}
		}()
		start := time.Now()
		var id uint64
		for m := range messages {
			frames := make([][]byte, perMessage)
			for i := range frames {
				id++
				frames[i] = prototest.Frame(&wire.Ping{ID: id})
			}
			a.message(frames...)
			if m == messages/2 {
				e.goodWrite() // during the flood
			}
		}
		waitFor(t, "N answering every PING", 20*time.Second, func() bool { return pongs.Load() == perMessage*messages })
		t.Logf("N answered %d PINGs in %v", pongs.Load(), time.Since(start).Round(time.Millisecond))
		e.expectNothingCounted(e.n, before)
		a.leave()
		<-readDone
		e.unharmed(map[wire.OriginID]uint64{a.origin: 0})
	})

	// Channels opened and never read: the adversary subscribes to G's origin, which N
	// holds more of than the windows it grants (64 KiB for the channel, 128 KiB for the
	// connection), then neither reads nor writes. N sends within that credit and no more,
	// G's writes go on arriving meanwhile, and N's liveness timeout (5 s) closes the
	// connection. What N sent is then read: within the credit, then N's CLOSE.
	t.Run("never-reads", func(t *testing.T) {
		e.bind(t)
		e.named(e.n, "ADV-STALL")
		writeBatches(t, e.g, 40, 100, 2, 100) // 40 entries of about 11 KB each
		e.gKeys += 40 * 100
		e.caughtUp()
		before := e.closeCounts(e.n)
		ctx := deadline(t, 30*time.Second)
		const channelWindow, sessionWindow = 64 << 10, 128 << 10
		a := dialAdversary(ctx, t, wss(e.n), advConfig{name: "ADV-STALL", tls: e.clientTLS("ADV-STALL"),
			limits: protocol.Limits{MaxFrameBody: 32 << 10, MaxMessage: 64 << 10, MaxChannelBuffer: channelWindow, MaxSessionBuffer: sessionWindow}})
		a.established()
		if a.s.Handshake().Version >= 4 {
			// A version-4 peer sends its QUIET first: N's first advertisement waits for it
			// (protocol/SPEC.md, "The quiet control plane").
			if err := a.s.V4().Quiet(nil, nil); err != nil {
				t.Fatal(err)
			}
			a.flush()
		}
		for !a.heard(e.gOrigin) {
			a.receive(ctx)
		}
		if err := a.s.V2().Subscribe([]vector.Entry{{Origin: e.gOrigin}}); err != nil {
			t.Fatal(err)
		}
		a.flush()
		base, err := e.n.Memory("VmRSS")
		if err != nil {
			t.Fatal(err)
		}
		watch := e.n.WatchRSS(100 * time.Millisecond)
		stalled := time.Now()
		e.goodWrite() // while the adversary stalls
		if !e.n.status().Connected("ADV-STALL") {
			t.Error("N dropped the stalled connection before its liveness timeout")
		}
		e.expectCounted(e.n, before, false, wire.CodeLivenessTimeout)
		peak := watch()
		t.Logf("N closed the stalled connection after %v; N's RSS %d MiB before, peak %d MiB",
			time.Since(stalled).Round(time.Millisecond), base>>20, peak>>20)
		if peak-base > 32<<20 {
			t.Errorf("N's RSS grew by %d MiB while the adversary stalled", (peak-base)>>20)
		}
		if byNode := a.drain(ctx); !byNode || a.s.Err().Code != wire.CodeLivenessTimeout {
			t.Errorf("the adversary's session ended with %v (closed by N: %v), want N's CLOSE with liveness-timeout", a.s.Err(), byNode)
		}
		if a.dataIn == 0 || a.dataIn > channelWindow {
			t.Errorf("N sent %d bytes of DATA on a channel of %d bytes of credit", a.dataIn, channelWindow)
		}
		e.expectLastError(e.n, "ADV-STALL", wire.CodeLivenessTimeout)
		e.unharmed(nil)
	})

	// A flood of PINGs into a socket the adversary does not read: the node reads on and
	// queues a PONG for each, until its queue for the connection passes --send-queue; then
	// it closes the connection with send-buffer-full, before its memory grows by what the
	// adversary sends.
	t.Run("ping-flood-unread", func(t *testing.T) {
		a, before, ctx := e.adversary(t, 60*time.Second, advConfig{name: "ADV-PING-UNREAD"})
		base, err := e.n.Memory("VmRSS")
		if err != nil {
			t.Fatal(err)
		}
		const perMessage, messages = 1000, 2000 // 2,000,000 PINGs, 26 MB
		var id uint64
		for range messages {
			frames := make([][]byte, perMessage)
			for i := range frames {
				id++
				frames[i] = prototest.Frame(&wire.Ping{ID: id})
			}
			m := bytes.Join(frames, nil)
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := a.ws.Write(wctx, websocket.MessageBinary, m)
			cancel()
			if err != nil {
				t.Logf("the node stopped taking PINGs after %d: %v", id-perMessage, err)
				break
			}
		}
		rss, err := e.n.Memory("VmRSS")
		if err != nil {
			t.Fatal(err)
		}
		if grown := rss - base; grown > 32<<20 || e.n.status().Connected("ADV-PING-UNREAD") {
			t.Errorf("N's RSS grew by %d MiB over %d unread PONGs (bound %d B queued), connected %v", grown>>20, id, sendQueue,
				e.n.status().Connected("ADV-PING-UNREAD"))
		}
		e.awaitCounted(e.n, before, false, wire.CodeSendBufferFull)
		e.expectLastError(e.n, "ADV-PING-UNREAD", wire.CodeSendBufferFull)
		_ = a.ws.CloseNow() // the node's queue goes with the socket
		e.unharmed(map[wire.OriginID]uint64{a.origin: 0})
	})

	// An adversary whose certificate names it, but whose HELLO gives G's origin id.
	// Certificates bind names, not origin ids; the node, which G named itself to, refuses
	// the id under another name (peer-name-mismatch) and keeps G's connection.
	t.Run("origin-of-another-node", func(t *testing.T) {
		e.bind(t)
		e.named(e.n, "ADV-IMPOSTOR")
		before := e.closeCounts(e.n)
		ctx := deadline(t, 10*time.Second)
		a := dialAdversary(ctx, t, wss(e.n), advConfig{name: "ADV-IMPOSTOR", tls: e.clientTLS("ADV-IMPOSTOR"), origin: e.gOrigin})
		if err := a.awaitClose(ctx); err.Code != wire.CodePeerNameMismatch || err.Class != wire.ClassRefused {
			t.Errorf("N closed with %v, want peer-name-mismatch (refused)", err)
		}
		e.expectCounted(e.n, before, true, wire.CodePeerNameMismatch)
		e.expectLastError(e.n, "ADV-IMPOSTOR", wire.CodePeerNameMismatch)
		e.unharmed(nil)
	})

	// Vectors and bodies past every bound: a HEADS of 4097 origins (past MaxOrigins; its
	// body passes the 64 KiB bound of a control body first), SUBSCRIBEs of 5,000 channels
	// in five frames (past MaxChannels, 4096), and 4097 ORIGIN frames (past MaxOrigins).
	// bound returns how long N took to close the connection after the frames.
	bound := func(t *testing.T, name string, code wire.Code, frames func(a *adversary) [][]byte) time.Duration {
		e.named(e.n, name)
		before := e.closeCounts(e.n)
		ctx := deadline(t, 20*time.Second)
		a := dialAdversary(ctx, t, e.n.URL, advConfig{name: name})
		a.established()
		fs := frames(a)
		sent := time.Now()
		a.message(fs...)
		if err := a.awaitClose(ctx); err.Code != code {
			t.Errorf("N closed with %v, want %s", err, code)
		}
		held := time.Since(sent)
		t.Logf("N closed the connection %v after the frames", held.Round(time.Millisecond))
		e.expectCounted(e.n, before, false, code)
		e.expectLastError(e.n, name, code)
		e.unharmed(map[wire.OriginID]uint64{a.origin: 0})
		return held
	}
	manyOrigins := func(n int) []wire.OriginID {
		out := make([]wire.OriginID, n)
		for i := range out {
			out[i] = wire.OriginID{0xbd, byte(i >> 8), byte(i)}
		}
		return out
	}
	t.Run("heads-past-the-body-bound", func(t *testing.T) {
		e.bind(t)
		_ = bound(t, "ADV-HEADS", wire.CodeFrameTooLarge, func(a *adversary) [][]byte {
			var h wire.Heads
			for _, o := range manyOrigins(protocol.DefaultMaxOrigins + 1) {
				h.Heads = append(h.Heads, wire.Head{Origin: o, Seq: 1, HLC: wire.MakeHLC(stampBase+1, 0)})
			}
			body, err := h.AppendBody(nil)
			if err != nil {
				t.Fatal(err)
			}
			return [][]byte{prototest.RawFrame(wire.TypeHeads, 0, 0, body)}
		})
	})
	t.Run("subscribe-past-the-channel-bound", func(t *testing.T) {
		e.bind(t)
		// The 4096 channels before the bound open one at a time, each inserted in order into
		// the connection's streams: N's loop, which serves every connection, must not be held
		// for long (a sort per channel held it for seconds, past G's liveness timeout).
		held := bound(t, "ADV-CHANNELS", wire.CodeTooManyChannels,
			func(a *adversary) [][]byte {
				var frames [][]byte
				origins := manyOrigins(5000)
				for i := 0; i < len(origins); i += 1000 {
					var s wire.Subscribe
					for j, o := range origins[i : i+1000] {
						s.Entries = append(s.Entries, wire.SubscribeEntry{Channel: uint32(i + j + 1), Origin: o, Credit: 1 << 20})
					}
					frames = append(frames, prototest.Frame(&s))
				}
				return frames
			})
		if held > time.Second {
			t.Errorf("N took %v to refuse 5,000 channels; its other connections waited as long", held)
		}
	})
	t.Run("origins-past-the-bound", func(t *testing.T) {
		e.bind(t)
		// The names of the 4096 origins before the one refused took effect
		// (protocol/SPEC.md: frames before an error do); N gives a session only the names of
		// the origins it carries, so G's connection, which carries none of them, goes on.
		_ = bound(t, "ADV-ORIGINS", wire.CodeTooManyOrigins,
			func(a *adversary) [][]byte {
				var frames [][]byte
				for i, o := range manyOrigins(protocol.DefaultMaxOrigins + 1) {
					frames = append(frames, prototest.Frame(&wire.Origin{Origin: o, Name: "adv-" + strconv.Itoa(i)}))
				}
				return frames
			})
	})
}
