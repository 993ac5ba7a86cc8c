package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"plait/internal/cluster"
	"plait/protocol/wire"
)

// The change feed measures (docs/design.md §26, docs/contract.md §24): whether a consumer
// keeps up with replication (a feed's backlog read from oldest against the rate its node
// applied it), how much later than the write's visibility its event reaches a consumer
// (latencyOf with a feed), and what feeds cost the node's memory: many idle ones, and one
// whose consumer stopped reading while writes go on. The nodes run in this process, so
// the memory is read from the Go runtime: the heap after a collection and the goroutine
// stacks. The consumers of those measures hold raw sockets and no goroutine of their own
// (the stalled one a goroutine blocked on a lock), so what grows is the node's.

// feedRate is one read of a feed's backlog: events (log entries) and records per second.
type feedRate struct{ events, records float64 }

// feedThroughput is B's apply rate of A's records and the rate of B's feed reading them
// back from oldest, through package client and as raw NDJSON lines.
type feedThroughput struct {
	apply       float64 // records per second, A's first write until B applied the last
	client, raw feedRate
}

// feedThroughput writes c.FeedRecords on A (the Go API, c.Writers writers, as
// replicateAB), times B applying them, then reads B's feed of them from oldest twice:
// through package client (every event decoded) and as raw lines (counted, not decoded).
// Each read must deliver every entry once.
func (c *run) feedThroughput() (feedThroughput, error) {
	var res feedThroughput
	dir := filepath.Join(c.dir, "feed-throughput")
	a, err := c.startNode(dir, "A", false)
	if err != nil {
		return res, err
	}
	defer stop(a)
	b, err := c.startNode(dir, "B", true, a) // B serves the feed
	if err != nil {
		return res, err
	}
	defer stop(b)
	if err := cluster.WaitEvery("B connected to A", time.Minute, pollEvery, func() bool { return connected(b, a) }); err != nil {
		return res, err
	}
	if res.apply, err = c.timeAB(a, b, c.FeedRecords, viaAPI); err != nil {
		return res, err
	}
	target, err := feedHead(b, "t")
	if err != nil {
		return res, err
	}
	txns := c.FeedRecords / c.PerTxn
	if res.client, err = c.readFeedClient(b, target, txns); err != nil {
		return res, fmt.Errorf("the feed through package client: %w", err)
	}
	if res.raw, err = c.readFeedRaw(b, target, txns); err != nil {
		return res, fmt.Errorf("the feed as raw lines: %w", err)
	}
	return res, nil
}

// readFeedClient reads n's feed of table t from oldest through package client until the
// event at target, and checks it delivered want entries of c.PerTxn records.
func (c *run) readFeedClient(n *cluster.Node, target string, want int) (feedRate, error) {
	api, err := n.Client()
	if err != nil {
		return feedRate{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), benchBound)
	defer cancel()
	var events, records int
	begin := time.Now()
	for e, err := range api.Changes(ctx, "t", "oldest") {
		if err != nil {
			return feedRate{}, err
		}
		if e.Kind == "change" {
			events++
			records += len(e.Ops)
		}
		if e.Position == target {
			break
		}
	}
	return c.feedCounted(events, records, want, time.Since(begin))
}

// readFeedRaw reads n's feed of table t from oldest as NDJSON lines until the line at
// target, counting the change lines and their operations without decoding them.
func (c *run) readFeedRaw(n *cluster.Node, target string, want int) (feedRate, error) {
	ctx, cancel := context.WithTimeout(context.Background(), benchBound)
	defer cancel()
	begin := time.Now()
	body, err := openFeed(ctx, n, "t", "oldest")
	if err != nil {
		return feedRate{}, err
	}
	defer body.Close()
	var events, records int
	err = readLines(body, func(line []byte) (bool, error) {
		if bytes.HasPrefix(line, []byte(`{"event":"change"`)) {
			events++
			records += bytes.Count(line, []byte(`{"op":`))
		}
		pos, err := linePosition(line)
		return pos == target, err
	})
	if err != nil {
		return feedRate{}, err
	}
	return c.feedCounted(events, records, want, time.Since(begin))
}

// feedCounted checks that a read of the backlog delivered want entries of c.PerTxn
// records each, and gives its rates over took.
func (c *run) feedCounted(events, records, want int, took time.Duration) (feedRate, error) {
	if events != want || records != want*c.PerTxn {
		return feedRate{}, fmt.Errorf("the feed delivered %d events of %d records, want %d of %d", events, records, want, want*c.PerTxn)
	}
	return feedRate{events: float64(events) / took.Seconds(), records: float64(records) / took.Seconds()}, nil
}

// openFeed starts n's NDJSON feed of table from since and returns its body once the
// node answered 200.
func openFeed(ctx context.Context, n *cluster.Node, table, since string) (io.ReadCloser, error) {
	u := "http://" + n.HTTP + "/v1/tables/" + url.PathEscape(table) + "/changes?since=" + url.QueryEscape(since)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := feedHTTP.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body) // the status is the error; the body only explains it
		resp.Body.Close()
		return nil, fmt.Errorf("feed of %s from %s: %s: %s", table, since, resp.Status, msg)
	}
	return resp.Body, nil
}

// feedHTTP is the raw feeds' client: no timeout, since a feed's body is read for as long
// as a measure lasts (each is bounded by its context), and no connection kept alive (it
// would hold memory of the node's between the memory measures' samples).
var feedHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// readLines passes each non-empty NDJSON line of r to line until it answers true or an
// error; a close event is an error (a measure's feed is never closed by the node).
func readLines(r io.Reader, line func([]byte) (bool, error)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		l := sc.Bytes()
		if len(l) == 0 {
			continue
		}
		if bytes.HasPrefix(l, []byte(`{"event":"close"`)) {
			return fmt.Errorf("the node closed the feed: %s", l)
		}
		if done, err := line(l); done || err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

// linePosition is the position an NDJSON line of a feed carries: every line ends with it
// (docs/contract.md §24.3), so it is read from there rather than by decoding the line.
func linePosition(line []byte) (string, error) {
	const key = `"position":"`
	i := bytes.LastIndex(line, []byte(key))
	if i < 0 || !bytes.HasSuffix(line, []byte(`"}`)) {
		return "", fmt.Errorf("a feed line without a position at its end: %.200s", line)
	}
	return string(line[i+len(key) : len(line)-2]), nil
}

// feedHead is the position of n's feed of table at now: its first message, a heartbeat,
// carries it (docs/contract.md §24.3).
func feedHead(n *cluster.Node, table string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body, err := openFeed(ctx, n, table, "now")
	if err != nil {
		return "", err
	}
	defer body.Close()
	var pos string
	err = readLines(body, func(line []byte) (bool, error) {
		var err error
		pos, err = linePosition(line)
		return true, err
	})
	return pos, err
}

// sinceHead is the since that starts a feed at a head feedHead gave: the empty position
// (nothing applied yet) is oldest, since an empty since is now.
func sinceHead(head string) string {
	if head == "" {
		return "oldest"
	}
	return head
}

// feedArrival is one operation of a change event as the latency measure's consumer took
// it: its key and when, or the error that ended the feed.
type feedArrival struct {
	key string
	at  time.Time
	err error
}

// followFeed follows n's feed of table from its head through package client until ctx
// ends, sending each change's operations to the channel it returns, stamped when the
// event was delivered.
func followFeed(ctx context.Context, n *cluster.Node, table string) (<-chan feedArrival, error) {
	head, err := feedHead(n, table)
	if err != nil {
		return nil, err
	}
	api, err := n.Client()
	if err != nil {
		return nil, err
	}
	out := make(chan feedArrival, 64)
	go func() {
		for e, err := range api.Changes(ctx, table, sinceHead(head)) {
			if err != nil {
				if ctx.Err() == nil {
					out <- feedArrival{err: err}
				}
				return
			}
			at := time.Now()
			for _, op := range e.Ops {
				select {
				case out <- feedArrival{key: string(op.Key), at: at}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// awaitArrival waits up to bound for the arrival of key, the next the feed must deliver.
func awaitArrival(arrivals <-chan feedArrival, key []byte, bound time.Duration) (time.Time, error) {
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case a := <-arrivals:
		switch {
		case a.err != nil:
			return time.Time{}, a.err
		case a.key != string(key):
			return time.Time{}, fmt.Errorf("the feed delivered %q, want %q next", a.key, key)
		}
		return a.at, nil
	case <-t.C:
		return time.Time{}, fmt.Errorf("the feed did not deliver %q within %s", key, bound)
	}
}

// heapAndStacks is the Go heap live after a collection and the goroutines' stacks: the
// memory of this process's nodes that a feed can hold (RocksDB's is C's, and the sockets'
// buffers the kernel's).
func heapAndStacks() int64 {
	// Two collections: what sync.Pools held at the first is only freed at the second.
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

// feedsOpen is the feeds n's API streams now (docs/contract.md §24.7), and the bytes it
// wrote to feeds' clients since it started. It asks over a connection it closes after: a
// kept-alive one would be memory of the node's that the memory measures count.
func feedsOpen(n *cluster.Node) (open int64, sent uint64, err error) {
	resp, err := feedHTTP.Get("http://" + n.HTTP + "/v1/status")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var d struct {
		Feeds struct {
			Open  int64  `json:"open"`
			Bytes uint64 `json:"bytes"`
		} `json:"feeds"`
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("status: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return 0, 0, fmt.Errorf("status: %w", err)
	}
	return d.Feeds.Open, d.Feeds.Bytes, nil
}

// idleFeed is a feed opened over a bare socket and read up to its first heartbeat: the
// client side holds the socket and nothing else.
func idleFeed(addr, table string) (net.Conn, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second)) // a socket's deadline is never refused
	req := "GET /v1/tables/" + url.PathEscape(table) + "/changes?since=now HTTP/1.1\r\nHost: " + addr +
		"\r\nAccept: application/x-ndjson\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		return nil, err
	}
	var got []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(got, []byte(`{"event":"heartbeat"`)) {
		k, err := conn.Read(buf)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("an idle feed's first heartbeat: %w (read %q)", err, got)
		}
		got = append(got, buf[:k]...)
		if !bytes.HasPrefix(got, []byte("HTTP/1.1 200")) && len(got) >= 12 {
			conn.Close()
			return nil, fmt.Errorf("an idle feed: %q", got)
		}
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}

// idleFeeds opens c.FeedIdle feeds of table t on a node with no writes and returns the
// growth of its heap and stacks once they are all open (after a first feed opened and
// closed, so that what the first feed of a process sets up once is not counted).
func (c *run) idleFeeds() (int64, error) {
	n, err := c.startNode(filepath.Join(c.dir, "feed-idle"), "N", true)
	if err != nil {
		return 0, err
	}
	defer stop(n)
	warm, err := idleFeed(n.HTTP, "t")
	if err != nil {
		return 0, err
	}
	warm.Close()
	if err := cluster.WaitEvery("the warm-up feed closed", time.Minute, pollEvery, func() bool {
		open, _, err := feedsOpen(n)
		return err == nil && open == 0
	}); err != nil {
		return 0, err
	}
	before := heapAndStacks()
	conns := make([]net.Conn, 0, c.FeedIdle)
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	for range c.FeedIdle {
		conn, err := idleFeed(n.HTTP, "t")
		if err != nil {
			return 0, err
		}
		conns = append(conns, conn)
	}
	open, _, err := feedsOpen(n)
	if err != nil {
		return 0, err
	}
	if open != int64(c.FeedIdle) {
		return 0, fmt.Errorf("%d feeds open, want %d", open, c.FeedIdle)
	}
	grew := heapAndStacks() - before
	runtime.KeepAlive(conns) // a socket no longer reachable is closed by its finalizer
	return grew, nil
}

// stallWrites is the stalled-feed measure's write load: one transaction of --per-txn
// records every stallWriteEvery, a steady stream that fills the stalled consumer's socket
// buffers within seconds without filling the disk over a minute.
const stallWriteEvery = 10 * time.Millisecond

// feedStall is the stalled-consumer measure: the node's heap and stacks with the
// consumer reading under writes (before), when its socket buffers were full (fill,
// fillAt after the stall began, sent bytes written to it by then), at the stall's end,
// and the range of the samples between.
type feedStall struct {
	before, fill, end int64
	fillAt            time.Duration
	sent              uint64
	entries           int     // entries written during the stall
	low, high         int64   // the least and the most of the samples from fill on
	heaps             []int64 // the samples, one a second of the stall
}

// feedStall writes on a node while a consumer follows its feed of table t as raw NDJSON,
// then stops the consumer's reading for c.FeedStall while the writes go on, sampling the
// node's heap and stacks and the bytes its feeds wrote every second; then the consumer
// reads on and must be delivered every entry written, once.
func (c *run) feedStall() (feedStall, error) {
	var res feedStall
	n, err := c.startNode(filepath.Join(c.dir, "feed-stall"), "N", true)
	if err != nil {
		return res, err
	}
	defer stop(n)
	ctx, cancel := context.WithTimeout(context.Background(), c.FeedStall+benchBound)
	defer cancel()
	body, err := openFeed(ctx, n, "t", "oldest")
	if err != nil {
		return res, err
	}
	defer body.Close()

	// The consumer: it counts change lines and keeps the last position, and holds
	// reading while it holds; the measure takes reading to stall it.
	var (
		reading      sync.Mutex
		events       atomic.Int64
		last         atomic.Value // string
		readErr      = make(chan error, 1)
		target       atomic.Value // string: the position to stop at, once known
		lastPosition = func() string { s, _ := last.Load().(string); return s }
	)
	last.Store("")
	target.Store("\x00") // no position
	go func() {
		readErr <- readLines(body, func(line []byte) (bool, error) {
			reading.Lock()
			defer reading.Unlock()
			if bytes.HasPrefix(line, []byte(`{"event":"change"`)) {
				events.Add(1)
			}
			pos, err := linePosition(line)
			last.Store(pos)
			return pos == target.Load().(string), err
		})
	}()

	// The writer: one transaction every stallWriteEvery until stopped.
	var written atomic.Int64
	stopWrites := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		tick := time.NewTicker(stallWriteEvery)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopWrites:
				writerDone <- nil
				return
			case <-tick.C:
			}
			ops := make([]wire.Op, 0, c.PerTxn)
			for j := range c.PerTxn {
				ops = append(ops, wire.Op{Kind: wire.OpPut, Table: []byte("t"), Key: benchKey(i*c.PerTxn + j), Value: c.value})
			}
			if _, err := n.Local.Write(ctx, ops); err != nil {
				writerDone <- err
				return
			}
			written.Add(1)
		}
	}()
	stopWriter := func() error {
		select {
		case <-stopWrites:
			return nil
		default:
		}
		close(stopWrites)
		return <-writerDone
	}
	defer func() { _ = stopWriter() }() // a failed measure's error is the one to report

	// Reading under writes for a while: the feed is caught up and streaming.
	if err := cluster.WaitEvery("the consumer read the writes", time.Minute, pollEvery, func() bool {
		return events.Load() >= 100
	}); err != nil {
		return res, err
	}
	res.before = heapAndStacks()

	reading.Lock()
	stalledAt, startEntries := time.Now(), written.Load()
	type sample struct {
		at   time.Duration
		heap int64
		sent uint64
	}
	var samples []sample
	for {
		time.Sleep(time.Second)
		_, sent, err := feedsOpen(n)
		if err != nil {
			reading.Unlock()
			return res, err
		}
		samples = append(samples, sample{time.Since(stalledAt), heapAndStacks(), sent})
		res.heaps = append(res.heaps, samples[len(samples)-1].heap)
		if time.Since(stalledAt) >= c.FeedStall {
			break
		}
	}
	res.entries = int(written.Load() - startEntries)
	werr := stopWriter()
	reading.Unlock()
	if werr != nil {
		return res, werr
	}
	end := samples[len(samples)-1]
	res.end, res.sent = end.heap, end.sent
	// The buffers were full from the first sample after which the feed wrote nothing more.
	fill := len(samples) - 1
	for fill > 0 && samples[fill-1].sent == end.sent {
		fill--
	}
	res.fill, res.fillAt = samples[fill].heap, samples[fill].at
	res.low, res.high = res.fill, res.fill
	for _, s := range samples[fill:] {
		res.low, res.high = min(res.low, s.heap), max(res.high, s.heap)
	}
	if fill == len(samples)-1 {
		return res, fmt.Errorf("the stalled feed went on sending until the stall's end (%d bytes): its buffers never filled; stall longer", end.sent)
	}

	// Every entry written reaches the consumer once it reads on: the stall lost nothing.
	head, err := feedHead(n, "t")
	if err != nil {
		return res, err
	}
	reading.Lock()
	target.Store(head)
	done := lastPosition() == head
	reading.Unlock()
	if !done {
		select {
		case err := <-readErr:
			if err != nil {
				return res, fmt.Errorf("the consumer after the stall: %w", err)
			}
		case <-ctx.Done():
			return res, errors.New("the consumer did not read up to the node's head after the stall")
		}
	}
	if got, want := events.Load(), written.Load(); got != want {
		return res, fmt.Errorf("the consumer was delivered %d events, want the %d entries written", got, want)
	}
	return res, nil
}

// minFeedStall is the shortest --feed-stall: the node is sampled every second, and the
// measure needs samples after the consumer's buffers filled.
const minFeedStall = 2 * time.Second

// feedMeasures runs the change feed measures c asks for and writes their rows.
func (c *run) feedMeasures(row func(measure, result, ratio string)) error {
	if c.FeedRecords > 0 {
		ft, err := c.feedThroughput()
		if err != nil {
			return fmt.Errorf("feed throughput: %w", err)
		}
		rates := func(r feedRate) string { return rate(r.events, "events") + " / " + rate(r.records, "records") }
		row(fmt.Sprintf("B applies %d records of A's, written through the Go API (the feed measures' run)", c.FeedRecords), rate(ft.apply, "records"), "1")
		row("B's change feed read from oldest after it, NDJSON through package client: events / records", rates(ft.client), ratio(ft.client.records, ft.apply, "B's apply rate"))
		row("the same read as raw NDJSON lines, counted and not decoded: events / records", rates(ft.raw), ratio(ft.raw.records, ft.apply, "B's apply rate"))
	}
	if c.FeedSamples > 0 {
		lat, err := c.latencyOf(c.FeedSamples, true)
		if err != nil {
			return fmt.Errorf("feed latency: %w", err)
		}
		pp := func(d [2]time.Duration) string { return d[0].String() + " / " + d[1].String() }
		row(fmt.Sprintf("write on A -> visible on B, p50 / p99 of %d single writes (the feed latency's run)", c.FeedSamples), pp(lat.b), "")
		row("write on A -> its event delivered by B's change feed (package client), p50 / p99", pp(lat.feed), "")
		row("the feed's event after visible on B, per write, p50 / p99", pp(lat.feedAfter), "")
	}
	if c.FeedIdle > 0 {
		grew, err := c.idleFeeds()
		if err != nil {
			return fmt.Errorf("idle feeds: %w", err)
		}
		row(fmt.Sprintf("node heap and stacks grown by %d idle change feeds, after a GC", c.FeedIdle), grown(grew),
			fmt.Sprintf("%.1f KiB a feed", float64(grew)/float64(c.FeedIdle)/1024))
	}
	if c.FeedStall > 0 {
		st, err := c.feedStall()
		if err != nil {
			return fmt.Errorf("stalled feed: %w", err)
		}
		row("node heap and stacks, one change feed's consumer reading under writes", mibs(st.before), "")
		row(fmt.Sprintf("the same at the end of its stall of %.0f s under writes (%d entries written)", c.FeedStall.Seconds(), st.entries), mibs(st.end),
			grown(st.end-st.before))
		row(fmt.Sprintf("its growth from its socket buffers' filling (%.0f s into the stall, %.1f MB written to it in all) to the stall's end", st.fillAt.Seconds(), float64(st.sent)/1e6),
			grown(st.end-st.fill), "samples after it: "+mibs(st.low)+" to "+mibs(st.high))
	}
	return nil
}

// mibs is a size in MiB to two decimals (mib's whole MiB would hide a feed's memory).
func mibs(b int64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }

// grown is a growth in MiB, signed: a collection can leave the heap smaller than before.
func grown(b int64) string { return fmt.Sprintf("%+.2f MiB", float64(b)/(1<<20)) }
