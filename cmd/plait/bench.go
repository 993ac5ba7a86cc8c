package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"plait/internal/bench"
	"plait/shells/native/node"
)

// benchmark is plait bench: internal/bench's measures of the load its flags give. It returns
// the exit status: 2 for bad flags, 1 when a measure fails.
func benchmark(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("plait bench", stderr)
	var c bench.Config
	fs.IntVar(&c.Records, "records", 200_000, "records replicated in each throughput measure")
	fs.IntVar(&c.PerTxn, "per-txn", 100, "records per transaction")
	fs.IntVar(&c.Samples, "latency-samples", 1000, "single writes timed from A until visible on B and C")
	fs.IntVar(&c.Writers, "writers", 16, "concurrent writers on A (group commit answers them together)")
	fs.IntVar(&c.Stalled, "stalled-records", 500_000, "records written to a node whose receiver is stopped (SIGSTOP), sender RSS sampled; 0 skips")
	fs.IntVar(&c.Copy, "copy-records", 500_000, "records of the base copy measures (copy rate beside a raw RocksDB scan and write, copy vs replay); 0 skips")
	fs.IntVar(&c.Placement, "placement-records", 0, "records of 1 KiB in each of 4 tables on 4 nodes: disk per node with each table on 2 of them against on all 4, a forwarded GET against a carrier's, a table moved to a new carrier; 0 skips")
	fs.IntVar(&c.Move, "move-records", 0, "with --placement-records: records of 1 KiB of the table moved to a new carrier (0: --placement-records)")
	fs.IntVar(&c.LockCycles, "lock-cycles", 0, "lock cycles (acquire, read, write, release of a fenced table's key) per client on 3 and 5 nodes: through the key's home, through another node, and 4 clients on one key; 0 skips")
	fs.BoolVar(&c.TLS, "tls", false, "also measure the raw WebSocket and the replication A -> B over ws:// against wss:// (mutual TLS 1.3, throwaway certificates)")
	fs.IntVar(&c.TLSRounds, "tls-rounds", 3, "with --tls: alternated rounds of the ws:// and the wss:// measure")
	fs.IntVar(&c.FeedRecords, "feed-records", 200_000, "records written on A and applied by B, whose change feed then reads them back from oldest (through package client and as raw lines), against B's apply rate; 0 skips")
	fs.IntVar(&c.FeedSamples, "feed-samples", 1000, "single writes on A timed until visible on B and until B's change feed delivers them to a consumer; 0 skips")
	fs.IntVar(&c.FeedIdle, "feed-idle", 100, "idle change feeds opened on one node, its heap and stacks before and after; 0 skips")
	fs.DurationVar(&c.FeedStall, "feed-stall", 60*time.Second, "how long one change feed's consumer stops reading under writes, the node's heap and stacks sampled every second; 0 skips")
	fs.IntVar(&c.HubRecords, "hub-records", 0, "records written on a hub as its own, then as many on its leaf: the rate the hub re-originates them against its own writes' (a core node, the hub and the leaf under a map with a leaf window); 0 skips")
	fs.IntVar(&c.HubSamples, "hub-samples", 0, "single writes on a hub's leaf timed until a core node serves them (leaf -> hub -> core), alternated with as many on the hub (one hop between peers); 0 skips")
	sync := fs.String("sync", "origin", "origin | all | none (the nodes' --sync)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the in-process measures to this file")
	if !parseFlags(fs, args) {
		return 2
	}
	c.Sync = node.SyncMode(*sync)
	if err := c.Check(); err != nil {
		fmt.Fprintln(stderr, "plait bench:", err)
		return 2
	}
	if c.Stalled > 0 {
		// The stalled-receiver measure runs this binary's plait serve.
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(stderr, "plait bench:", err)
			return 1
		}
		c.Binary = self
	}
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
	if err := bench.Run(stdout, c); err != nil {
		fmt.Fprintln(stderr, "plait bench:", err)
		return 1
	}
	return 0
}
