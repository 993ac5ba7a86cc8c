//go:build multiprocess || scale

package multiprocess

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"plait/internal/cluster"
	"plait/protocol/store"
	"plait/shells/native/rocksstore"
)

// placeBound bounds every wait of the placement test: a map spreads in milliseconds, a fill
// waits at most a CopyRetry (2 s) for a carrier that can serve it, and a removal asks
// every PlacementPoll (1 s); the bound only ends a test whose cluster never gets there.
const placeBound = 20 * time.Second

// placedMap is a cluster map of generation gen listing names, with placement (each table's
// carriers; nil: none).
func placedMap(gen uint64, names []string, placement map[string][]string) string {
	type node struct {
		Name string `json:"name"`
	}
	doc := struct {
		Generation uint64              `json:"generation"`
		Nodes      []node              `json:"nodes"`
		Placement  map[string][]string `json:"placement,omitempty"`
	}{Generation: gen, Placement: placement}
	for _, n := range names {
		doc.Nodes = append(doc.Nodes, node{n})
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

// apiAnswer is one answer of the table API: its status, the Plait-Forwarded-By header
// ("" when the node answered itself) and its body.
type apiAnswer struct {
	status      int
	forwardedBy string
	body        string
}

// call sends one request to the node's API; a request that gets no answer is status 0,
// its error in the body. Safe from any goroutine.
func (p *proc) call(method, path, body string) apiAnswer {
	req, _ := http.NewRequest(method, "http://"+p.HTTP+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return apiAnswer{body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return apiAnswer{resp.StatusCode, resp.Header.Get("Plait-Forwarded-By"), string(b)}
}

// writeAnswer is a write's 200 body: the carrier's origin when the write was forwarded.
type writeAnswer struct {
	Origin    string `json:"origin"`
	OriginSeq uint64 `json:"origin_seq"`
}

// digestDoc is GET /v1/tables/{t}/digest's answer.
type digestDoc struct {
	Count uint64 `json:"count"`
	Hash  string `json:"hash"`
}

// tableDigest is the node's digest of table, and who forwarded it ("" when the node
// answered from its own records).
func (p *proc) tableDigest(table string) (digestDoc, string) {
	p.t.Helper()
	a := p.call("GET", "/v1/tables/"+table+"/digest", "")
	var d digestDoc
	if a.status != 200 || json.Unmarshal([]byte(a.body), &d) != nil {
		p.t.Fatalf("%s: digest of %s: %d %s", p.Name, table, a.status, a.body)
	}
	return d, a.forwardedBy
}

// storedRecords opens the stopped node's data directory and counts the records of table
// it holds: every record, tombstones included, and the live ones.
func (p *proc) storedRecords(table string) (all, live int) {
	p.t.Helper()
	s, err := rocksstore.Open(p.DataDir, store.Identity{}, rocksstore.Options{})
	if err != nil {
		p.t.Fatalf("opening %s's data directory: %v", p.Name, err)
	}
	defer s.Close()
	if err := s.Scan([]byte(table), nil, func(r store.Record) bool {
		all++
		if !r.Deleted {
			live++
		}
		return true
	}); err != nil {
		p.t.Fatalf("scanning %s in %s's data directory: %v", table, p.Name, err)
	}
	return all, live
}

// TestPlacement: five nodes A..E in a mesh, every node dialing each one started before it,
// so that the carriers of every table reach one another through carriers (docs/contract.md
// §23.3). Generation 1 places orders on A and B and stock on C, D and E; t is unplaced.
//
//   - Writes (PUT and DELETE) through every node of every table: a node that does not carry
//     the table forwards them (§23.4): Plait-Forwarded-By names it, and the answer's origin
//     is a carrier; a carrier answers itself. Once the carriers agree, every node answers
//     the same digest, listing and record of every table, and the forwards are counted
//     where they start and where they are served.
//   - Generation 2 adds C to orders while writes of orders go on through every node: C's
//     filling empties, tables_filled and fill_records count the fill, and C's own orders
//     (read with no forward) equal A's.
//   - Generation 3 drops B from orders, the writes still going: B's removals empty, and
//     tables_removed and records_freed count it. Every acknowledged write reads back
//     through every node.
//   - Stopped, every data directory (read through rocksstore) holds exactly the placed
//     tables its node carries: none of orders on B, D and E, none of stock on A and B, and
//     the carriers' records equal the digests' counts; plait check passes on each but B,
//     whose check is skipped for the defect its subtest names.
//
// The nodes run no anti-entropy passes, which would bring C what its fill failed to copy.
func TestPlacement(t *testing.T) {
	start := time.Now()
	names := []string{"A", "B", "C", "D", "E"}
	var nodes []*proc
	byName := map[string]*proc{}
	for _, name := range names {
		// No anti-entropy passes: they would bring an added node the records its fill
		// failed to copy, and the fill is what is proved.
		args := []string{"--antientropy-interval", "0"}
		for _, q := range nodes {
			args = append(args, "--peer", q.PeerFlag())
		}
		p := serve(t, name, args...)
		nodes = append(nodes, p)
		byName[name] = p
	}
	a, b, c := nodes[0], nodes[1], nodes[2]
	waitFor(t, "the mesh of A..E connected", 30*time.Second, func() bool {
		for i, p := range nodes {
			for _, q := range nodes[:i] {
				if !p.connected(q.Name) {
					return false
				}
			}
		}
		return true
	})
	carriers := map[string][]string{"orders": {"A", "B"}, "stock": {"C", "D", "E"}}
	publish := func(gen uint64, on *proc) {
		on.publishMap(placedMap(gen, names, carriers))
		waitFor(t, fmt.Sprintf("A..E holding generation %d", gen), placeBound, func() bool { return allAt(gen, nodes...) })
	}
	publish(1, a)
	for _, p := range nodes {
		want := []string{}
		for _, table := range []string{"orders", "stock"} {
			if slices.Contains(carriers[table], p.Name) {
				want = append(want, table)
			}
		}
		if st := p.mapStatus(); st.Carried == nil || !slices.Equal(*st.Carried, want) {
			t.Fatalf("%s's cluster_map: %s, want carried %v", p.Name, p.mapJSON(), want)
		}
	}

	// Writes through every node. live counts each table's live records, forwarded the
	// requests each node sent to a carrier.
	tables := []string{"orders", "stock", "t"}
	live := map[string]int{}
	forwarded := map[string]uint64{}
	write := func(p *proc, method, table, key, value string) writeAnswer {
		t.Helper()
		ans := p.call(method, "/v1/tables/"+table+"/records/"+key, value)
		var w writeAnswer
		if ans.status != 200 || json.Unmarshal([]byte(ans.body), &w) != nil || w.OriginSeq == 0 {
			t.Fatalf("%s %s/%s through %s: %d %s", method, table, key, p.Name, ans.status, ans.body)
		}
		carried := carriers[table] == nil || slices.Contains(carriers[table], p.Name)
		switch {
		case carried && (ans.forwardedBy != "" || w.Origin != ""):
			t.Errorf("%s %s/%s through %s, a carrier: forwarded by %q, origin %q; want neither", method, table, key, p.Name, ans.forwardedBy, w.Origin)
		case !carried && (ans.forwardedBy != p.Name || !slices.Contains(carriers[table], w.Origin)):
			t.Errorf("%s %s/%s through %s: forwarded by %q, origin %q; want forwarded by %s to one of %v", method, table, key, p.Name, ans.forwardedBy, w.Origin, p.Name, carriers[table])
		}
		if !carried {
			forwarded[p.Name]++
		}
		return w
	}
	const perNode = 12
	for _, p := range nodes {
		for _, table := range tables {
			for i := range perNode {
				write(p, "PUT", table, fmt.Sprintf("%s-%02d", p.Name, i), fmt.Sprintf("%s %s %d", table, p.Name, i))
			}
			write(p, "DELETE", table, fmt.Sprintf("%s-%02d", p.Name, 0), "")
			live[table] += perNode - 1
		}
	}
	// The carriers of each table agree, each from its own records.
	converged := func(table string, want int, holders ...*proc) {
		t.Helper()
		var last []string
		if err := cluster.WaitEvery(fmt.Sprintf("the carriers of %s agreeing on %d records", table, want), placeBound, 50*time.Millisecond, func() bool {
			last = last[:0]
			first, _ := holders[0].tableDigest(table)
			for _, p := range holders {
				d, by := p.tableDigest(table)
				last = append(last, fmt.Sprintf("%s %d %s %q", p.Name, d.Count, d.Hash, by))
				if d != first || d.Count != uint64(want) || by != "" {
					return false
				}
			}
			return true
		}); err != nil {
			t.Fatalf("%v: %v", err, last)
		}
	}
	converged("orders", live["orders"], a, b)
	converged("stock", live["stock"], nodes[2:]...)
	converged("t", live["t"], nodes...)
	// Reads, listings and digests through every node answer the same.
	sameEverywhere := func(what string) {
		t.Helper()
		for _, table := range tables {
			for _, path := range []string{
				"/v1/tables/" + table + "/digest",
				"/v1/tables/" + table + "/records?limit=1000",
				"/v1/tables/" + table + "/records/C-03",
				"/v1/tables/" + table + "/records/E-00", // deleted: 404 everywhere
			} {
				var want apiAnswer
				for i, p := range nodes {
					got := p.call("GET", path, "")
					if i == 0 {
						want = got
					}
					if got.status != want.status || got.body != want.body {
						t.Errorf("%s: GET %s through %s: %d %.200s; through A: %d %.200s", what, path, p.Name, got.status, got.body, want.status, want.body)
					}
					if carriers[table] != nil && !slices.Contains(carriers[table], p.Name) {
						if got.forwardedBy != p.Name {
							t.Errorf("%s: GET %s through %s, not a carrier: forwarded by %q", what, path, p.Name, got.forwardedBy)
						}
						forwarded[p.Name]++
					}
				}
			}
		}
	}
	sameEverywhere("generation 1")
	var served uint64
	for _, p := range nodes {
		cs := p.status().Counters
		if cs.ForwardsAnswered != forwarded[p.Name] || cs.ForwardsNoCarrier != 0 || cs.ForwardsNotCarried != 0 {
			t.Errorf("%s's forwards answered, no-carrier, not-carried: %d, %d, %d; want %d, 0, 0", p.Name, cs.ForwardsAnswered, cs.ForwardsNoCarrier, cs.ForwardsNotCarried, forwarded[p.Name])
		}
		served += cs.ForwardsServed
		forwarded["all"] += forwarded[p.Name]
	}
	if served != forwarded["all"] {
		t.Errorf("the carriers served %d forwarded requests, the others sent %d", served, forwarded["all"])
	}

	// Writes of orders go on through every node, in turn, while C is added to orders and B
	// removed from it. A write refused not-carried (a forward met a carrier whose map had
	// not caught up, §23.4) is not acknowledged; every acknowledged one must read back.
	var (
		mu      sync.Mutex
		acked   = map[string]string{}
		refused int
		stop    = make(chan struct{})
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			p := nodes[i%len(nodes)]
			key, value := fmt.Sprintf("live-%04d", i), fmt.Sprintf("written through %s", p.Name)
			ans := p.call("PUT", "/v1/tables/orders/records/"+key, value)
			mu.Lock()
			switch {
			case ans.status == 200:
				acked[key] = value
			case ans.status == 409 && strings.Contains(ans.body, `"not-carried"`):
				refused++
			default:
				t.Errorf("PUT orders/%s through %s while placement changes: %d %s", key, p.Name, ans.status, ans.body)
			}
			mu.Unlock()
		}
	}()
	time.Sleep(300 * time.Millisecond) // some writes before the map changes

	carriers["orders"] = []string{"A", "B", "C"}
	publish(2, b)
	if err := cluster.WaitEvery("C filled orders", placeBound, 50*time.Millisecond, func() bool {
		st := c.status()
		return len(st.ClusterMap.Filling) == 0 && st.Counters.TablesFilled >= 1
	}); err != nil {
		t.Fatalf("%v: C's cluster_map %s, counters %+v", err, c.mapJSON(), c.status().Counters)
	}
	if cs := c.status().Counters; cs.FillRecords == 0 {
		t.Errorf("C's fill_records: 0 after filling orders from %d records", live["orders"])
	}
	time.Sleep(300 * time.Millisecond) // writes after the fill, which C takes whole

	carriers["orders"] = []string{"A", "C"}
	publish(3, c)
	if err := cluster.WaitEvery("B freed orders", placeBound, 50*time.Millisecond, func() bool {
		st := b.status()
		return len(st.ClusterMap.Removals) == 0 && st.Counters.TablesRemoved >= 1
	}); err != nil {
		t.Fatalf("%v: B's cluster_map %s, counters %+v", err, b.mapJSON(), b.status().Counters)
	}
	if cs := b.status().Counters; cs.RecordsFreed == 0 {
		t.Errorf("B's records_freed: 0 after removing orders")
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-done

	mu.Lock()
	t.Logf("%d writes of orders acknowledged while placement changed, %d refused not-carried", len(acked), refused)
	live["orders"] += len(acked)
	converged("orders", live["orders"], a, c)
	i := 0
	for key, value := range acked {
		p := nodes[i%len(nodes)]
		i++
		if got := p.call("GET", "/v1/tables/orders/records/"+key, ""); got.status != 200 || got.body != value {
			t.Errorf("orders/%s through %s: %d %q, want %q", key, p.Name, got.status, got.body, value)
		}
	}
	mu.Unlock()
	sameEverywhere("generation 3")
	for _, p := range nodes {
		if d, _ := p.tableDigest("orders"); d.Count != uint64(live["orders"]) {
			t.Errorf("orders through %s: %d records, want %d", p.Name, d.Count, live["orders"])
		}
	}

	// Stopped, each data directory holds the placed tables its node carries, and only them.
	for _, p := range nodes {
		p.stop()
	}
	for _, p := range nodes {
		for _, table := range tables {
			all, lv := p.storedRecords(table)
			carried := carriers[table] == nil || slices.Contains(carriers[table], p.Name)
			switch {
			case carried && lv != live[table]:
				t.Errorf("%s's data directory holds %d live records of %s (%d in all), want %d", p.Name, lv, table, all, live[table])
			case !carried && all != 0:
				t.Errorf("%s's data directory holds %d records of %s (%d live), which it does not carry", p.Name, all, table, lv)
			}
		}
		p.check() // under the placement of the map its data directory holds
	}
	t.Logf("TestPlacement took %.1f s", time.Since(start).Seconds())
}

// TestReceiveLink: a node started with --peer-mode NAME=receive takes the peer's writes and
// never sends its own back over that link (docs/contract.md §23.7), on the real binary.
func TestReceiveLink(t *testing.T) {
	a := serve(t, "A")
	b := serve(t, "B", "--peer", a.PeerFlag(), "--peer-mode", "A=receive")
	waitFor(t, "B connected to A", 30*time.Second, func() bool { return b.connected("A") })
	b.put("t", "from-b", "b") // first: were the link to carry it, it would reach A before A's write reaches B
	a.put("t", "from-a", "a")
	waitFor(t, "A's write on B", 30*time.Second, func() bool {
		code, _ := b.get("/v1/tables/t/records/from-a")
		return code == 200
	})
	if code, body := a.get("/v1/tables/t/records/from-b"); code != 404 {
		t.Errorf("A's t/from-b, written on B, which only receives from A: %d %s; want 404", code, body)
	}
	if o, ok := a.status().Origin("B"); ok && o.AppliedSeq > 0 {
		t.Errorf("A applied B's origin to seq %d over a link B only receives on", o.AppliedSeq)
	}
	for _, p := range b.status().Peers {
		if p.Name == "A" && p.Mode != "receive" {
			t.Errorf("B's peers[] A: mode %q, want receive", p.Mode)
		}
	}
}
