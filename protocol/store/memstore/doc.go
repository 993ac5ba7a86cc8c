// Package memstore owns the in-memory store.Store: the reference implementation of the
// store's semantics, which the simulator runs and the RocksDB store of the native shell
// must match (both pass the suite of package storetest). Nothing is written to disk: what
// Apply wrote survives a simulated process crash because a restarted replica is given the
// same *Store, and Sync has nothing to do.
//
// # The jobs, by file
//
// memstore.go holds them all: Store and every method of the contract (identity, cursors,
// logs and arrivals, records, names, peer cursors, Apply, purges, holds, tombstones,
// snapshots and the base copy's state, repairs, reseed, control documents); Clone, an
// independent copy, which the simulator takes at each Sync to model a power loss, and to
// restore a backup; and Corrupt, a record changed around the replica, for tests of a
// store that lost or altered one.
package memstore
