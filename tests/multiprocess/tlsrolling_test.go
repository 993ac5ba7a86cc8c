//go:build multiprocess || scale

package multiprocess

import (
	"slices"
	"strings"
	"testing"
	"time"

	"plait/protocol/handshake"
)

// TestRollingMoveToTLS: a cluster of three plaintext nodes with a cluster secret (B dials
// A; C dials A and B) moves to mutual TLS one restart at a time, every node writing
// throughout, in three rounds:
//
//  1. each node in turn restarts with its certificate (--tls-cert, --tls-key, --tls-ca)
//     and --tls-accept-plaintext, its --peer URLs still ws://: it serves wss:// beside
//     ws:// on its one listener, and its links stay plaintext;
//  2. each node that dials peers restarts with their wss:// URLs: its links move to TLS,
//     which its peers accept since round 1;
//  3. each node restarts without --tls-accept-plaintext: it serves and dials wss:// only.
//
// After each restart every link is up again and the restarted node's writer goes on; after
// round 1 no link is TLS yet, after a node's round-2 restart its dialed links are, and
// after round 3 every node shows node.tls.accept_plaintext false and every link bound to
// its TLS channel (tls-exporter). At the end the digests are equal, every acknowledged
// write reads back on every node with its acknowledged value, no node received a
// duplicate in any of its runs, and plait check passes.
func TestRollingMoveToTLS(t *testing.T) {
	dir := newCerts(t, "A", "B", "C")
	a := serveSecret(t, "A", secret)
	b := serveSecret(t, "B", secret, "--peer", "A="+wsURL(a))
	c := serveSecret(t, "C", secret, "--peer", "A="+wsURL(a), "--peer", "B="+wsURL(b))
	nodes := []*proc{a, b, c}
	dials := map[*proc][]*proc{b: {a}, c: {a, b}}
	peerFlags := func(p *proc, scheme string) []string {
		var f []string
		for _, q := range dials[p] {
			f = append(f, "--peer", q.Name+"="+scheme+"://"+listenAddr(q))
		}
		return f
	}
	linksUp := func() bool {
		for _, p := range nodes {
			st := p.status()
			for _, q := range nodes {
				if q != p && !st.Connected(q.Name) {
					return false
				}
			}
		}
		return true
	}
	waitFor(t, "the three links up", 30*time.Second, linksUp)

	writers, stopWriters := startCopyWriters(t, 1_000_000, a, b, c)
	defer stopWriters()
	writerOf := map[*proc]*copyWriter{a: writers[0], b: writers[1], c: writers[2]}
	var dups uint64 // duplicates_received over every run of every node
	restart := func(round int, p *proc, args []string) {
		t.Helper()
		began := time.Now()
		dups += p.status().Counters.DuplicatesReceived
		p.stop()
		p.args = args
		p.start()
		waitFor(t, p.Name+"'s links up again", 30*time.Second, linksUp)
		w, n := writerOf[p], writerOf[p].batches.Load()
		waitFor(t, p.Name+" writing again", 30*time.Second, func() bool { return w.batches.Load() >= n+10 })
		t.Logf("round %d: %s restarted with %s; its links and writes back in %v", round, p.Name,
			strings.ReplaceAll(strings.Join(args, " "), dir+"/", ""), time.Since(began).Round(time.Millisecond))
	}

	// Round 1: certificates, plaintext still served and dialed.
	for _, p := range nodes {
		restart(1, p, append(tlsFlags(dir, p.Name), append([]string{"--tls-accept-plaintext"}, peerFlags(p, "ws")...)...))
		if ts := p.status().Node.TLS; ts == nil || !ts.AcceptPlaintext || ts.NodeName != p.Name {
			t.Fatalf("%s after round 1: node.tls %+v", p.Name, ts)
		}
	}
	for _, p := range nodes {
		for _, d := range p.status().Peers {
			if slices.Contains(d.Capabilities, handshake.CapTLSExporter) {
				t.Errorf("%s after round 1: the link of %s is TLS already, with ws:// URLs only: %+v", p.Name, d.Name, d)
			}
		}
	}

	// Round 2: the dialers' URLs to wss://.
	for _, p := range []*proc{b, c} {
		restart(2, p, append(tlsFlags(dir, p.Name), append([]string{"--tls-accept-plaintext"}, peerFlags(p, "wss")...)...))
		var names []string
		for _, q := range dials[p] {
			names = append(names, q.Name)
		}
		waitFor(t, p.Name+"'s dialed links over TLS", 10*time.Second, func() bool { return streamingTLS(p, names...) })
	}

	// Round 3: TLS only.
	for _, p := range nodes {
		restart(3, p, append(tlsFlags(dir, p.Name), peerFlags(p, "wss")...))
	}

	moreBatches(t, writers, 10, "after the move")
	stopWriters()
	waitFor(t, "A, B and C converged", time.Minute, func() bool { return converged(nodes...) })
	for _, p := range nodes {
		st := p.status()
		if ts := st.Node.TLS; ts == nil || ts.AcceptPlaintext {
			t.Errorf("%s: node.tls %+v at the end; want TLS only", p.Name, ts)
		}
		if !st.Node.Authenticated {
			t.Errorf("%s: not authenticated", p.Name)
		}
		if links := tlsLinks(t, p); links != 2 {
			t.Errorf("%s: %d streaming links at the end, want 2", p.Name, links)
		}
		for _, d := range st.Peers {
			if d.URL != "" && !strings.HasPrefix(d.URL, "wss://") {
				t.Errorf("%s: peer %s still dialed at %s", p.Name, d.Name, d.URL)
			}
		}
		dups += st.Counters.DuplicatesReceived
	}
	if dups != 0 {
		t.Errorf("%d duplicates received over the move", dups)
	}
	everyWriteEverywhere(t, writers, nodes...)
	for _, w := range writers {
		t.Logf("%s: %d batches acknowledged (the slowest in %v), %d unanswered (its restarts)", w.p.Name, w.batches.Load(),
			w.slowest.Round(time.Millisecond), w.failed.Load())
	}
	for _, p := range nodes {
		p.stop()
		p.check()
	}
}
