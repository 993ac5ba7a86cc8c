// Package rocksstore owns a plait node's data directory: the store.Store on RocksDB
// (grocksdb v1.7.14 on Debian's librocksdb-dev 7.8.3). One key space, split by a one-byte
// prefix (layout below); every Apply is one atomic write batch of the records, the log
// entry, the arrival position, the cursor, the origin's name and the peer cursor, so after
// kill -9 the node resumes exactly where its data ends. It passes the suite of package
// storetest, as the in-memory store does.
//
// Layout (integers big-endian, so keys sort by them):
//
//	'i'                                  identity: origin id (16) | name
//	'c' origin                           cursor: seq (8) | chain hash (32) | log bytes (8)
//	'l' origin seq                       log entry: the transaction encoding; or a run held as
//	                                     a skip, at its last seq: store.AppendSkipRow's row
//	                                     (0x00 | from | to | prev | hash | HLC | generation |
//	                                     tables), never a transaction's first byte
//	'a' pos                              arrival: origin (16) | seq (8)
//	'r' uvarint(len(table)) table key    record: flags (1: deleted, 2: tokened, 4: via) | HLC (8) |
//	                                     origin (16) | token (40, when tokened: wire.AppendToken) |
//	                                     via origin (16) | via HLC (8) (when via) | value
//	't' table                            a table that holds records (empty value)
//	'n' origin                           an origin's name
//	'p' peer origin                      a version-1 peer cursor (8)
//	'h'                                  the highest record HLC written (8)
//	'o'                                  the highest record token written (40), absent while none
//	'd' name                             a peer added through the API: its URL
//	'e' name                             its link's settings, unless the default: a LINK body
//	'f' origin                           the log's floor: seq (8) | chain hash (32) | HLC (8) | below (8)
//	'g'                                  the arrival floor (8)
//	'k' peer 0x00 origin                 a retention hold: seq (8) | since, Unix ns (8)
//	'b'                                  the base copy being taken: store.CopyState in CBOR
//	's' key                              a control document (store.Store's Control): its bytes
//	'm' leaf origin                      a hub's leaf mark: leaf seq (8) | leaf hash (32) |
//	                                     carrier origin (16) | carrier seq (8)
//
// A record's version is its HLC, origin and token (the conflict identity); a record a hub
// re-originated from a leaf also keeps the delivering identity of the entry that wrote it,
// its via origin and via HLC (flag 4, docs/design.md §27.8). A build from before hubs reads
// flags above 3 as a damaged record: it reports a data directory holding leaf writes
// damaged (plait check, and the reads that meet such a record), never misreads one. A leaf
// mark is written in the same batch as the entry that carries it (Apply), so a crash keeps
// both or neither.
//
// A run is kept at its last seq so that a log stays one row per seq range, ascending, and
// the range deletions of a purge, a copy's end and a reseed drop runs with the entries
// around them; Entry of a seq with no row, below the cursor, seeks the first row after it,
// which is the run holding the seq if any (at most one seek, and only for seqs inside a
// run: an entry's own row answers first).
//
// A cursor of 40 bytes (written before the log bytes were kept) has its log's bytes
// counted once when the store opens. Prefixes 'x' to 'z' are left for repair
// (docs/design.md §11).
//
// # The jobs, by file
//
//   - rocksstore.go: Open and Close, the layout, and the contract's reads and writes of
//     identity, cursors, logs, arrivals, records, names and peer cursors (Apply), purges
//     and holds (Purge, CompactLogs), Sync, and the peers added through the API
//     (DialPeers).
//   - basecopy.go: the snapshots a node serves copies from, the copy state it takes, and
//     the floors a copy's end writes; tombstones.go: tombstones retention drops;
//     antientropy.go: anti-entropy's repairs; reseed.go: a reseed, in one batch;
//     control.go: the control documents (the cluster map, member versions);
//     leafmarks.go: a hub's leaf marks.
//   - latch.go: after the first write or sync that fails, no more writes through RocksDB
//     (whose next write would abort the process), and RocksDB's own background errors
//     (BackgroundError), so that the node degrades and reopens the store instead.
package rocksstore
