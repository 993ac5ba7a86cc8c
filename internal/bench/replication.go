package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"plait/internal/cluster"
	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/node"
)

// benchSecret is the cluster secret of plait bench's nodes.
const benchSecret = "plait bench secret of 32 bytes.."

// benchBound is the longest any measure may take.
const benchBound = 10 * time.Minute

// pollEvery is how often a measure looks whether its records arrived: the catch-up
// times are read to within it.
const pollEvery = 2 * time.Millisecond

// startNode starts a node of this process in dir/name that dials peers; serveHTTP also
// serves its HTTP API.
func (c *run) startNode(dir, name string, serveHTTP bool, peers ...*cluster.Node) (*cluster.Node, error) {
	var dial []node.Peer
	for _, p := range peers {
		dial = append(dial, p.Peer())
	}
	return cluster.StartLocal(node.Config{Name: name, DataDir: filepath.Join(dir, name), Peers: dial, Sync: c.Sync, Config: replica.Config{Secret: []byte(benchSecret), Locks: c.locks}}, serveHTTP)
}

// stop stops a measure's node once the measure is done (or failed): how the node stops
// no longer changes a result, and a failed measure's error is the one to report.
func stop(n *cluster.Node) { _ = n.Stop() }

// hasAll reports whether n applied every origin up to its seq.
func hasAll(n *cluster.Node, want map[string]uint64) bool {
	st, err := n.Status()
	if err != nil {
		return false // stopping; the wait's bound reports it
	}
	for name, seq := range want {
		if o, _ := st.Origin(name); o.AppliedSeq < seq {
			return false
		}
	}
	return true
}

// connected reports whether n streams with every one of peers.
func connected(n *cluster.Node, peers ...*cluster.Node) bool {
	st, err := n.Status()
	return err == nil && !slices.ContainsFunc(peers, func(p *cluster.Node) bool { return !st.Connected(p.Name) })
}

// via is how a measure writes its records on a node.
type via int

const (
	viaAPI  via = iota // the Go API, node.Write
	viaJSON            // POST /v1/tables/t/batch as application/json
	viaCBOR            // the same batches as application/cbor (docs/contract.md §6.2)
)

// http reports whether the records go through the node's HTTP API, which it must serve.
func (v via) http() bool { return v != viaAPI }

// writeRecords writes count records with keys from first on n, PerTxn to a transaction,
// from writers concurrent writers, through the Go API or as HTTP batches. It returns the
// number of transactions.
func (c *run) writeRecords(n *cluster.Node, first, count, writers int, how via) (uint64, error) {
	txns := count / c.PerTxn
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: writers}}
	defer client.CloseIdleConnections()
	starts := make([]int, txns)
	for t := range starts {
		starts[t] = first + t*c.PerTxn
	}
	err := fanOut(writers, starts, func(k int) error {
		if how.http() {
			return postBatch(client, n.HTTP, k, c.PerTxn, c.value, how == viaCBOR)
		}
		ops := make([]wire.Op, 0, c.PerTxn)
		for j := k; j < k+c.PerTxn; j++ {
			ops = append(ops, wire.Op{Kind: wire.OpPut, Table: []byte("t"), Key: benchKey(j), Value: c.value})
		}
		_, err := n.Local.Write(context.Background(), ops)
		return err
	})
	return uint64(txns), err
}

// fanOut calls do for every start, from writers goroutines at once, and returns the first
// error (a writer stops at its error; the others finish the starts left).
func fanOut(writers int, starts []int, do func(start int) error) error {
	next := make(chan int, len(starts))
	for _, k := range starts {
		next <- k
	}
	close(next)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				if err := do(k); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// postBatch writes records first..first+n-1 as one POST /v1/tables/t/batch to the HTTP
// API at addr, as JSON or, asCBOR, as CBOR. The CBOR body is written by hand, like the
// JSON one, so that the client's encoding costs about the same in both measures.
func postBatch(client *http.Client, addr string, first, n int, value []byte, asCBOR bool) error {
	var body bytes.Buffer
	ctype := "application/json"
	if asCBOR {
		ctype = "application/cbor"
		body.Write(cborHead(nil, 5, 1))
		body.Write(cborHead(nil, 3, 3))
		body.WriteString("ops")
		body.Write(cborHead(nil, 4, uint64(n)))
		for j := first; j < first+n; j++ {
			k := benchKey(j)
			body.WriteString("\xa3\x62op\x63put\x63key")
			body.Write(cborHead(nil, 2, uint64(len(k))))
			body.Write(k)
			body.WriteString("\x65value")
			body.Write(cborHead(nil, 2, uint64(len(value))))
			body.Write(value)
		}
	} else {
		body.WriteString(`{"ops":[`)
		for j := first; j < first+n; j++ {
			if j > first {
				body.WriteByte(',')
			}
			fmt.Fprintf(&body, `{"op":"put","key":"%s","value":"%s"}`, benchKey(j), value)
		}
		body.WriteString(`]}`)
	}
	resp, err := client.Post("http://"+addr+"/v1/tables/t/batch", ctype, &body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body) // the status is the error; the body only explains it
		return fmt.Errorf("batch: %s: %s", resp.Status, msg)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// cborHead appends a CBOR item's head: its major type and its argument (RFC 8949 §3).
func cborHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	}
}

// replicateAB writes the records on A, which B dials, and returns the records per second
// until B applied the last one.
func (c *run) replicateAB(how via) (float64, error) { return c.replicateOver(how, false) }

// replicateOver is replicateAB over ws:// or, secure, over wss:// (c.certs' certificates).
func (c *run) replicateOver(how via, secure bool) (float64, error) {
	a, b, done, err := c.pairAB(filepath.Join(c.dir, fmt.Sprintf("ab-via-%d-tls-%v", how, secure)), how.http(), secure)
	if err != nil {
		return 0, err
	}
	defer done()
	return c.timeAB(a, b, c.Records, how)
}

// pairAB starts A and B, which dials A, in dir, over ws:// or wss://, and returns once B
// is connected; done stops both.
func (c *run) pairAB(dir string, viaHTTP, secure bool) (a, b *cluster.Node, done func(), err error) {
	start := c.startNode
	if secure {
		start = c.startTLSNode
	}
	a, err = start(dir, "A", viaHTTP)
	if err != nil {
		return nil, nil, nil, err
	}
	b, err = start(dir, "B", false, a)
	if err != nil {
		stop(a)
		return nil, nil, nil, err
	}
	done = func() { stop(b); stop(a) }
	if err := cluster.WaitEvery("B connected to A", time.Minute, pollEvery, func() bool { return connected(b, a) }); err != nil {
		done()
		return nil, nil, nil, err
	}
	return a, b, done, nil
}

// timeAB writes records on A and returns the records per second until B applied the last.
func (c *run) timeAB(a, b *cluster.Node, records int, how via) (float64, error) {
	begin := time.Now()
	txns, err := c.writeRecords(a, 0, records, c.Writers, how)
	if err != nil {
		return 0, err
	}
	if err := cluster.WaitEvery("B applied A's writes", benchBound, pollEvery, func() bool { return hasAll(b, map[string]uint64{"A": txns}) }); err != nil {
		return 0, err
	}
	return float64(records) / time.Since(begin).Seconds(), nil
}

// latencies are write -> visible percentiles (p50, p99) at one hop (B), at two hops (C,
// through B), and of the second hop alone (C minus B for each write); with a feed, write
// -> delivered by B's change feed (feed) and that minus visible on B for each write
// (feedAfter), and no C.
type latencies struct{ b, c, hop, feed, feedAfter [2]time.Duration }

// latency times c.Samples single writes on A of the chain A <- B <- C until B and C serve
// them.
func (c *run) latency() (latencies, error) { return c.latencyOf(c.Samples, false) }

// latencyOf times samples single writes on A until B serves them: without a feed on the
// chain A <- B <- C, also until C serves them; withFeed on A <- B alone, B serving its
// HTTP API to a consumer of its change feed of the writes' table (package client), each
// write also until that consumer is delivered its event. The feed's consumer then runs
// beside the pollers of visibility, on the same writes.
func (c *run) latencyOf(samples int, withFeed bool) (latencies, error) {
	var res latencies
	dir := filepath.Join(c.dir, "latency")
	if withFeed {
		dir = filepath.Join(c.dir, "feed-latency")
	}
	a, err := c.startNode(dir, "A", false)
	if err != nil {
		return res, err
	}
	defer stop(a)
	b, err := c.startNode(dir, "B", withFeed, a)
	if err != nil {
		return res, err
	}
	defer stop(b)
	var cn *cluster.Node
	if !withFeed {
		if cn, err = c.startNode(dir, "C", false, b); err != nil {
			return res, err
		}
		defer stop(cn)
	}
	if err := cluster.WaitEvery("the chain connected", time.Minute, pollEvery, func() bool {
		return connected(b, a) && (cn == nil || connected(cn, b))
	}); err != nil {
		return res, err
	}
	var arrivals <-chan feedArrival
	if withFeed {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if arrivals, err = followFeed(ctx, b, "l"); err != nil {
			return res, err
		}
	}
	// visible polls n's Go API every 20 µs: a latency is read to within that.
	visible := func(n *cluster.Node, key []byte, t0 time.Time, at *time.Duration) error {
		for time.Since(t0) < time.Minute {
			if _, found, err := n.Local.Get([]byte("l"), key); err != nil {
				return err
			} else if found {
				*at = time.Since(t0)
				return nil
			}
			time.Sleep(20 * time.Microsecond)
		}
		return errors.New("a write never became visible on " + n.Name)
	}
	var atB, atC, hop, atFeed, feedAfter []time.Duration
	for i := range samples {
		key := fmt.Appendf(nil, "latency-%d", i)
		t0 := time.Now()
		if _, err := a.Local.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("l"), Key: key, Value: c.value}}); err != nil {
			return res, err
		}
		var db, dc time.Duration
		var eb, ec error
		done := make(chan struct{})
		go func() { eb = visible(b, key, t0, &db); close(done) }()
		if cn != nil {
			ec = visible(cn, key, t0, &dc)
		}
		var df time.Duration
		if arrivals != nil {
			at, err := awaitArrival(arrivals, key, c.feedWait())
			ec, df = err, at.Sub(t0)
		}
		<-done
		if err := errors.Join(eb, ec); err != nil {
			return res, err
		}
		atB, atC, hop = append(atB, db), append(atC, dc), append(hop, dc-db)
		atFeed, feedAfter = append(atFeed, df), append(feedAfter, df-db)
	}
	res = latencies{b: percentiles(atB), c: percentiles(atC), hop: percentiles(hop)}
	if withFeed {
		res.feed, res.feedAfter = percentiles(atFeed), percentiles(feedAfter)
	}
	return res, nil
}

func percentiles(ds []time.Duration) [2]time.Duration {
	slices.Sort(ds)
	return [2]time.Duration{ds[len(ds)/2].Round(time.Microsecond), ds[len(ds)*99/100].Round(time.Microsecond)}
}

// origins writes the records on k origin nodes (a k-th each), which a hub H dials; once H
// holds them all, the origins stop, and a node R dials H and catches up over that one
// connection. It returns R's catch-up rate in records per second.
func (c *run) origins(k int) (float64, error) {
	dir := filepath.Join(c.dir, fmt.Sprintf("origins-%d", k))
	var srcs []*cluster.Node
	defer func() {
		for _, o := range srcs {
			stop(o)
		}
	}()
	for i := range k {
		o, err := c.startNode(dir, fmt.Sprintf("O%d", i+1), false)
		if err != nil {
			return 0, err
		}
		srcs = append(srcs, o)
	}
	hub, err := c.startNode(dir, "H", false, srcs...)
	if err != nil {
		return 0, err
	}
	defer stop(hub)
	want := map[string]uint64{}
	var mu sync.Mutex
	errs := make(chan error, k)
	per := c.Records / k
	for i, o := range srcs {
		go func() {
			txns, err := c.writeRecords(o, i*per, per, max(1, c.Writers/k), viaAPI)
			mu.Lock()
			want[o.Name] = txns
			mu.Unlock()
			errs <- err
		}()
	}
	for range k {
		if err := <-errs; err != nil {
			return 0, err
		}
	}
	if err := cluster.WaitEvery("the hub holds every origin", benchBound, pollEvery, func() bool { return hasAll(hub, want) }); err != nil {
		return 0, err
	}
	// The origins would go on receiving one another's records through the hub while R
	// catches up; they are done, so they stop and only the hub serves.
	for _, o := range srcs {
		stop(o)
	}
	begin := time.Now()
	r, err := c.startNode(dir, "R", false, hub)
	if err != nil {
		return 0, err
	}
	defer stop(r)
	if err := cluster.WaitEvery("R caught up", benchBound, pollEvery, func() bool { return hasAll(r, want) }); err != nil {
		return 0, err
	}
	return float64(c.Records) / time.Since(begin).Seconds(), nil
}
