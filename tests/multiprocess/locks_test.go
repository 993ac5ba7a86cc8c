//go:build multiprocess || scale

package multiprocess

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"plait/client"
	"plait/internal/faultnet"
	"plait/protocol/clustermap"
)

// lockFlags keep a lock test short: a lease of at most 2 s and a clock bound of 100 ms
// make a home's restart quarantine about 2.1 s (docs/design.md §25.5); a read under a
// token waits at most 2 s for its fence.
var lockFlags = []string{"--lock-max-ttl", "2s", "--max-clock-offset", "100ms", "--lock-fence-wait", "2s"}

// lockClient is the HTTP client of the lock tests: a request to a killed node fails at
// once (connection refused), one to a stopped node when the timeout ends it, which is
// above the request exchange's deadline (5 s) so that its 504 arrives first.
var lockClient = &http.Client{Timeout: 8 * time.Second}

// lockAnswer is one answer of a node: the status, the error's code (when it is one) and
// the body; err is the transport's failure (connection refused, a timeout).
type lockAnswer struct {
	status int
	code   string
	body   string
	header http.Header
	err    error
}

func (a lockAnswer) String() string {
	if a.err != nil {
		return a.err.Error()
	}
	return strconv.Itoa(a.status) + " " + strings.TrimSpace(a.body)
}

// lockCall sends method path with body (none when empty) and the Plait-Lock token (none when
// empty) to p.
func (p *proc) lockCall(method, path, body, token string) lockAnswer {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+p.HTTP+path, rd)
	if err != nil {
		return lockAnswer{err: err}
	}
	if token != "" {
		req.Header.Set("Plait-Lock", token)
	}
	resp, err := lockClient.Do(req)
	if err != nil {
		return lockAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	a := lockAnswer{status: resp.StatusCode, body: string(b), header: resp.Header, err: err}
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if resp.StatusCode >= 400 && json.Unmarshal(b, &e) == nil {
		a.code = e.Error.Code
	}
	return a
}

// lockMap is a map of generation gen listing names, every one a lock home, fencing the
// tables fenced.
func lockMap(gen uint64, names []string, fenced ...string) string {
	var nodes []string
	for _, n := range names {
		nodes = append(nodes, fmt.Sprintf(`{"name":%q}`, n))
	}
	homes, _ := json.Marshal(names)
	doc := fmt.Sprintf(`{"generation":%d,"nodes":[%s],"lock_homes":%s`, gen, strings.Join(nodes, ","), homes)
	if len(fenced) > 0 {
		f, _ := json.Marshal(fenced)
		doc += `,"fenced_tables":` + string(f)
	}
	return doc + "}"
}

// publishWhenV4 publishes doc on p once p knows every member to speak version 4 (until
// then a map that turns locks on is refused cluster-not-v4).
func (p *proc) publishWhenV4(doc string) {
	p.t.Helper()
	waitFor(p.t, "publishing the lock map on "+p.Name, mapBound, func() bool {
		_, err := p.api(client.WithMaxAttempts(1)).PutClusterMap(context.Background(), []byte(doc))
		if err != nil && !errors.Is(err, client.ErrClusterNotV4) {
			p.t.Fatalf("publishing %s on %s: %v", doc, p.Name, err)
		}
		return err == nil
	})
}

// lockTriangle starts A, B and C with the lock flags and extra, each dialing those started
// before it, and waits until every pair is connected.
func lockTriangle(t *testing.T, extra ...string) []*proc {
	t.Helper()
	flags := append(slices.Clone(lockFlags), extra...)
	a := serve(t, "A", flags...)
	b := serve(t, "B", append(slices.Clone(flags), "--peer", a.PeerFlag())...)
	c := serve(t, "C", append(slices.Clone(flags), "--peer", a.PeerFlag(), "--peer", b.PeerFlag())...)
	nodes := []*proc{a, b, c}
	waitFor(t, "the triangle connected", 30*time.Second, func() bool {
		return a.connected("B") && a.connected("C") && b.connected("C")
	})
	return nodes
}

// slowTriangle starts A, B and C with the lock flags: C dials B; A dials C with the table
// slow excluded from their link (both ways), and B through a proxy that delays every chunk
// by ms milliseconds each way. So A applies what B and C write to slow ms late (through
// B), and they what A writes, while A's requests to C and C's answers travel at once: a
// read on A under a lease C granted right after a write elsewhere sees the record's
// earlier value unless it waits for the lease's fence, and a write on A reaches C, the
// home, ms late, so C's next grant leaves it out unless its confirm waited for it. A is
// never the one killed: it dials, and redials a restarted B or C.
func slowTriangle(t *testing.T, slow string, ms int64) []*proc {
	t.Helper()
	b := serve(t, "B", lockFlags...)
	c := serve(t, "C", append(slices.Clone(lockFlags), "--peer", b.PeerFlag())...)
	a := serve(t, "A", append(slices.Clone(lockFlags), "--peer", c.PeerFlag(), "--peer-exclude", "C="+slow)...)
	w := newWAN(t)
	toxic(t, "slow", faultnet.Latency(ms, 0), []*wanLink{w.link(a, b)})
	nodes := []*proc{a, b, c}
	waitFor(t, "the triangle connected", 30*time.Second, func() bool {
		return a.connected("B") && a.connected("C") && b.connected("C")
	})
	return nodes
}

// counterLedger is what the clients of TestLockedCounterUnderHomeKill were told, per key:
// the values of the writes acknowledged, and those of the writes that failed after they
// may have been written (an error after the write was sent: such a write is never
// acknowledged, and may still land, docs/design.md §25.1 and §25.6).
type counterLedger struct {
	mu        sync.Mutex
	acked     map[string][]int
	ambiguous map[string][]int
	refused   map[string]int // failures by code (or "transport"), for the log
}

func (l *counterLedger) note(key string, v int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok {
		l.acked[key] = append(l.acked[key], v)
	} else {
		l.ambiguous[key] = append(l.ambiguous[key], v)
	}
}

func (l *counterLedger) refusal(a lockAnswer) {
	code := a.code
	switch {
	case a.err != nil:
		code = "transport"
	case code == "":
		code = strconv.Itoa(a.status)
	}
	l.mu.Lock()
	l.refused[code]++
	l.mu.Unlock()
}

func (l *counterLedger) ackedOf(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked[key])
}

// counterRound is one client's round on key: a lease acquired through one node, the
// counter read under it through another, counter+1 written under it through a third, and
// the lease released; each node drawn at random, any of them possibly down.
func counterRound(nodes []*proc, key string, rng *rand.Rand, l *counterLedger) {
	pick := func() *proc { return nodes[rng.IntN(len(nodes))] }
	lockPath, recPath := "/v1/tables/ctr/locks/"+key, "/v1/tables/ctr/records/"+key
	got := pick().lockCall("POST", lockPath, `{"ttl_ms":2000,"wait_ms":500}`, "")
	if got.err != nil || got.status != 200 {
		l.refusal(got)
		time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond)
		return
	}
	var g struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(got.body), &g); err != nil || len(g.Token) != 80 {
		l.refusal(lockAnswer{status: -1})
		return
	}
	defer pick().lockCall("DELETE", lockPath, "", g.Token)
	read := pick().lockCall("GET", recPath, "", g.Token)
	v := 0
	switch {
	case read.err == nil && read.status == 404:
	case read.err == nil && read.status == 200:
		n, err := strconv.Atoi(read.body)
		if err != nil {
			l.refusal(lockAnswer{status: -2})
			return
		}
		v = n
	default:
		l.refusal(read)
		return
	}
	w := pick().lockCall("PUT", recPath, strconv.Itoa(v+1), g.Token)
	if w.err != nil || w.status != 200 {
		l.refusal(w)
	}
	l.note(key, v+1, w.err == nil && w.status == 200)
}

// TestLockedCounterUnderHomeKill: three nodes, each a lock home, the table ctr fenced.
// Clients increment counters under locks (acquire, read under the token, write +1 under
// it, release; each step through a node drawn at random), while the home of some keys is
// killed (kill -9) and restarted on its data. An error is not an acknowledgement; the
// client goes on. At the end every node holds the same table (equal digests) and, for
// every key, a counter that no acknowledged increment is missing from: no value was
// acknowledged twice (a lost update writes the value another wrote), every acknowledged
// value is at most the counter, and every value up to the counter was written by an
// acknowledged increment or by one that failed after it may have been written (which may
// land: docs/design.md §25.6). With no such failure the counter equals the acknowledged
// increments.
func TestLockedCounterUnderHomeKill(t *testing.T) {
	nodes := slowTriangle(t, "ctr", 30)
	names := []string{"A", "B", "C"}
	doc := lockMap(1, names, "ctr")
	nodes[0].publishWhenV4(doc)
	waitFor(t, "every node holding the lock map", mapBound, func() bool { return allAt(1, nodes...) })

	m, perr := clustermap.Parse([]byte(doc))
	if perr != nil {
		t.Fatal(perr)
	}
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
	homed := map[string][]string{}
	for _, k := range keys {
		h := m.Home([]byte("ctr"), []byte(k))
		homed[h] = append(homed[h], k)
	}
	// C is killed: A takes B's and C's writes late through B, and its requests to C
	// travel at once, so C's keys are those a read on A can see stale, and those whose
	// home takes A's writes late.
	victim := nodes[2]
	t.Logf("homes: %v; the victim is %s", homed, victim.Name)
	if n := len(homed[victim.Name]); n == 0 || n == len(keys) {
		t.Fatalf("%s homes %d of the %d keys: the test needs keys homed on it and elsewhere", victim.Name, n, len(keys))
	}

	l := &counterLedger{acked: map[string][]int{}, ambiguous: map[string][]int{}, refused: map[string]int{}}
	var stop atomic.Bool
	var wg sync.WaitGroup
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const clients = 6
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			for !stop.Load() {
				counterRound(nodes, keys[rng.IntN(len(keys))], rng, l)
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()

	total := func(ks []string) int {
		n := 0
		for _, k := range ks {
			n += l.ackedOf(k)
		}
		return n
	}
	// The homes' first quarantine ends about 2.1 s after they adopted the map.
	waitFor(t, "an acknowledged increment of every key", 20*time.Second, func() bool {
		for _, k := range keys {
			if l.ackedOf(k) == 0 {
				return false
			}
		}
		return true
	})
	var others []string
	for _, k := range keys {
		if !slices.Contains(homed[victim.Name], k) {
			others = append(others, k)
		}
	}
	time.Sleep(500 * time.Millisecond)
	victim.kill()
	killed, othersAtKill, victimsAtKill := time.Now(), total(others), total(homed[victim.Name])
	waitFor(t, "increments of keys homed elsewhere while "+victim.Name+" is down", 10*time.Second, func() bool {
		return total(others) >= othersAtKill+5 && time.Since(killed) > time.Second
	})
	victim.start()
	restarted, victimsAtRestart := time.Now(), total(homed[victim.Name])
	waitFor(t, "increments of the keys "+victim.Name+" homes after its restart", 20*time.Second, func() bool {
		for _, k := range homed[victim.Name] {
			if l.ackedOf(k) == 0 {
				return false
			}
		}
		return total(homed[victim.Name]) >= victimsAtRestart+2*len(homed[victim.Name])
	})
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	t.Logf("down %v, back to granting after %v; acknowledged: %d of the victim's keys before the kill, %d after the restart; refusals %v",
		restarted.Sub(killed).Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond), victimsAtKill,
		total(homed[victim.Name])-victimsAtRestart, l.refused)

	waitFor(t, "every node holding the same ctr", 20*time.Second, func() bool {
		d := nodes[0].digest("ctr")
		return nodes[1].digest("ctr") == d && nodes[2].digest("ctr") == d
	})
	for _, k := range keys {
		acked, ambiguous := l.acked[k], l.ambiguous[k]
		counter := 0
		for _, p := range nodes {
			status, body := p.get("/v1/tables/ctr/records/" + k)
			if status != 200 {
				t.Fatalf("%s: reading %s: %d %s", p.Name, k, status, body)
			}
			n, err := strconv.Atoi(body)
			if err != nil {
				t.Fatalf("%s: %s holds %q", p.Name, k, body)
			}
			if p != nodes[0] && n != counter {
				t.Errorf("%s holds %s = %d, %s holds %d", p.Name, k, n, nodes[0].Name, counter)
			}
			counter = n
		}
		if err := checkCounter(counter, acked, ambiguous); err != nil {
			t.Errorf("key %s (home %s): %v", k, m.Home([]byte("ctr"), []byte(k)), err)
		}
		t.Logf("key %s: counter %d, %d acknowledged, %d failed after writing", k, counter, len(acked), len(ambiguous))
	}
}

// checkCounter checks a key's final counter against the values its increments wrote:
// acknowledged ones and ones whose write failed after it may have been written.
func checkCounter(counter int, acked, ambiguous []int) error {
	seen := map[int]bool{}
	for _, v := range acked {
		if seen[v] {
			return fmt.Errorf("the value %d was acknowledged twice: an acknowledged increment was lost (counter %d, %d acknowledged)", v, counter, len(acked))
		}
		seen[v] = true
		if v > counter {
			return fmt.Errorf("the counter is %d, below the acknowledged value %d (%d acknowledged)", counter, v, len(acked))
		}
	}
	for v := 1; v <= counter; v++ {
		if !seen[v] && !slices.Contains(ambiguous, v) {
			return fmt.Errorf("the counter %d holds an increment to %d that no client wrote", counter, v)
		}
	}
	if counter < len(acked) {
		return errors.New("the counter is below its acknowledged increments")
	}
	return nil
}
