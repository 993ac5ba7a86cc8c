//go:build multiprocess || scale

package multiprocess

// The WAN scenarios: clusters whose every link passes a toxiproxy proxy (internal/faultnet).
// Only one side of a link dials, always through the link's proxy; a toxic applies to both
// directions unless the scenario names one. Every assertion is on data: equal digests, no
// duplicate received, every origin's lag back to 0, every acknowledged write on every node.
// The times they log (write→visible, time to heal, throughput) are what BENCHMARKS.md
// records; the tests assert only bounds a correct node cannot miss.

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"plait/internal/cluster"
	"plait/internal/faultnet"
)

// wan is a test's faulty network: every link made through it is a proxy.
type wan struct {
	t   *testing.T
	net *faultnet.Net
}

func newWAN(t *testing.T) *wan {
	w := &wan{t: t, net: faultnet.New()}
	t.Cleanup(func() {
		if err := w.net.Close(); err != nil {
			t.Errorf("closing the proxies: %v", err)
		}
	})
	return w
}

// wanLink is one link of a wan: from dials to, through the proxy.
type wanLink struct {
	from, to *proc
	*faultnet.Link
}

// link makes from dial to through a new proxy (POST /v1/peers with the proxy's address):
// to never dials from, so the link's every byte passes the proxy.
func (w *wan) link(from, to *proc) *wanLink {
	w.t.Helper()
	l, err := w.net.Link(from.Name+">"+to.Name, "127.0.0.1", listenAddr(to))
	if err != nil {
		w.t.Fatal(err)
	}
	from.addPeerAt(to.Name, "ws://"+l.Addr)
	return &wanLink{from, to, l}
}

// toxic sets t, named name, on every link in the directions given (both when none is).
func toxic(tb testing.TB, name string, t faultnet.Toxic, links []*wanLink, dirs ...faultnet.Direction) {
	tb.Helper()
	for _, l := range links {
		if err := l.Add(name, t, dirs...); err != nil {
			tb.Fatal(err)
		}
	}
}

// regions is 3 regions of 3 nodes, a1..c3: each region a mesh, and node i of each region
// linked to node i of the two others, so each node has 4 peers and every region pair 3
// links. Between regions a round trip takes 80 ± 20 ms (40 ± 10 ms each way), inside one
// 1 ms (set on the dialer's direction only).
type regions struct {
	nodes [3][3]*proc
	inter []*wanLink
	intra []*wanLink
}

const (
	interLatencyMs = 40 // each way, so a round trip of 80 ms
	interJitterMs  = 10 // each way, so ± 20 ms a round trip
)

func (w *wan) regions(args ...string) *regions {
	w.t.Helper()
	g := &regions{}
	for r := range 3 {
		for i := range 3 {
			g.nodes[r][i] = serve(w.t, fmt.Sprintf("%c%d", 'a'+r, i+1), args...)
		}
	}
	for r := range 3 {
		for i := range 3 {
			for j := i + 1; j < 3; j++ {
				g.intra = append(g.intra, w.link(g.nodes[r][i], g.nodes[r][j]))
			}
		}
	}
	for r := range 3 {
		for s := r + 1; s < 3; s++ {
			for i := range 3 {
				g.inter = append(g.inter, w.link(g.nodes[r][i], g.nodes[s][i]))
			}
		}
	}
	toxic(w.t, "lan", faultnet.Latency(1, 0), g.intra, faultnet.Up)
	return g
}

// wanLatency sets the round trip between regions.
func (g *regions) wanLatency(t *testing.T) {
	toxic(t, "wan", faultnet.Latency(interLatencyMs, interJitterMs), g.inter)
}

func (g *regions) all() []*proc {
	var out []*proc
	for r := range 3 {
		out = append(out, g.nodes[r][:]...)
	}
	return out
}

// cut is the links between region r and the two others.
func (g *regions) cut(r int) []*wanLink {
	var out []*wanLink
	for _, l := range g.inter {
		if l.from.Name[0] == byte('a'+r) || l.to.Name[0] == byte('a'+r) {
			out = append(out, l)
		}
	}
	return out
}

// wanWriter writes batches of new keys, w-NODE-TAGN, to one node at a steady pace and keeps
// what was acknowledged: every node must end with exactly those keys and values.
type wanWriter struct {
	p     *proc
	acked atomic.Int64 // batches acknowledged
	mu    sync.Mutex
	keys  map[string]string // acknowledged key → value
	// unsure is what batches that had no answer carried (a tolerant writer's node was
	// killed under them, or was down): each key either holds its value or is absent.
	unsure map[string]string
	failed atomic.Int64 // batches with no answer (a tolerant writer's)
	err    error        // the first refusal or failed request (of a tolerant writer: refusal)
	done   chan struct{}
}

const wanBatch = 5 // keys a batch

// wanLoad is how writers write: a batch every pace, keys tagged tag (so writers of another
// round of the same test write other keys); a tolerant writer goes on after a batch with
// no answer (its node killed, or down, under writes) instead of ending with an error.
type wanLoad struct {
	pace     time.Duration
	tag      string
	tolerant bool
}

// startWANWriters starts a wanWriter on each node, a batch every pace, and returns them with
// the function that stops them and waits until each is done (safe to call again).
func startWANWriters(pace time.Duration, nodes ...*proc) ([]*wanWriter, func()) {
	return startLoad(wanLoad{pace: pace}, nodes...)
}

// startLoad is startWANWriters writing as l says.
func startLoad(l wanLoad, nodes ...*proc) ([]*wanWriter, func()) {
	stop := make(chan struct{})
	var ws []*wanWriter
	for _, p := range nodes {
		w := &wanWriter{p: p, keys: map[string]string{}, unsure: map[string]string{}, done: make(chan struct{})}
		ws = append(ws, w)
		go func() {
			defer close(w.done)
			client := &http.Client{Timeout: 30 * time.Second}
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(l.pace): // the pace of the load, not a wait for anything
				}
				var ops []op
				for j := range wanBatch {
					i := n*wanBatch + j
					k, v := fmt.Sprintf("w-%s-%s%07d", p.Name, l.tag, i), fmt.Sprintf("%s:%s%d", p.Name, l.tag, i)
					ops = append(ops, put(k, v))
				}
				code, err := p.postBatch(client, ops)
				if err != nil && code == 0 && l.tolerant {
					w.mu.Lock()
					for _, o := range ops {
						w.unsure[o.Key] = *o.Value
					}
					w.mu.Unlock()
					w.failed.Add(1)
					continue
				}
				if err != nil {
					w.mu.Lock()
					w.err = err
					w.mu.Unlock()
					return
				}
				w.mu.Lock()
				for _, o := range ops {
					w.keys[o.Key] = *o.Value
				}
				w.mu.Unlock()
				w.acked.Add(1)
			}
		}()
	}
	var once sync.Once
	return ws, func() {
		once.Do(func() {
			close(stop)
			for _, w := range ws {
				<-w.done
			}
		})
	}
}

// moreWANBatches waits until every writer has n more batches acknowledged than now.
func moreWANBatches(t *testing.T, ws []*wanWriter, n int64, when string) {
	t.Helper()
	before := make([]int64, len(ws))
	for i, w := range ws {
		before[i] = w.acked.Load()
	}
	waitFor(t, fmt.Sprintf("%d more batches on every node %s", n, when), 60*time.Second, func() bool {
		for i, w := range ws {
			if w.acked.Load() < before[i]+n {
				return false
			}
		}
		return true
	})
}

// heads is each node's applied seq of its own origin now.
func heads(nodes []*proc) map[string]uint64 {
	out := map[string]uint64{}
	for _, p := range nodes {
		out[p.Name] = p.origin(p.Name).AppliedSeq
	}
	return out
}

// reached reports whether every node applied every origin up to at least heads.
func reached(nodes []*proc, heads map[string]uint64) bool {
	for _, p := range nodes {
		st := p.status()
		for name, seq := range heads {
			if o, _ := st.Origin(name); o.AppliedSeq < seq {
				return false
			}
		}
	}
	return true
}

// settled waits until the nodes converge, then checks what they hold: equal digests of
// table t, no duplicate received anywhere, every origin's lag 0 everywhere (converged), and
// every acknowledged write of the writers on every node, with no key a writer did not
// write. It returns how long converging took.
func settled(t *testing.T, bound time.Duration, ws []*wanWriter, nodes ...*proc) time.Duration {
	t.Helper()
	start := time.Now()
	waitFor(t, "every node applied every origin, lag 0", bound, func() bool { return converged(nodes...) })
	took := time.Since(start)
	first := nodes[0].digest("t")
	for _, p := range nodes {
		if d := p.digest("t"); d != first {
			t.Errorf("digests differ: %s %s, %s %s", nodes[0].Name, first, p.Name, d)
		}
		st := p.status()
		if d := st.Counters.DuplicatesReceived; d != 0 {
			t.Errorf("%s received %d duplicates", p.Name, d)
		}
		for _, o := range st.Origins {
			if o.LagSeq != 0 || o.Diverged {
				t.Errorf("%s: origin %s lag %d diverged %v", p.Name, o.Name, o.LagSeq, o.Diverged)
			}
		}
	}
	if len(ws) == 0 {
		return took
	}
	// What the writers wrote, by key: acknowledged (it must be there) or unsure (there with
	// its value, or absent). Each node is listed once, all the writers' keys together.
	acked, unsure := map[string]string{}, map[string]string{}
	for _, w := range ws {
		if w.err != nil {
			t.Errorf("%s: a write failed: %v", w.p.Name, w.err)
		}
		maps.Copy(acked, w.keys)
		maps.Copy(unsure, w.unsure)
	}
	for _, p := range nodes {
		listed := p.listAll("w-")
		missing := 0
		for k, v := range acked {
			if got, ok := listed[k]; !ok || got != v {
				if missing++; missing <= 3 {
					t.Errorf("%s: %s acknowledged as %q reads %q", p.Name, k, v, got)
				}
			}
		}
		if missing > 0 {
			t.Errorf("%s: %d of %d acknowledged writes missing or wrong", p.Name, missing, len(acked))
		}
		for k, v := range listed {
			if want, ok := acked[k]; ok && v == want {
				continue
			}
			if want, ok := unsure[k]; ok && v == want {
				continue
			}
			t.Errorf("%s holds %s = %q, which no writer wrote", p.Name, k, v)
			break
		}
	}
	return took
}

// visible writes a new key on from and polls to (every millisecond) until it reads it:
// the time from sending the write until it was visible there.
func visible(t *testing.T, from, to *proc, key string) time.Duration {
	t.Helper()
	start := time.Now()
	from.put("t", key, "v")
	if err := cluster.WaitEvery(key+" visible on "+to.Name, 30*time.Second, time.Millisecond, func() bool {
		code, _ := to.get("/v1/tables/t/records/" + key)
		return code == http.StatusOK
	}); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// visibleTimes is n write→visible times from from to to, sorted.
func visibleTimes(t *testing.T, from, to *proc, prefix string, n int) []time.Duration {
	t.Helper()
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = visible(t, from, to, fmt.Sprintf("%s-%03d", prefix, i))
	}
	slices.Sort(out)
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// TestWANRegions: 3 regions of 3 nodes, 80 ± 20 ms between regions, converge under writes on
// every node. Write→visible from a1 to c2 (no direct link: two hops, one across regions)
// is measured first with no WAN latency, then with it, in the same run: BENCHMARKS.md §12
// keeps both. A write cannot be visible across regions in less than one crossing
// (30 ms at the least jitter), so a median below that means the latency is not applied.
// It runs at version 2 and at version 3 (anti-entropy comparing ranges across the WAN).
func TestWANRegions(t *testing.T) {
	for _, version := range []string{"2", "3"} {
		t.Run("version "+version, func(t *testing.T) { wanRegions(t, version) })
	}
}

func wanRegions(t *testing.T, version string) {
	w := newWAN(t)
	g := w.regions("--protocol-max", version)
	nodes := g.all()
	a1, c2 := g.nodes[0][0], g.nodes[2][1]
	waitFor(t, "every link streaming", 30*time.Second, func() bool {
		for _, l := range append(slices.Clone(g.intra), g.inter...) {
			if !l.from.connected(l.to.Name) {
				return false
			}
		}
		return true
	})
	for _, p := range nodes {
		p.put("t", "first-"+p.Name, "x") // every node an origin, so converged can compare them all
	}
	settled(t, 30*time.Second, nil, nodes...)
	lan := visibleTimes(t, a1, c2, "lan", 15)

	g.wanLatency(t)
	far := visibleTimes(t, a1, c2, "wan", 15)
	if m := far[len(far)/2]; m < (interLatencyMs-interJitterMs)*time.Millisecond {
		t.Errorf("write→visible across regions: median %s, below one crossing (%d ms)", ms(m), interLatencyMs-interJitterMs)
	}

	ws, stop := startWANWriters(20*time.Millisecond, nodes...)
	moreWANBatches(t, ws, 50, "with the WAN's latency")
	stop()
	took := settled(t, 60*time.Second, ws, nodes...)
	var batches int64
	for _, w := range ws {
		batches += w.acked.Load()
	}
	t.Logf("write→visible a1→c2 without WAN latency: median %s, max %s", ms(lan[len(lan)/2]), ms(lan[len(lan)-1]))
	t.Logf("write→visible a1→c2 with 80±20 ms between regions: median %s, max %s (ratio of medians %.1f)",
		ms(far[len(far)/2]), ms(far[len(far)-1]), float64(far[len(far)/2])/float64(lan[len(lan)/2]))
	t.Logf("%d batches on 9 nodes; converged %s after the writes stopped", batches, ms(took))
}

// TestWANRegionCut: region c is cut off from a and b (every byte dropped both ways, no
// connection closed: a black hole) for 30 s while every node writes, then healed. Regions
// a and b keep replicating each other meanwhile; after the heal every node has every
// acknowledged write. The time to heal is from the heal until every node applied what
// every origin had when the cut ended.
//
// It runs at version 2 (--protocol-max 2: cursors and relays without anti-entropy), where
// a received duplicate can only be a relay re-streaming what was applied.
func TestWANRegionCut(t *testing.T) {
	const version = "2"
	w := newWAN(t)
	g := w.regions("--protocol-max", version)
	g.wanLatency(t)
	nodes := g.all()
	ws, stop := startWANWriters(20*time.Millisecond, nodes...)
	defer stop()
	moreWANBatches(t, ws, 10, "before the cut")

	cut := g.cut(2)
	for _, l := range cut {
		if err := l.Partition(); err != nil {
			t.Fatal(err)
		}
	}
	cutAt := time.Now()
	ab := append(g.nodes[0][:], g.nodes[1][:]...)
	// While c is away, a and b still take each other's writes: a write on a1 reaches b3.
	at := heads(ab)
	waitFor(t, "a and b replicating each other while c is cut off", 30*time.Second, func() bool { return reached(ab, at) })
	cAt := heads(g.nodes[2][:])
	if reached(ab, map[string]uint64{"c1": cAt["c1"] + 1}) {
		t.Fatal("a write of c1 reached a or b through the cut")
	}
	waitFor(t, "30 s of the cut", 40*time.Second, func() bool { return time.Since(cutAt) >= 30*time.Second })
	if c1 := g.nodes[0][0].origin("c1").AppliedSeq; c1 >= heads(g.nodes[2][:1])["c1"] {
		t.Fatalf("a1 applied c1 to %d during the cut: the cut let c1's writes through", c1)
	}

	healAt := heads(nodes)
	for _, l := range cut {
		if err := l.Heal(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	waitFor(t, "every node caught up after the heal", 60*time.Second, func() bool { return reached(nodes, healAt) })
	heal := time.Since(start)
	moreWANBatches(t, ws, 10, "after the heal")
	stop()
	settled(t, 60*time.Second, ws, nodes...)
	var reconnects uint64
	for _, l := range cut {
		for _, pd := range l.from.status().Peers {
			if pd.Name == l.to.Name {
				reconnects += pd.Reconnects
			}
		}
	}
	t.Logf("version %s: region c cut off for %s under writes; every node caught up %s after the heal (the cut links redialed %d times)",
		version, ms(time.Since(cutAt)-time.Since(start)), ms(heal), reconnects)
}

// TestWANOneWayPartition: the bytes from a dialer to its listener are dropped (its
// direction only) and the listener's still arrive; the liveness timeout closes the
// connection on both sides, the writes of both wait, and after the heal both have every
// write.
func TestWANOneWayPartition(t *testing.T) {
	w := newWAN(t)
	a, b := serve(t, "A"), serve(t, "B")
	l := w.link(a, b)
	waitFor(t, "A streaming with B", 30*time.Second, func() bool { return a.connected("B") })
	ws, stop := startWANWriters(20*time.Millisecond, a, b)
	defer stop()
	moreWANBatches(t, ws, 5, "before the partition")
	if err := l.Partition(faultnet.Up); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B sees A gone (no byte from A within the liveness timeout)", 30*time.Second, func() bool { return !b.connected("A") })
	before := b.origin("A").AppliedSeq
	moreWANBatches(t, ws, 5, "during the partition")
	if got := b.origin("A").AppliedSeq; got > before {
		t.Errorf("B applied A up to %d during a partition of A's direction (from %d)", got, before)
	}
	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}
	moreWANBatches(t, ws, 5, "after the heal")
	stop()
	settled(t, 60*time.Second, ws, a, b)
}

// TestWANThrottledLink: one link limited to 1 MB/s (1024 KB/s, both ways) carries what A
// wrote while B was away: 1 MiB of small records in 64-record entries, then one
// transaction of 6 MiB (six 1 MiB values), whose one message takes longer than the
// liveness timeout (5 s) and the stall timeout (3 s) to arrive. B takes them in no less
// than the limit allows and then holds exactly A's records; B's own writes reach A over
// the same link meanwhile. Before messages were capped at 256 KiB nothing arrived at all
// (each message of the whole send buffer outlasted the stall timeout and was asked for
// again); before the reader told the replica of a message still arriving, the 6 MiB one
// never did (the liveness timeout closed the link under it, at every redial).
func TestWANThrottledLink(t *testing.T) {
	const (
		rateKB  = 1024
		records = 1024
		bigKeys = 6
	)
	w := newWAN(t)
	a, b := serve(t, "A"), serve(t, "B")
	small, big := strings.Repeat("v", 1<<10), strings.Repeat("V", 1<<20)
	client := &http.Client{Timeout: time.Minute}
	for i := 0; i < records; i += 64 {
		var ops []op
		for j := i; j < min(i+64, records); j++ {
			ops = append(ops, put(fmt.Sprintf("big-%05d", j), small))
		}
		if code, err := a.postBatch(client, ops); code != http.StatusOK {
			t.Fatalf("loading A: %d %v", code, err)
		}
	}
	var ops []op
	for j := range bigKeys {
		ops = append(ops, put(fmt.Sprintf("big-M%d", j), big))
	}
	if code, err := a.postBatch(client, ops); code != http.StatusOK {
		t.Fatalf("the 6 MiB transaction: %d %v", code, err)
	}
	l := w.link(b, a)
	toxic(t, "throttle", faultnet.Bandwidth(rateKB), []*wanLink{l})
	start := time.Now()
	ws, stop := startWANWriters(50*time.Millisecond, b)
	defer stop()
	head := a.origin("A").AppliedSeq
	waitFor(t, "B took A's records over 1 MB/s", 60*time.Second, func() bool { return b.origin("A").AppliedSeq == head })
	took := time.Since(start)
	stop()
	settled(t, 60*time.Second, ws, a, b)
	bytes := float64(records<<10 + bigKeys<<20)
	if min := time.Duration(bytes / (rateKB << 10) * 0.9 * float64(time.Second)); took < min {
		t.Errorf("B took %.0f KiB over a 1 MB/s link in %s, less than the limit allows (%s)", bytes/1024, ms(took), ms(min))
	}
	if got := b.listAll("big-"); len(got) != records+bigKeys {
		t.Errorf("B holds %d of A's %d records", len(got), records+bigKeys)
	}
	if v, _ := b.record("big-M5"); v != big {
		t.Errorf("B's big-M5 holds %d bytes, want A's %d", len(v), len(big))
	}
	var reconnects uint64
	for _, pd := range b.status().Peers {
		reconnects += pd.Reconnects
	}
	t.Logf("7 MiB (one transaction of 6 MiB) over a 1 MB/s link in %s: %.2f MB/s of record values; %d redials, %d gaps",
		ms(took), bytes/took.Seconds()/(1<<20), reconnects, b.status().Counters.GapsDetected)
}

// TestWANResettingLink: a link whose every connection is reset 2 s after its first byte,
// under writes on both sides, for 10 s: the dialer redials each time (reconnects counted),
// and nothing is lost or received twice.
func TestWANResettingLink(t *testing.T) {
	w := newWAN(t)
	a, b := serve(t, "A"), serve(t, "B")
	l := w.link(a, b)
	toxic(t, "flaky", faultnet.Reset(2000), []*wanLink{l})
	toxic(t, "lazy-close", faultnet.SlowClose(200), []*wanLink{l})
	ws, stop := startWANWriters(20*time.Millisecond, a, b)
	defer stop()
	start := time.Now()
	waitFor(t, "10 s of resets", 20*time.Second, func() bool { return time.Since(start) >= 10*time.Second })
	if err := l.Remove("flaky"); err != nil {
		t.Fatal(err)
	}
	moreWANBatches(t, ws, 5, "after the resets stopped")
	stop()
	settled(t, 60*time.Second, ws, a, b)
	var reconnects uint64
	for _, pd := range a.status().Peers {
		reconnects += pd.Reconnects
	}
	if reconnects < 2 {
		t.Errorf("A redialed %d times in 10 s of a link reset every 2 s", reconnects)
	}
	t.Logf("A redialed %d times; %d + %d batches", reconnects, ws[0].acked.Load(), ws[1].acked.Load())
}

// TestWANLongLinkThroughput measures one origin's throughput over a link with an 80 ms
// round trip (40 ms each way), with the default credit windows, against the same link with
// no latency in the same run: 32 MiB of records A wrote while B was away, taken by B in
// 256-record entries, timed from B's first applied entry to its last. The bandwidth-delay product is the throughput times the round trip;
// a channel window below it would starve the link. BENCHMARKS.md records the figures; the
// test asserts what B holds.
func TestWANLongLinkThroughput(t *testing.T) {
	const (
		records  = 32 << 10
		perEntry = 256
	)
	value := strings.Repeat("v", 1<<10)
	for _, c := range []struct {
		name      string
		latencyMs int64
	}{{"no latency", 0}, {"80 ms round trip", 40}} {
		t.Run(c.name, func(t *testing.T) {
			w := newWAN(t)
			a, b := serve(t, "A"), serve(t, "B")
			client := &http.Client{Timeout: time.Minute}
			for i := 0; i < records; i += perEntry {
				var ops []op
				for j := i; j < i+perEntry; j++ {
					ops = append(ops, put(fmt.Sprintf("big-%05d", j), value))
				}
				if code, err := a.postBatch(client, ops); code != http.StatusOK {
					t.Fatalf("loading A: %d %v", code, err)
				}
			}
			head := a.origin("A").AppliedSeq
			var l *wanLink
			if c.latencyMs > 0 {
				// The toxic is on the proxy before B's first dial: every byte of the link
				// is delayed, the handshake's too.
				var err error
				pl, err := w.net.Link("B>A", "127.0.0.1", listenAddr(a))
				if err != nil {
					t.Fatal(err)
				}
				l = &wanLink{b, a, pl}
				toxic(t, "wan", faultnet.Latency(c.latencyMs, 0), []*wanLink{l})
				b.addPeerAt("A", "ws://"+pl.Addr)
			} else {
				l = w.link(b, a)
			}
			// From B's first applied entry to its last: the stream, without the handshake's
			// round trips before it.
			var first uint64
			if err := cluster.WaitEvery("B applying A", time.Minute, 2*time.Millisecond, func() bool {
				first = b.origin("A").AppliedSeq
				return first > 0
			}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := cluster.WaitEvery("B took A's records", 2*time.Minute, 2*time.Millisecond, func() bool { return b.origin("A").AppliedSeq == head }); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			if got := b.listAll("big-"); len(got) != records {
				t.Errorf("B holds %d of A's %d records", len(got), records)
			}
			if da, db := a.digest("t"), b.digest("t"); da != db {
				t.Errorf("digests differ: A %s, B %s", da, db)
			}
			var rtt float64
			for _, pd := range b.status().Peers {
				rtt = pd.RTTMs
			}
			mib := float64(head-first) * perEntry / 1024
			mbs := mib / took.Seconds()
			t.Logf("%s: %.1f MiB of record values (entries %d to %d) in %s: %.1f MiB/s; last RTT %.1f ms; bandwidth-delay product at 80 ms %.2f MiB (channel window 16 MiB)",
				c.name, mib, first+1, head, ms(took), mbs, rtt, mbs*0.080)
		})
	}
}
