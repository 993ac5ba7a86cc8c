// Package bench owns plait bench's measures (BENCHMARKS.md): replication beside the
// machine's physical limits, in one run. Raw RocksDB batched writes of the same records
// and raw WebSocket loopback messages give the limits; nodes of internal/cluster then
// replicate A -> B through the Go API and through HTTP batches, time write -> visible at
// one and two hops, catch up 16 origins against 1 over one connection, take a base copy
// beside a raw RocksDB scan and write of the same records and against replaying the whole
// log (basecopy.go), as plait serve processes, hold a stalled receiver's backlog, and, with
// --placement-records, weigh placement: disk per node with each table on half the nodes,
// a forwarded read against a carrier's, a table moved to a new carrier (placement.go), and
// weigh change feeds: a feed's backlog read against its node's apply rate, a write's event
// against its visibility, and the node's memory under idle feeds and a stalled consumer
// (feeds.go), and weigh fan-in hubs: a hub's re-origination of its leaf's writes against
// its own writes, and a leaf's write until a core node has it against one hop between
// peers (hubs.go). Run prints one table row a measure.
//
// # The jobs, by file
//
//   - bench.go: Config, plait bench's flags and their checks; Run and the table it
//     prints; the raw limits (RocksDB batched writes, WebSocket loopback messages).
//   - replication.go: the replication measures, through the Go API and through HTTP
//     batches, the write-to-visible latency at one and two hops, and the catch-up of 16
//     origins against 1.
//   - basecopy.go: the base copy beside the raw scan and write of its records, and the
//     catch-up by replaying a whole log; stall.go: the memory of a stalled receiver and
//     its sender, each a plait serve process; tls.go: the --tls measures over wss://;
//     placement.go: the --placement-records measures; locks.go: the --lock-cycles
//     measures; feeds.go: the --feed-* measures; hubs.go: the --hub-* measures.
package bench
