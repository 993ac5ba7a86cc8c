package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// benchSecret is the cluster secret of plait bench's nodes.
var benchSecret = []byte("plait bench secret of 32 bytes..")

// benchNode is one of plait bench's nodes, in this process.
type benchNode struct {
	*node.Node
	name    string
	url     string // replication
	httpURL string // the HTTP API, when served
	httpSrv *http.Server
}

// startBenchNode starts a node in dir/name that dials peers; withHTTP also serves its
// HTTP API.
func startBenchNode(c *benchConfig, dir, name string, withHTTP bool, peers ...*benchNode) (*benchNode, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var dial []node.Peer
	for _, p := range peers {
		dial = append(dial, node.Peer{Name: p.name, URL: p.url})
	}
	n, err := node.Start(node.Config{Name: name, DataDir: filepath.Join(dir, name), Listener: l, Peers: dial,
		Secret: benchSecret, Sync: c.sync, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	b := &benchNode{Node: n, name: name, url: "ws://" + l.Addr().String()}
	if withHTTP {
		hl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			_ = n.Stop()
			return nil, err
		}
		b.httpURL = "http://" + hl.Addr().String()
		b.httpSrv = &http.Server{Handler: httpapi.New(n, httpapi.Limits{}), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = b.httpSrv.Serve(hl) }()
	}
	return b, nil
}

func (b *benchNode) stop() {
	if b.httpSrv != nil {
		_ = b.httpSrv.Close()
	}
	_ = b.Stop()
}

// applied is how far this node applied each origin, by name.
func (b *benchNode) applied() map[string]uint64 {
	st, err := b.Status()
	out := map[string]uint64{}
	if err != nil {
		return out
	}
	for _, o := range st.Origins {
		out[o.Name] = o.AppliedSeq
	}
	return out
}

// connected reports whether this node streams with every one of peers.
func (b *benchNode) connected(peers ...*benchNode) bool {
	st, err := b.Status()
	if err != nil {
		return false
	}
	for _, p := range peers {
		if !slices.ContainsFunc(st.Peers, func(ps replica.PeerStatus) bool { return ps.Name == p.name && ps.Connected }) {
			return false
		}
	}
	return true
}

// waitUntil polls cond every 2 ms for up to bound.
func waitUntil(what string, bound time.Duration, cond func() bool) error {
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, bound)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// hasAll reports whether b applied every origin up to its seq.
func (b *benchNode) hasAll(want map[string]uint64) bool {
	got := b.applied()
	for name, seq := range want {
		if got[name] < seq {
			return false
		}
	}
	return true
}

// writeRecords writes count records with keys from first on b, perTxn to a transaction,
// from writers concurrent writers, through the Go API or as HTTP batches. It returns the
// number of transactions.
func writeRecords(c *benchConfig, b *benchNode, first, count, writers int, viaHTTP bool) (uint64, error) {
	txns := count / c.perTxn
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: writers}}
	defer client.CloseIdleConnections()
	next := make(chan int, txns)
	for t := range txns {
		next <- first + t*c.perTxn
	}
	close(next)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				var err error
				if viaHTTP {
					err = postBatch(client, b.httpURL, k, c.perTxn, c.value)
				} else {
					ops := make([]wire.Op, 0, c.perTxn)
					for j := k; j < k+c.perTxn; j++ {
						ops = append(ops, wire.Op{Kind: wire.OpPut, Table: []byte("t"), Key: benchKey(j), Value: c.value})
					}
					_, err = b.Write(context.Background(), ops)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return uint64(txns), <-errs
}

// postBatch writes records first..first+n-1 as one POST /v1/tables/t/batch.
func postBatch(client *http.Client, base string, first, n int, value []byte) error {
	var body bytes.Buffer
	body.WriteString(`{"ops":[`)
	for j := first; j < first+n; j++ {
		if j > first {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"op":"put","key":"%s","value":"%s"}`, benchKey(j), value)
	}
	body.WriteString(`]}`)
	resp, err := client.Post(base+"/v1/tables/t/batch", "application/json", &body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("batch: %s: %s", resp.Status, msg)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

const benchBound = 10 * time.Minute // no measure may take longer

// replicateAB writes the records on A, which B dials, and returns the records per second
// until B applied the last one.
func replicateAB(c *benchConfig, viaHTTP bool) (float64, error) {
	dir := filepath.Join(c.dir, fmt.Sprintf("ab-http-%v", viaHTTP))
	a, err := startBenchNode(c, dir, "A", viaHTTP)
	if err != nil {
		return 0, err
	}
	defer a.stop()
	b, err := startBenchNode(c, dir, "B", false, a)
	if err != nil {
		return 0, err
	}
	defer b.stop()
	if err := waitUntil("B connected to A", time.Minute, func() bool { return b.connected(a) }); err != nil {
		return 0, err
	}
	begin := time.Now()
	txns, err := writeRecords(c, a, 0, c.records, c.writers, viaHTTP)
	if err != nil {
		return 0, err
	}
	if err := waitUntil("B applied A's writes", benchBound, func() bool { return b.hasAll(map[string]uint64{"A": txns}) }); err != nil {
		return 0, err
	}
	return float64(c.records) / time.Since(begin).Seconds(), nil
}

// latencies are write -> visible percentiles (p50, p99) at one hop (B), at two hops (C,
// through B), and of the second hop alone (C minus B for each write).
type latencies struct{ b, c, hop [2]time.Duration }

// latency times single writes on A of the chain A <- B <- C until B and C serve them.
func latency(c *benchConfig) (latencies, error) {
	var res latencies
	dir := filepath.Join(c.dir, "latency")
	a, err := startBenchNode(c, dir, "A", false)
	if err != nil {
		return res, err
	}
	defer a.stop()
	b, err := startBenchNode(c, dir, "B", false, a)
	if err != nil {
		return res, err
	}
	defer b.stop()
	cn, err := startBenchNode(c, dir, "C", false, b)
	if err != nil {
		return res, err
	}
	defer cn.stop()
	if err := waitUntil("the chain connected", time.Minute, func() bool { return b.connected(a) && cn.connected(b) }); err != nil {
		return res, err
	}
	visible := func(n *benchNode, key []byte, t0 time.Time, at *time.Duration) error {
		for time.Since(t0) < time.Minute {
			if _, found, err := n.Get([]byte("l"), key); err != nil {
				return err
			} else if found {
				*at = time.Since(t0)
				return nil
			}
			time.Sleep(20 * time.Microsecond)
		}
		return errors.New("a write never became visible on " + n.name)
	}
	var atB, atC, hop []time.Duration
	for i := range c.samples {
		key := fmt.Appendf(nil, "latency-%d", i)
		t0 := time.Now()
		if _, err := a.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("l"), Key: key, Value: c.value}}); err != nil {
			return res, err
		}
		var db, dc time.Duration
		var eb error
		done := make(chan struct{})
		go func() { eb = visible(b, key, t0, &db); close(done) }()
		ec := visible(cn, key, t0, &dc)
		<-done
		if err := errors.Join(eb, ec); err != nil {
			return res, err
		}
		atB, atC, hop = append(atB, db), append(atC, dc), append(hop, dc-db)
	}
	return latencies{b: percentiles(atB), c: percentiles(atC), hop: percentiles(hop)}, nil
}

func percentiles(ds []time.Duration) [2]time.Duration {
	slices.Sort(ds)
	return [2]time.Duration{ds[len(ds)/2].Round(time.Microsecond), ds[len(ds)*99/100].Round(time.Microsecond)}
}

// origins writes the records on k origin nodes (a k-th each), which a hub H dials; once H
// holds them all, the origins stop, and a node R dials H and catches up over that one
// connection. It returns
// R's catch-up rate in records per second.
func origins(c *benchConfig, k int) (float64, error) {
	dir := filepath.Join(c.dir, fmt.Sprintf("origins-%d", k))
	var srcs []*benchNode
	defer func() {
		for _, o := range srcs {
			o.stop()
		}
	}()
	for i := range k {
		o, err := startBenchNode(c, dir, fmt.Sprintf("O%d", i+1), false)
		if err != nil {
			return 0, err
		}
		srcs = append(srcs, o)
	}
	hub, err := startBenchNode(c, dir, "H", false, srcs...)
	if err != nil {
		return 0, err
	}
	defer hub.stop()
	want := map[string]uint64{}
	var mu sync.Mutex
	errs := make(chan error, k)
	per := c.records / k
	for i, o := range srcs {
		go func() {
			txns, err := writeRecords(c, o, i*per, per, max(1, c.writers/k), false)
			mu.Lock()
			want[o.name] = txns
			mu.Unlock()
			errs <- err
		}()
	}
	for range k {
		if err := <-errs; err != nil {
			return 0, err
		}
	}
	if err := waitUntil("the hub holds every origin", benchBound, func() bool { return hub.hasAll(want) }); err != nil {
		return 0, err
	}
	// The origins would go on receiving one another's records through the hub while R
	// catches up; they are done, so they stop and only the hub serves.
	for _, o := range srcs {
		o.stop()
	}
	begin := time.Now()
	r, err := startBenchNode(c, dir, "R", false, hub)
	if err != nil {
		return 0, err
	}
	defer r.stop()
	if err := waitUntil("R caught up", benchBound, func() bool { return r.hasAll(want) }); err != nil {
		return 0, err
	}
	return float64(c.records) / time.Since(begin).Seconds(), nil
}
