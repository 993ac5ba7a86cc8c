package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/coder/websocket"
	"github.com/linxGnu/grocksdb"

	"plait/shells/native/node"
)

// benchConfig is plait bench's flags.
type benchConfig struct {
	records, perTxn, samples, writers int
	stalled                           int // records written while the receiver is stopped (0: skip)
	sync                              node.SyncMode
	dir                               string
	value                             []byte
}

// bench is plait bench: replication measured beside the machine's physical limits, in one
// run (DESIGN.md §6): raw RocksDB batched writes of the same records and raw WebSocket
// loopback messages, then nodes replicating: A -> B through the Go API and through HTTP
// batches, write -> visible latency and the extra latency of a relay hop, 16 origins
// against 1 over one connection, and memory with a stalled receiver.
func bench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plait bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c benchConfig
	fs.IntVar(&c.records, "records", 200_000, "records replicated in each throughput measure")
	fs.IntVar(&c.perTxn, "per-txn", 100, "records per transaction")
	fs.IntVar(&c.samples, "latency-samples", 1000, "single writes timed from A until visible on B and C")
	fs.IntVar(&c.writers, "writers", 16, "concurrent writers on A (group commit answers them together)")
	fs.IntVar(&c.stalled, "stalled-records", 500_000, "records written to a node whose receiver is stopped (SIGSTOP), sender RSS sampled; 0 skips")
	sync := fs.String("sync", "origin", "origin | all | none (the nodes' --sync)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the in-process measures to this file")
	if !parseFlags(fs, args) {
		return 2
	}
	c.sync = node.SyncMode(*sync)
	switch {
	case c.records <= 0 || c.perTxn <= 0 || c.records%c.perTxn != 0:
		fmt.Fprintln(stderr, "plait bench: --records must be a positive multiple of --per-txn")
		return 2
	case c.records%(16*c.perTxn) != 0:
		fmt.Fprintln(stderr, "plait bench: --records must be a multiple of 16 transactions (the 16-origin measure splits them)")
		return 2
	case c.writers <= 0 || c.samples <= 0 || c.stalled < 0:
		fmt.Fprintln(stderr, "plait bench: --writers and --latency-samples must be positive, --stalled-records not negative")
		return 2
	case c.sync != node.SyncOrigin && c.sync != node.SyncAll && c.sync != node.SyncNone:
		fmt.Fprintf(stderr, "plait bench: --sync: %q is not origin, all or none\n", *sync)
		return 2
	}
	dir, err := os.MkdirTemp("", "plait-bench-")
	if err != nil {
		fmt.Fprintln(stderr, "plait bench:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	c.dir = dir
	raw := make([]byte, benchValue/2)
	_, _ = rand.Read(raw)
	c.value = []byte(hex.EncodeToString(raw)) // text, so the HTTP API carries it as is
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
	if err := runBench(stdout, &c); err != nil {
		fmt.Fprintln(stderr, "plait bench:", err)
		return 1
	}
	return 0
}

const benchValue = 100 // bytes per record value; keys are 16 bytes

func benchKey(i int) []byte { return fmt.Appendf(nil, "key-%012d", i) }

func runBench(out io.Writer, c *benchConfig) error {
	fmt.Fprintf(out, "plait bench: 16 B keys, %d B values, %d records per transaction, --sync %s, %d writers\n\n",
		benchValue, c.perTxn, c.sync, c.writers)
	fmt.Fprintln(out, "| measure | result | ratio |")
	fmt.Fprintln(out, "|---|---|---|")
	row := func(measure, result, ratio string) { fmt.Fprintf(out, "| %s | %s | %s |\n", measure, result, ratio) }

	rocks, err := rawRocks(filepath.Join(c.dir, "raw"), c.records, c.perTxn, c.value)
	if err != nil {
		return err
	}
	row(fmt.Sprintf("raw RocksDB, %d records in batches of %d, no fsync (the limit)", c.records, c.perTxn), rate(rocks, "records"), "1")
	ws, err := rawWebSocket(20_000, 1024)
	if err != nil {
		return err
	}
	row("raw WebSocket loopback, 20,000 pipelined 1 KiB messages (the limit)", rate(ws, "messages"), "1")

	api, err := replicateAB(c, false)
	if err != nil {
		return err
	}
	row(fmt.Sprintf("replication A -> B, %d records written through the Go API", c.records), rate(api, "records"), ratio(api, rocks, "raw RocksDB"))
	viaHTTP, err := replicateAB(c, true)
	if err != nil {
		return err
	}
	row(fmt.Sprintf("replication A -> B, %d records written as HTTP batches", c.records), rate(viaHTTP, "records"), ratio(viaHTTP, rocks, "raw RocksDB"))

	lat, err := latency(c)
	if err != nil {
		return err
	}
	row(fmt.Sprintf("write -> visible on B (one hop), p50 / p99 of %d single writes", c.samples), lat.b[0].String()+" / "+lat.b[1].String(), "")
	row("write -> visible on C (two hops, through B), p50 / p99", lat.c[0].String()+" / "+lat.c[1].String(), "")
	row("extra latency of the relay hop (C minus B per write), p50 / p99", lat.hop[0].String()+" / "+lat.hop[1].String(), "")

	one, err := origins(c, 1)
	if err != nil {
		return err
	}
	sixteen, err := origins(c, 16)
	if err != nil {
		return err
	}
	row(fmt.Sprintf("catch-up over one connection, %d records of 1 origin", c.records), rate(one, "records"), "1")
	row(fmt.Sprintf("catch-up over one connection, the same records from 16 origins"), rate(sixteen, "records"), ratio(sixteen, one, "1 origin"))

	if c.stalled > 0 {
		st, err := stalledReceiver(c)
		if err != nil {
			return err
		}
		row("sender RSS before writing (receiver stopped)", mib(st.senderIdle), "")
		row(fmt.Sprintf("sender peak RSS while %d records were written to it, receiver stopped", c.stalled), mib(st.senderPeak), fmt.Sprintf("+%s", mib(st.senderPeak-st.senderIdle)))
		row("receiver RSS when stopped / peak after it resumed and caught up", mib(st.receiverStopped)+" / "+mib(st.receiverPeak), "")
		row("receiver catch-up after resuming", rate(st.catchUp, "records"), "")
	}
	return nil
}

func rate(r float64, unit string) string { return fmt.Sprintf("%.0f %s/s", r, unit) }

func ratio(r, limit float64, of string) string { return fmt.Sprintf("%.2f of %s", r/limit, of) }

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
