package replica

import (
	"crypto/sha256"
	"errors"
	"math"
	"strconv"

	"plait/protocol"
	"plait/protocol/wire"
)

// pump sends what every connection may send now: each version-2 channel the peer opened,
// from its next seq while credit lasts, and the version-1 arrival stream while the peer's
// unacknowledged bytes stay within the window.
func (r *Replica) pump() {
	for _, c := range r.connList {
		if !c.established || c.sess.State() != protocol.StateEstablished {
			continue
		}
		if c.version == 1 {
			if c.v1Subscribed {
				r.pumpV1(c)
			}
			continue
		}
		more := true
		if !r.sendsTo(c) {
			continue // the link's direction (links.go): its streams were dropped
		}
		if r.pumpIdle(c) {
			continue // no stream has an entry to send, and no copy is served on it
		}
		// A purged answer drops a stream while the streams are walked: walk a copy, and
		// once the streams change, take each from out again.
		gen, streams := c.outGen, append(r.streamBuf[:0], c.outList...)
		for _, s := range streams {
			if c.outGen != gen {
				if s = c.out[s.origin]; s == nil {
					continue
				}
			}
			if s.next > r.servable(s.st) && !s.run.on {
				continue // nothing to send (pumpV2 would return at once)
			}
			if more = r.pumpV2(c, s.origin, s); !more {
				break
			}
		}
		clear(streams)
		r.streamBuf = streams[:0]
		// A copy takes what the origins' streams leave of the connection: live entries first.
		if s := r.cp.serving[c.id]; s != nil && more {
			r.pumpCopy(c, s)
		}
	}
}

// pumpIdle reports whether pump has nothing to do on a connection: no stream with an
// entry above what it sent, and no base copy served. Most connections are idle at most
// settles, so pump checks this before it copies a connection's streams to walk them.
func (r *Replica) pumpIdle(c *conn) bool {
	for _, s := range c.outList {
		if s.next <= r.servable(s.st) || s.run.on {
			return false
		}
	}
	return len(r.cp.serving) == 0 || r.cp.serving[c.id] == nil
}

// servable is the highest seq of an origin this node may send: all it applied, or for its
// own origin with HoldUnsynced what is durable against power loss, and none of it once the
// origin is found rewound.
func (r *Replica) servable(st *originState) uint64 {
	if st.id == r.id.Origin && r.rewound != nil {
		return 0 // rewound: its entries above a peer's position may be a fork (rewind.go)
	}
	if st.id == r.id.Origin && r.cfg.HoldUnsynced {
		return min(st.applied.Seq, r.synced)
	}
	return st.applied.Seq
}

// pumpV2 sends one channel's entries; it reports false when the connection cannot take
// more now (its send buffer is full or it closed).
func (r *Replica) pumpV2(c *conn, o wire.OriginID, s *outStream) bool {
	limit := r.servable(s.st)
	filter := c.version >= v4 && (len(r.cmap.cur.Placement) > 0 && !r.cfg.Mutations.IgnorePlacement || r.linkFilters(c))
	for s.next <= limit {
		raw, err := r.store.Entry(o, s.next)
		if sk, ok := skipped(err); ok {
			// A run this node holds as a skip: the peer is sent it as one, and takes the
			// origin elsewhere if it carries a table of it (§24.2). An older peer cannot be
			// sent it at all: to it the run is purged.
			if c.version < v4 {
				return r.runPurged(c, o, sk)
			}
			if !r.addRun(c, o, s, sk.To, sk.Hash, sk.HLC, sk.Tables) {
				return false
			}
			s.next = sk.To + 1
			continue
		}
		if isPurged(err) { // the peer's hold lapsed while it was behind
			r.purgedAnswer(c, o, "origin "+o.String()+" is purged past "+strconv.FormatUint(s.next, 10))
			return c.sess.State() == protocol.StateEstablished
		}
		if !r.check(err) {
			return false
		}
		// Formats 2 (a token) and 3 (a leaf block) are version 4's: to an older peer the
		// entry is purged.
		if c.version < v4 && len(raw) > 0 && raw[0] >= wire.TxnFormat2 {
			return r.tokenPurged(c, o, s.next, raw)
		}
		if filter {
			if hlc, tables, out := r.leftOut(c, raw); out {
				if !r.addRun(c, o, s, s.next, sha256.Sum256(raw), hlc, tables) {
					return false
				}
				s.next++
				continue
			}
		}
		if !r.flushRun(c, o, s) {
			return false
		}
		if s.blocked > c.sess.V2().Credit(o) {
			return true
		}
		if size := protocol.DataFrameSize(len(raw)); size > c.sess.V2().Credit(o) {
			s.blocked = size
			return true
		}
		s.blocked = 0
		if !r.nameOrigins(c, o) {
			return false
		}
		if err := c.sess.V2().Send(raw); err != nil {
			return r.sendRefused(c, err)
		}
		s.next++
	}
	return r.flushRun(c, o, s)
}

// sendRefused handles a refused Send or Offer: a full send buffer waits for the next
// round; a divergence found by Send closes only that channel (its event follows); an entry
// the peer's frame limit cannot carry ends the connection, which could never make progress.
func (r *Replica) sendRefused(c *conn, err error) bool {
	var we *wire.Error
	if errors.As(err, &we) {
		switch we.Code {
		case wire.CodeSendBufferFull:
			return false
		case wire.CodeDivergence:
			return true
		case wire.CodeFrameTooLarge:
			r.closeConn(c, wire.CodeFrameTooLarge, we.Message)
			return false
		}
	}
	r.check(err)
	return false
}

// pumpV1 offers the arrival log after the peer's position, skipping the peer's own
// entries, within the window of unacknowledged bytes.
func (r *Replica) pumpV1(c *conn) {
	limit := uint64(math.MaxUint64)
	if r.cfg.HoldUnsynced {
		limit = r.syncedArrive
	}
	window := r.cfg.Limits.MaxUnackedBytes
	for c.v1Unacked < window && c.v1After < min(r.arrivals, limit) {
		batch, err := r.store.Arrivals(c.v1After, arrivalBatch)
		if isPurged(err) { // the peer's hold lapsed while it was behind
			r.purgedAnswer(c, wire.OriginID{}, "the arrival order is purged past "+strconv.FormatUint(c.v1After, 10))
			return
		}
		if !r.check(err) || len(batch) == 0 {
			return
		}
		for _, a := range batch {
			if a.Pos > limit || c.v1Unacked >= window {
				return
			}
			v, err := wire.ParseTxn(a.Txn)
			if !r.check(err) {
				return
			}
			if v.Origin == c.peerOrigin {
				c.v1After = a.Pos
				continue
			}
			if v.Format() >= wire.TxnFormat2 {
				// A fencing token or a leaf block, which version 1 does not carry: to this
				// peer the entry is purged, and version 1 has no answer for that but closing
				// (§25.4, §27, §24.3).
				r.counters.PurgedAnswers++
				r.closeConn(c, wire.CodePurged, "origin "+v.Origin.String()+": entry "+strconv.FormatUint(v.Seq, 10)+
					" is of transaction format "+strconv.Itoa(int(v.Format()))+", which a version-1 connection does not carry")
				return
			}
			if !r.nameOrigins(c, v.Origin) {
				return
			}
			if err := c.sess.V1().Offer(a.Pos, a.Txn); err != nil {
				r.sendRefused(c, err)
				return
			}
			c.v1After = a.Pos
			c.v1InFlight = append(c.v1InFlight, sentPos{pos: a.Pos, size: len(a.Txn)})
			c.v1Unacked += len(a.Txn)
		}
	}
}
