package bench

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"plait/protocol/lock"
	"time"

	"github.com/coder/websocket"
	"github.com/linxGnu/grocksdb"

	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// Config is a run's load. Its fields are plait bench's flags, which Check's errors name.
type Config struct {
	Records int // records replicated in each throughput measure (--records)
	PerTxn  int // records per transaction (--per-txn)
	Samples int // single writes timed from A until visible on B and C (--latency-samples)
	Writers int // concurrent writers on A (--writers)
	Stalled int // records written while the receiver is stopped; 0 skips the measure (--stalled-records)
	Copy    int // records of the base copy measures; 0 skips them (--copy-records)
	// Placement is the records of each of the placement measures' four tables; 0 skips
	// those measures (--placement-records). Move is the records of the table they move to
	// a new carrier; 0 is Placement's (--move-records).
	Placement int
	Move      int
	// LockCycles is each lock measure's cycles (acquire, read, write, release) per client,
	// on 3 and 5 nodes; 0 skips them (--lock-cycles).
	LockCycles int
	Sync       node.SyncMode // the nodes' --sync (--sync)
	// TLS also measures the raw WebSocket and the replication A -> B through the Go API
	// over ws:// and over wss:// (mutual TLS 1.3, throwaway certificates), alternated for
	// TLSRounds rounds, with the ratio of each round's pair (--tls, --tls-rounds).
	TLS       bool
	TLSRounds int
	// The change feed measures (feeds.go), each skipped at 0: FeedRecords written on A
	// whose apply rate on B the rate of B's feed reading them back from oldest is set
	// against (--feed-records); FeedSamples single writes on A timed until visible on B
	// and until B's feed delivers them (--feed-samples); FeedIdle feeds opened on an idle
	// node, its heap and stacks before and after (--feed-idle); FeedStall, how long one
	// consumer stops reading while writes go on, the node's heap and stacks sampled
	// (--feed-stall).
	FeedRecords int
	FeedSamples int
	FeedIdle    int
	FeedStall   time.Duration
	// The fan-in hub measures (hubs.go), on a core node, a hub and its leaf, each skipped
	// at 0: HubRecords written on the hub as its own, then as many on its leaf, the rate
	// the hub re-originates them set against its own (--hub-records); HubSamples single
	// writes on the leaf timed until the core node serves them, alternated with as many on
	// the hub (--hub-samples).
	HubRecords int
	HubSamples int
	// Binary is the plait binary whose serve runs the stalled-receiver measure's nodes
	// (needed only when Stalled > 0; it is not a flag).
	Binary string
}

// Check says what is wrong with a load, naming the flag.
func (c Config) Check() error {
	switch {
	case c.Records <= 0 || c.PerTxn <= 0 || c.Records%c.PerTxn != 0:
		return errors.New("--records must be a positive multiple of --per-txn")
	case c.Records%(16*c.PerTxn) != 0:
		return errors.New("--records must be a multiple of 16 transactions (the 16-origin measure splits them)")
	case c.Writers <= 0 || c.Samples <= 0 || c.Stalled < 0:
		return errors.New("--writers and --latency-samples must be positive, --stalled-records not negative")
	case c.Copy < 0 || c.Copy%c.PerTxn != 0 || c.Copy > 0 && c.Copy < 2*c.PerTxn:
		return errors.New("--copy-records must be 0 or a multiple of --per-txn of at least 2 transactions (a log purged below its head)")
	case c.LockCycles < 0:
		return errors.New("--lock-cycles must not be negative")
	case c.Placement < 0 || c.Move < 0:
		return errors.New("--placement-records and --move-records must not be negative")
	case c.Move > 0 && c.Placement == 0:
		return errors.New("--move-records needs --placement-records: the move is one of the placement measures")
	case c.FeedRecords < 0 || c.FeedRecords%c.PerTxn != 0:
		return errors.New("--feed-records must be 0 or a multiple of --per-txn")
	case c.FeedSamples < 0:
		return errors.New("--feed-samples must not be negative")
	case c.FeedIdle < 0 || c.FeedIdle > httpapi.DefaultMaxFeeds:
		return fmt.Errorf("--feed-idle must be from 0 to %d (the node's default --max-feeds)", httpapi.DefaultMaxFeeds)
	case c.FeedStall < 0 || c.FeedStall > 0 && c.FeedStall < minFeedStall || c.FeedStall >= httpapi.DefaultFeedStallTimeout:
		return fmt.Errorf("--feed-stall must be 0 or from %s to under %s (the node's default --feed-stall-timeout, which would close the feed)",
			minFeedStall, httpapi.DefaultFeedStallTimeout)
	case c.HubRecords < 0 || c.HubRecords%c.PerTxn != 0:
		return errors.New("--hub-records must be 0 or a multiple of --per-txn")
	case c.HubSamples < 0:
		return errors.New("--hub-samples must not be negative")
	case c.TLS && c.TLSRounds <= 0:
		return errors.New("--tls-rounds must be positive")
	case c.Sync != node.SyncOrigin && c.Sync != node.SyncAll && c.Sync != node.SyncNone:
		return fmt.Errorf("--sync: %q is not origin, all or none", c.Sync)
	}
	return nil
}

// run is one Run: its load, its directory and the records' value.
type run struct {
	Config
	dir   string
	value []byte
	certs string      // the TLS measures' certificates (tls.go); empty until made
	locks lock.Config // the nodes' lock bounds (locks.go); zero: the defaults
	// arrivalBound bounds the wait for one write's feed event (feeds.go); zero: a minute.
	arrivalBound time.Duration
}

// feedWait is how long the feed latency measure waits for one write's event.
func (c *run) feedWait() time.Duration {
	if c.arrivalBound > 0 {
		return c.arrivalBound
	}
	return time.Minute
}

// Run measures the load c and writes the table to out, in a temporary directory it
// removes after.
func Run(out io.Writer, c Config) error {
	if err := c.Check(); err != nil {
		return err
	}
	if c.Stalled > 0 && c.Binary == "" {
		return errors.New("the stalled-receiver measure needs Config.Binary, the plait binary")
	}
	dir, err := os.MkdirTemp("", "plait-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	raw := make([]byte, benchValue/2)
	_, _ = rand.Read(raw) // crypto/rand.Read never fails (it crashes the program instead)
	// The value is text, so the HTTP API carries it as is.
	r := &run{Config: c, dir: dir, value: []byte(hex.EncodeToString(raw))}
	return r.measure(out)
}

const benchValue = 100 // bytes per record value; keys are 16 bytes

func benchKey(i int) []byte { return fmt.Appendf(nil, "key-%012d", i) }

func (c *run) measure(out io.Writer) error {
	fmt.Fprintf(out, "plait bench: 16 B keys, %d B values, %d records per transaction, --sync %s, %d writers\n\n",
		benchValue, c.PerTxn, c.Sync, c.Writers)
	fmt.Fprintln(out, "| measure | result | ratio |")
	fmt.Fprintln(out, "|---|---|---|")
	row := func(measure, result, ratio string) { fmt.Fprintf(out, "| %s | %s | %s |\n", measure, result, ratio) }

	rocks, err := rawRocks(filepath.Join(c.dir, "raw"), c.Records, c.PerTxn, c.value)
	if err != nil {
		return err
	}
	row(fmt.Sprintf("raw RocksDB, %d records in batches of %d, no fsync (the limit)", c.Records, c.PerTxn), rate(rocks, "records"), "1")
	ws, err := rawWebSocket(20_000, 1024)
	if err != nil {
		return err
	}
	row("raw WebSocket loopback, 20,000 pipelined 1 KiB messages (the limit)", rate(ws, "messages"), "1")
	if c.TLS {
		raw, err := alternate(c.TLSRounds, func() (float64, error) { return rawWebSocket(20_000, 1024) },
			func() (float64, error) { return c.rawWebSocketTLS(20_000, 1024) })
		if err != nil {
			return err
		}
		row(fmt.Sprintf("raw WebSocket loopback, the same messages: ws:// / wss:// (mutual TLS 1.3), medians of %d alternated rounds", c.TLSRounds),
			raw.rates("messages"), raw.ratio())
	}

	api, err := c.replicateAB(viaAPI)
	if err != nil {
		return err
	}
	row(fmt.Sprintf("replication A -> B, %d records written through the Go API", c.Records), rate(api, "records"), ratio(api, rocks, "raw RocksDB"))
	if c.TLS {
		rep, err := alternate(c.TLSRounds, func() (float64, error) { return c.replicateOver(viaAPI, false) },
			func() (float64, error) { return c.replicateOver(viaAPI, true) })
		if err != nil {
			return err
		}
		row(fmt.Sprintf("replication A -> B, the same through the Go API: ws:// / wss:// (mutual TLS 1.3), medians of %d alternated rounds", c.TLSRounds),
			rep.rates("records"), rep.ratio())
	}
	asJSON, err := c.replicateAB(viaJSON)
	if err != nil {
		return err
	}
	row(fmt.Sprintf("replication A -> B, %d records written as HTTP batches (JSON)", c.Records), rate(asJSON, "records"), ratio(asJSON, rocks, "raw RocksDB"))

	lat, err := c.latency()
	if err != nil {
		return err
	}
	row(fmt.Sprintf("write -> visible on B (one hop), p50 / p99 of %d single writes", c.Samples), lat.b[0].String()+" / "+lat.b[1].String(), "")
	row("write -> visible on C (two hops, through B), p50 / p99", lat.c[0].String()+" / "+lat.c[1].String(), "")
	row("extra latency of the relay hop (C minus B per write), p50 / p99", lat.hop[0].String()+" / "+lat.hop[1].String(), "")
	// Measures 482f1b8 and the releases lack run after the ones they share, in the order
	// those have there: make bench-compare then meets each shared measure after the same
	// work on both sides (the write -> visible latency waits on fsyncs, behind the
	// writeback of whatever ran just before it).
	asCBOR, err := c.replicateAB(viaCBOR)
	if err != nil {
		return err
	}
	row("replication A -> B, the same as HTTP batches of CBOR (application/cbor)", rate(asCBOR, "records"), ratio(asCBOR, rocks, "raw RocksDB"))

	one, err := c.origins(1)
	if err != nil {
		return err
	}
	sixteen, err := c.origins(16)
	if err != nil {
		return err
	}
	row(fmt.Sprintf("catch-up over one connection, %d records of 1 origin", c.Records), rate(one, "records"), "1")
	row("catch-up over one connection, the same records from 16 origins", rate(sixteen, "records"), ratio(sixteen, one, "1 origin"))

	if c.Copy > 0 {
		cp, err := c.baseCopy()
		if err != nil {
			return err
		}
		n := uint64(c.Copy)
		raw := n * uint64(16+len(c.value))
		row(fmt.Sprintf("raw RocksDB write of %d records in batches of about 1 MiB, no fsync", c.Copy), copyRate(n, raw, cp.rawWrite), "")
		row("raw RocksDB scan of them through a snapshot, keys and values copied out", copyRate(n, raw, cp.rawScan), "")
		pair := cp.rawWrite + cp.rawScan
		row("raw scan + write, one after the other (the copy's limit)", copyRate(n, raw, pair), "1")
		row(fmt.Sprintf("base copy of %d records, logs purged, one connection (request to end; %.0f MB of chunks)", c.Copy, float64(cp.bytes)/1e6),
			copyRate(cp.records, cp.bytes, cp.copyTime), fmt.Sprintf("%.2f of raw scan + write", pair.Seconds()/cp.copyTime.Seconds()))
		row("an empty node's catch-up by that base copy, start to caught up", seconds(cp.byCopy), "")
		row("the same by replaying the whole log from seq 1 (nothing purged)", seconds(cp.byReplay),
			fmt.Sprintf("copy takes %.2f of replay's time", cp.byCopy.Seconds()/cp.byReplay.Seconds()))
	}
	if c.Stalled > 0 {
		st, err := c.stalledReceiver()
		if err != nil {
			return err
		}
		row("sender RSS before writing (receiver stopped)", mib(st.senderIdle), "")
		row(fmt.Sprintf("sender peak RSS while %d records were written to it, receiver stopped", c.Stalled), mib(st.senderPeak), fmt.Sprintf("+%s", mib(st.senderPeak-st.senderIdle)))
		row("receiver RSS when stopped / peak after it resumed and caught up", mib(st.receiverStopped)+" / "+mib(st.receiverPeak), "")
		row("receiver catch-up after resuming", rate(st.catchUp, "records"), "")
	}
	if c.Placement > 0 {
		pl, err := c.placement()
		if err != nil {
			return err
		}
		c.placementRows(row, pl)
	}
	if c.LockCycles > 0 {
		ls, err := c.lockMeasures()
		if err != nil {
			return err
		}
		c.lockRows(row, ls)
	}
	if err := c.feedMeasures(row); err != nil {
		return err
	}
	if c.HubRecords > 0 || c.HubSamples > 0 {
		h, err := c.hubMeasures()
		if err != nil {
			return err
		}
		c.hubRows(row, h)
	}
	return nil
}

func rate(r float64, unit string) string { return fmt.Sprintf("%.0f %s/s", r, unit) }

func ratio(r, limit float64, of string) string { return fmt.Sprintf("%.2f of %s", r/limit, of) }

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// rawRocks writes the records in batches straight to RocksDB: the storage limit.
func rawRocks(dir string, records, perTxn int, value []byte) (float64, error) {
	o := grocksdb.NewDefaultOptions()
	o.SetCreateIfMissing(true)
	db, err := grocksdb.OpenDb(o, dir)
	o.Destroy()
	if err != nil {
		return 0, err
	}
	defer db.Close()
	wo := grocksdb.NewDefaultWriteOptions()
	defer wo.Destroy()
	start := time.Now()
	for i := 0; i < records; i += perTxn {
		wb := grocksdb.NewWriteBatch()
		for j := i; j < i+perTxn; j++ {
			wb.Put(benchKey(j), value)
		}
		err := db.Write(wo, wb)
		wb.Destroy()
		if err != nil {
			return 0, err
		}
	}
	return float64(records) / time.Since(start).Seconds(), nil
}

// rawWebSocket sends n messages of size bytes over a loopback WebSocket: the transport
// limit.
func rawWebSocket(n, size int) (float64, error) { return rawWebSocketOver(n, size, nil, nil) }

// rawWebSocketOver sends n messages of size bytes over a loopback WebSocket, over TLS
// when the configurations are not nil.
func rawWebSocketOver(n, size int, server, client *tls.Config) (float64, error) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	l, scheme, opts := inner, "ws://", (*websocket.DialOptions)(nil)
	if server != nil {
		l, scheme = tls.NewListener(inner, server), "wss://"
		opts = &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: client}}}
	}
	got := make(chan error, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			got <- err
			return
		}
		c.SetReadLimit(int64(size) + 1024)
		for range n {
			if _, _, err := c.Read(r.Context()); err != nil {
				got <- err
				return
			}
		}
		got <- nil
		_ = c.Close(websocket.StatusNormalClosure, "") // every message arrived: the measure is taken
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }() // a listener that fails fails the dial below, which reports it
	defer srv.Close()
	ctx := context.Background()
	c, _, err := websocket.Dial(ctx, scheme+inner.Addr().String(), opts)
	if err != nil {
		return 0, err
	}
	defer c.CloseNow()
	msg := make([]byte, size)
	start := time.Now()
	for range n {
		if err := c.Write(ctx, websocket.MessageBinary, msg); err != nil {
			return 0, err
		}
	}
	if err := <-got; err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
