package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/coder/websocket"
	"github.com/linxGnu/grocksdb"

	"plait/protocol/wire"
	"plait/shells/native/node"
)

// bench is plait bench: replication measured beside the machine's physical limits, in one
// process and one run (DESIGN.md §6): raw RocksDB batched writes of the same records and
// raw WebSocket loopback messages, then two nodes replicating.
func bench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plait bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	records := fs.Int("records", 200_000, "records replicated")
	perTxn := fs.Int("per-txn", 100, "records per transaction")
	samples := fs.Int("latency-samples", 200, "single writes timed from A until visible on B")
	sync := fs.String("sync", "origin", "origin | all | none (the nodes' --sync)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *records <= 0 || *perTxn <= 0 || *records%*perTxn != 0 {
		fmt.Fprintln(stderr, "plait bench: --records must be a positive multiple of --per-txn")
		return 2
	}
	switch node.SyncMode(*sync) {
	case node.SyncOrigin, node.SyncAll, node.SyncNone:
	default:
		fmt.Fprintf(stderr, "plait bench: --sync: %q is not origin, all or none\n", *sync)
		return 2
	}
	dir, err := os.MkdirTemp("", "plait-bench-")
	if err != nil {
		fmt.Fprintln(stderr, "plait bench:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(stderr, "plait bench: --cpuprofile:", err)
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if err := runBench(stdout, dir, *records, *perTxn, *samples, node.SyncMode(*sync)); err != nil {
		fmt.Fprintln(stderr, "plait bench:", err)
		return 1
	}
	return 0
}

const benchValue = 100 // bytes per record value; keys are 16 bytes

func benchKey(i int) []byte { return []byte(fmt.Sprintf("key-%012d", i)) }

func runBench(out io.Writer, dir string, records, perTxn, samples int, sync node.SyncMode) error {
	value := make([]byte, benchValue)
	_, _ = rand.Read(value)
	fmt.Fprintf(out, "plait bench: %d records of 16 B keys and %d B values, %d per transaction, --sync %s\n\n", records, benchValue, perTxn, sync)

	rocks, err := rawRocks(filepath.Join(dir, "raw"), records, perTxn, value)
	if err != nil {
		return err
	}
	wsRate, err := rawWebSocket(20_000, 1024)
	if err != nil {
		return err
	}
	repl, lat, err := replicate(dir, records, perTxn, samples, value, sync)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "| measure | rate | ratio to its limit |")
	fmt.Fprintln(out, "|---|---|---|")
	fmt.Fprintf(out, "| raw RocksDB, batches of %d, no fsync (limit) | %.0f records/s | 1 |\n", perTxn, rocks)
	fmt.Fprintf(out, "| raw WebSocket loopback, 1 KiB messages, pipelined (limit) | %.0f messages/s | 1 |\n", wsRate)
	fmt.Fprintf(out, "| replication A -> B, applied on B | %.0f records/s | %.2f of raw RocksDB |\n", repl, repl/rocks)
	fmt.Fprintf(out, "| write -> visible on B, p50 / p99 (%d single writes) | %s / %s | |\n", samples, lat[0], lat[1])
	return nil
}

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
func rawWebSocket(n, size int) (float64, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
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
		_ = c.Close(websocket.StatusNormalClosure, "")
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	ctx := context.Background()
	c, _, err := websocket.Dial(ctx, "ws://"+l.Addr().String(), nil)
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

// replicate runs nodes A and B (B dials A), writes the records on A and times until B
// applied them; then times single writes from A until B serves them.
func replicate(dir string, records, perTxn, samples int, value []byte, sync node.SyncMode) (float64, [2]time.Duration, error) {
	var lat [2]time.Duration
	start := func(name string, peers []node.Peer) (*node.Node, string, error) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, "", err
		}
		n, err := node.Start(node.Config{Name: name, DataDir: filepath.Join(dir, name), Listener: l, Peers: peers,
			Secret: []byte("plait bench secret of 32 bytes.."), Sync: sync, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		return n, "ws://" + l.Addr().String(), err
	}
	a, aURL, err := start("A", nil)
	if err != nil {
		return 0, lat, err
	}
	defer a.Stop()
	b, _, err := start("B", []node.Peer{{Name: "A", URL: aURL}})
	if err != nil {
		return 0, lat, err
	}
	defer b.Stop()
	ctx := context.Background()
	applied := func() uint64 {
		st, _ := b.Status()
		for _, o := range st.Origins {
			if o.Name == "A" {
				return o.AppliedSeq
			}
		}
		return 0
	}
	txns := uint64(records / perTxn)
	begin := time.Now()
	for i := 0; i < records; i += perTxn {
		ops := make([]wire.Op, 0, perTxn)
		for j := i; j < i+perTxn; j++ {
			ops = append(ops, wire.Op{Kind: wire.OpPut, Table: []byte("t"), Key: benchKey(j), Value: value})
		}
		if _, err := a.Write(ctx, ops); err != nil {
			return 0, lat, err
		}
	}
	deadline := time.Now().Add(10 * time.Minute)
	for applied() < txns {
		if time.Now().After(deadline) {
			return 0, lat, errors.New("B did not catch up within 10 minutes")
		}
		time.Sleep(time.Millisecond)
	}
	rate := float64(records) / time.Since(begin).Seconds()
	var ds []time.Duration
	for i := range samples {
		key := []byte(fmt.Sprintf("latency-%d", i))
		t0 := time.Now()
		if _, err := a.Write(ctx, []wire.Op{{Kind: wire.OpPut, Table: []byte("l"), Key: key, Value: value}}); err != nil {
			return 0, lat, err
		}
		for {
			if _, found, err := b.Get([]byte("l"), key); err != nil {
				return 0, lat, err
			} else if found {
				break
			}
			if time.Since(t0) > time.Minute {
				return 0, lat, errors.New("a write never became visible on B")
			}
			time.Sleep(50 * time.Microsecond)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	if len(ds) > 0 {
		lat = [2]time.Duration{ds[len(ds)/2].Round(time.Microsecond), ds[len(ds)*99/100].Round(time.Microsecond)}
	}
	return rate, lat, nil
}
