// Package node owns a running plait node's I/O around its replica: the RocksDB data
// directory, the WebSocket listener and dialers, the clock, timers and group commit. Every
// decision stays in protocol/replica; this package only drives it. One goroutine (the
// loop) owns the replica and the store; every socket's reader and writer, every dialer
// and every API call talk to it through closures run on that goroutine.
//
// # Versions
//
// A node offers protocol versions 1 to 4, or 1 to Config.MaxVersion (--protocol-max), so
// that it can stand as a peer of release 0.1, 0.2 or 0.3 while a cluster upgrades one node
// at a time (docs/operations.md §4); every session is the native core. The sockets are the same
// at every version: the one difference this package sees is version 1's, which has no
// credit, so a connection's reader stops reading while the replica pauses it (conn.go).
//
// # The jobs, by file
//
//   - node.go: Config, Start and Stop; the loop that owns the replica and the store; the
//     group commit of --sync and the compaction of purged logs, both off the loop; the
//     calls of the HTTP API (Write, Get, List, Digest, Status, the lag history); and the
//     peers added and removed while the node runs.
//   - conn.go: one WebSocket per connection, its reader and writer goroutines; the
//     replication endpoint and its bound on pending handshakes; the dialers and their
//     backoff. dialerr.go: the codes of a peer's last dial error (docs/contract.md §8.3);
//     peerurl.go: the peer URLs a node takes (ParsePeerURL).
//   - listener.go: the TLS listener, each failed handshake refused on record, wss:// beside
//     ws:// on one port; tls.go: the URLs a node with TLS may dial, the dialers' client,
//     the certificates' reload and the channel binding each session is given.
//   - storage.go: degraded storage, the shell's part: the free-space guard, the ballast
//     file and the recovery, a reopened store under a new replica (docs/design.md §18).
//   - snapshots.go: the listing's pinned snapshots (docs/design.md §26.4): a RocksDB
//     snapshot and the store's vector taken in one loop step, its pages read by the
//     live listing's rule, their bound, expiry and release; OpenSnapshot, SnapshotPage.
package node
