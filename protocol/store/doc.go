// Package store owns the contract between a plait node's decisions (package replica) and
// its durable state: the Store interface and the values that cross it (records, log
// entries, cursors, holds, a base copy's state), and the checks every Store makes before it
// writes, so that an implementation decides nothing of its own:
//
//   - Store, Snapshot, their values and the errors a store returns (store.go); CheckBatch,
//     the check of one entry against its origin's cursor (and of a hub's leaf mark against
//     the entry's leaf block) before Apply writes it, CheckLeafMark, and Newer, the
//     conflict order of two versions (store.go too);
//   - CheckPurge, the plan of a retention purge a store writes in one batch (purge.go);
//   - Skip, SkippedError and the log row of a run of entries a node was not sent
//     (skip.go), checked by CheckBatch;
//   - CheckCopyEnd and LogsAfterCopy, the logs a base copy's end raises (basecopy.go);
//   - PlanReseed, CheckReseed and ReseedStore, a new origin id for a node restored from a
//     backup (reseed.go);
//   - Audit, the offline check that a store holds what its logs make (audit.go), and
//     Digest, a table's digest (digest.go);
//   - CheckControl and CheckControlKey, the rule of the control documents a store keeps
//     outside its records and logs (the cluster map, member versions), and ErrBadControl
//     (control.go);
//   - StorageError, a failure of the storage itself, which degrades a node rather than
//     stopping it (storageerror.go); errorf, this package's errors (errors.go).
//
// Package memstore is the reference in-memory Store and package storetest the suite
// every Store passes (the RocksDB store of the native shell among them). Like the rest of
// protocol/, this package does no I/O of its own, reads no clock and starts no goroutine:
// an implementation's storage is the caller's.
package store
