// Package demo owns plait demo (docs/contract.md §15): four nodes in one process on loopback,
// on real RocksDB in a temporary directory and real WebSockets, run by internal/cluster.
// A -> B -> C, with a second relay B2 that also carries A and joins once C takes A
// through B; writes on every node; lag converging; B stops, and A's channel on C moves to
// B2 with nothing delivered twice.
//
// # The jobs, by file
//
// demo.go holds them all: Run, the cluster it starts, what it writes and the checks it
// ends with.
package demo
