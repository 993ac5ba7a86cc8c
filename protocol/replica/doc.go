// Package replica owns one plait node's decisions: which peer each origin is taken from
// and when it moves (the routing rule, docs/contract.md §10), what is relayed to whom, whether a
// received entry is applied, skipped, re-requested or flagged, last-writer-wins, when an
// entry is acknowledged (persist before ack), and the status a node reports. It drives
// one protocol session per connection through their public API (the Session interface)
// and keeps its durable state in a store.Store (package store holds that contract). Like
// the rest of protocol/, it does no I/O, reads no clock and starts no goroutine: the same
// inputs give the same outputs, which is what lets the simulator (conformance/sim) prove
// it under seeded faults.
//
// # The usage loop
//
// A shell (the native node, the simulator) owns the sockets, the clock and the store, and
// drives one Replica from one goroutine:
//
//	r, err := replica.New(cfg, store)          // reads identity, cursor vector, origin names
//	id, _ := r.Open(now, wire.RoleDialer, "B", nonce) // per socket dialed (or accepted:
//	                                           // RoleListener, "")
//	for {
//		for _, out := range r.Output() {       // what each connection must send, in order
//			for _, m := range out.Messages {
//				sockets[out.Conn].Write(m) // one binary WebSocket message each
//				r.Release(out.Conn, m)     // optional: reuse the buffer
//			}
//			if out.Closed {                // the session ended: close the socket
//				sockets[out.Conn].Close()
//			}
//		}
//		select {                               // then feed exactly one input
//		case in := <-incoming:                 // not while r.ReadPaused(in.conn) (version 1)
//			r.Receive(now, in.conn, in.msg)
//		case <-timer(r.NextDeadline()):
//			r.Tick(now)
//		case id := <-socketGone:
//			r.Disconnected(now, id, reason)
//		case w := <-writes:
//			seq, err := r.Write(now, w.ops) // a local transaction; answer it once
//			                                // seq <= r.SyncedSeq() (HoldUnsynced)
//		case <-groupCommit:                  // with HoldUnsynced, while r.NeedsSync():
//			p := r.SyncPoint()              // what the sync will cover
//			store.Sync()                    // (may run on another goroutine)
//			r.Synced(now, p)                // now it may be served
//		}
//		moves := r.Moves()                  // source changes, for logs (kept bounded)
//	}
//
// Every input settles completely before it returns: sessions' events are handled,
// sources re-chosen, heads advertised and entries sent as far as credit allows. A failed
// input too: a connection the replica closed is dropped within the input that closed it,
// with Output.Closed, so a message the shell read from it meanwhile gets ErrUnknownConn,
// which the shell passes over. An error wrapping ErrStopped means the store failed or the
// replica met a state it cannot explain; the shell stops the node.
//
// # Decisions
//
//   - Receiving. Sessions check every entry against their channel (version 2) or receive
//     vector (version 1); the replica checks it again against the store's cursor: the next
//     seq with the right previous hash is applied (one atomic Store.Apply: records, log
//     entry, cursor), one already held is a counted duplicate (and must be the same
//     entry, else a divergence), one further ahead is a gap. Only then is it acknowledged.
//   - Last-writer-wins. A record version is (HLC timestamp, origin id); an operation
//     replaces a record unless the record's version is newer. Deletes leave tombstones
//     that keep their version, so a late older put loses everywhere.
//   - Routing (version 2). One source per origin: the origin itself when connected, else
//     the peer advertising the highest head above the applied seq, then the lowest RTT,
//     then the lowest name. An origin moves only when its source is lost (disconnected,
//     withdrawn or behind the applied seq, diverged), the origin itself connects, or
//     another head stays ahead for
//     Config.MoveDelay. A move unsubscribes that origin's channel and subscribes it at
//     the node's own applied position on the new source: no other origin is touched and
//     nothing applied is sent again. A node never advertises an origin to its source
//     (split horizon).
//   - The [T, head] hole. A source that advertises a head above the applied seq while
//     nothing is applied for Config.StallTimeout has lost an entry at the tail of the
//     stream; the channel resumes from the applied seq, counted as a gap.
//   - Version 1 peers. A connection negotiated at version 1 streams the sender's whole
//     arrival order from the receiver's scalar cursor for that peer (persisted with each
//     apply). The replica observes every apply on every version-1 session, so an entry
//     applied through another path is a duplicate, not a gap. A gap closes the session and
//     rewinds the scalar cursor to before the missing entry.
//   - Divergence. An entry that contradicts the log is never applied; its origin is
//     flagged (Status Diverged) until a later entry of it is applied, and the channel that
//     carried it is left out of the candidates for Config.DivergenceRetry.
//   - One connection per peer: when both sides dial, the connection dialed by the node
//     with the lower origin id survives.
//
// # Versions
//
// A replica speaks every protocol version to a peer that offers it: version 1's one
// stream per connection (scalar cursors, arrival order), version 2's channel per origin
// with routing by advertised heads, and version 3's bounded history (floors, the purged
// answer, base copies), anti-entropy and clock offsets. What a peer of an older version
// cannot take is not asked of it.
//
// # The jobs, by file
//
//   - config.go: the configuration and its defaults; replica.go: the Replica, New and
//     the inputs; session.go: the Session interface a session of any build implements.
//   - conns.go: connections from Open to drop, and one connection per peer; events.go:
//     what each session event leads to; errors.go: which failures stop the node and
//     which close one connection; refusals.go: connections that ended in an error.
//   - write.go: local writes and the HLC clock; apply.go: receiving an entry and
//     last-writer-wins; send.go: streaming entries as far as credit allows; routing.go:
//     the source of each origin and its moves.
//   - retention.go: bounded history (docs/design.md §14); basecopy.go: the base copy
//     (§15); clock.go: the bound on clock offset (§17); storage.go: degraded storage
//     (§18); antientropy.go: anti-entropy (§19); rewind.go: an origin rewound (§20);
//     retry.go: the bounded-retry budget (§21); health.go and status.go: health and the
//     status (§22); scan.go: reading records past damaged ones.
//
// The store contract the replica writes through, with its checks, is package store.
package replica
