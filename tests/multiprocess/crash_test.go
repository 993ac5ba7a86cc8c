//go:build multiprocess || scale

package multiprocess

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// overlapping writes puts and deletes of a small key space on a node every few ms until
// stopped, so that two writers collide and deletes race puts.
func overlapping(p *proc, seed uint64, stop chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	rng := rand.New(rand.NewPCG(seed, seed))
	for {
		select {
		case <-stop:
			return
		case <-time.After(5 * time.Millisecond):
		}
		key := fmt.Sprint("k", rng.IntN(50))
		method, body := "PUT", fmt.Sprintf("%s-%d", p.Name, rng.Uint32())
		if rng.IntN(4) == 0 {
			method, body = "DELETE", ""
		}
		req, _ := http.NewRequest(method, "http://"+p.HTTP+"/v1/tables/t/records/"+key, strings.NewReader(body))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
}

// TestCrashSafety: three rounds of kill -9 on B while A and B write overlapping keys,
// deletes racing puts; B restarts on its data directory each time. Both converge to the
// same digest and plait check passes on both directories.
func TestCrashSafety(t *testing.T) {
	a := serve(t, "A")
	b := serve(t, "B", "--peer", a.PeerFlag())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go overlapping(a, 1, stop, &wg)
	go overlapping(b, 2, stop, &wg)
	for round := range 3 {
		before := b.origin("A").AppliedSeq
		waitFor(t, "B applying 20 more of A's writes", 30*time.Second, func() bool { return b.origin("A").AppliedSeq >= before+20 })
		b.kill()
		b.start()
		waitFor(t, fmt.Sprintf("B streaming again after kill %d", round+1), 30*time.Second, func() bool {
			return b.origin("A").AppliedSeq > 0
		})
	}
	close(stop)
	wg.Wait()
	waitFor(t, "A and B converging", 30*time.Second, func() bool {
		return a.origin("B").AppliedSeq == b.origin("B").AppliedSeq && b.origin("A").AppliedSeq == a.origin("A").AppliedSeq
	})
	if da, db := a.digest("t"), b.digest("t"); da != db {
		t.Errorf("digests differ: A %s, B %s", da, db)
	}
	for _, p := range []*proc{a, b} {
		p.stop()
		p.check()
	}
}
