//go:build multiprocess || scale

package multiprocess

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// writer writes to a node every 20 ms until stopped.
type writer struct {
	stop chan struct{}
	done sync.WaitGroup
}

func startWriters(t *testing.T, nodes ...*proc) *writer {
	w := &writer{stop: make(chan struct{})}
	for _, p := range nodes {
		w.done.Add(1)
		go func() {
			defer w.done.Done()
			for i := 0; ; i++ {
				select {
				case <-w.stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				req, _ := http.NewRequest("PUT", "http://"+p.HTTP+"/v1/tables/t/records/"+fmt.Sprintf("%s-%d", p.Name, i), strings.NewReader("v"))
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	return w
}

func (w *writer) halt() {
	close(w.stop)
	w.done.Wait()
}

// TestRelayFailover: C takes A through B while B2 also carries A, and takes D through B2.
// B is killed under continuous writes at A and D: A's channel on C moves onto B2, the
// connection already carrying D; C converges with duplicates_received unchanged; D's
// source_changes stays 0 and its applied seq advances during the outage.
func TestRelayFailover(t *testing.T) {
	a := serve(t, "A")
	b := serve(t, "B", "--peer", a.PeerFlag())
	b2 := serve(t, "B2", "--peer", a.PeerFlag())
	d := serve(t, "D", "--peer", b2.PeerFlag())
	c := serve(t, "C", "--peer", b.PeerFlag())
	relayFailover(t, a, b, b2, c, d, func(...*proc) {})
}

// relayFailover is TestRelayFailover on a cluster the caller started (B and B2 dialing A,
// D dialing B2, C dialing B): C also dials B2; B is killed under writes at A and D; A's
// channel on C moves onto B2 with duplicates unchanged, D's stays, every digest ends equal,
// and every data directory passes plait check. check sees the running nodes once the
// topology stands and again after the failover.
func relayFailover(t *testing.T, a, b, b2, c, d *proc, check func(running ...*proc)) {
	t.Helper()
	wa := startWriters(t, a)
	waitFor(t, "C taking A through B", 30*time.Second, func() bool {
		o := c.origin("A")
		return o.SourcePeer == "B" && o.AppliedSeq > 0
	})
	c.addPeer(b2)
	wd := startWriters(t, d)
	waitFor(t, "C taking D through B2", 30*time.Second, func() bool {
		o := c.origin("D")
		return o.SourcePeer == "B2" && o.AppliedSeq > 0
	})
	if o := c.origin("A"); o.SourcePeer != "B" {
		t.Fatalf("C moved A before the failover: %+v", o)
	}
	check(a, b, b2, c, d)
	dups := c.status().Counters.DuplicatesReceived

	b.kill() // kill -9 under writes
	before := c.origin("D").AppliedSeq
	waitFor(t, "D advancing on C during the outage", 30*time.Second, func() bool { return c.origin("D").AppliedSeq > before+10 })
	waitFor(t, "A moving onto B2", 30*time.Second, func() bool { return c.origin("A").SourcePeer == "B2" })
	wa.halt()
	wd.halt()
	waitFor(t, "C converging", 30*time.Second, func() bool {
		return c.origin("A").AppliedSeq == a.origin("A").AppliedSeq && c.origin("D").AppliedSeq == d.origin("D").AppliedSeq
	})
	if o := c.origin("A"); o.SourceChanges != 1 || o.LagSeq != 0 {
		t.Errorf("C's status of A: %+v, want one source change, lag 0", o)
	}
	if o := c.origin("D"); o.SourceChanges != 0 || o.SourcePeer != "B2" {
		t.Errorf("C's status of D: %+v, want B2 and no change", o)
	}
	if got := c.status().Counters.DuplicatesReceived; got != dups {
		t.Errorf("C's duplicates went from %d to %d across the failover", dups, got)
	}
	for _, p := range []*proc{a, b2, c, d} {
		if p.digest("t") != a.digest("t") {
			t.Errorf("%s's digest differs from A's", p.Name)
		}
	}
	check(a, b2, c, d)
	for _, p := range []*proc{a, b2, c, d} {
		p.stop()
	}
	for _, p := range []*proc{a, b, b2, c, d} { // B's directory too: it was killed
		p.check()
	}
}
