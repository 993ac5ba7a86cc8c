// Package storetest owns the test suite of store.Store: every Store implementation (the
// in-memory one of package memstore, the RocksDB one of the native shell) runs Run, so
// that they all have exactly the semantics documented on the interface.
//
// # The jobs, by file
//
//   - storetest.go: Run, the suite over a new empty store per test; RunReopen, what a
//     store keeps across a reopen without Sync (a killed process); the shared Identity,
//     Origin and Chain; and the tests of applies, records, names, peer cursors and Sync.
//   - purge.go: bounded history (log bytes, floors, the arrival floor, purges, holds).
//   - basecopy.go: snapshots, copied chunks, the end of a copy, dropped tombstones, and
//     anti-entropy's repairs.
//   - reseed.go: a reseed and the reseeds a store refuses; RunReseedReopen, a reseed
//     that survives a reopen.
//   - control.go: control documents: read back as written, within their bounds, and
//     apart from the records and logs (RunReopen keeps them too).
//   - leaves.go: fan-in hubs: a record's via through every write and read, a hub's leaf
//     marks written with Apply, and a hub's reseed; LeafChain, a hub's re-originated
//     leaf writes (RunReopen keeps vias and marks too).
package storetest
