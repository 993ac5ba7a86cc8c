package replica

import (
	"crypto/sha256"
	"strconv"
	"time"

	"plait/protocol/wire"
)

// Origin rewind (docs/design.md §20). A node whose data directory is restored from an
// older copy holds less of its own log than its peers applied of it, and, once it writes,
// a log that forks from theirs: the seqs it issues again are other entries under the same
// (origin, seq). Chain hashes cover the prefix, so an equal hash at seq c means identical
// logs 1..c; a position that is above the node's own log, or at a seq it holds with
// another hash, cannot be a peer that is merely behind. Both ends look:
//
//   - a peer finds the origin's own node (the connection's peer origin, never a relay)
//     advertising a head below what it applied of that origin with no higher head for
//     StallTimeout after (suspectHead), or sending an entry of it
//     that differs from the one held (or does not extend it), or reporting that the peer's
//     position is not in its log: the origin is rewound there. The peer keeps its data,
//     takes the origin from no connection to that node, and closes it with
//     CodeOriginRewound; it keeps relaying the origin's old timeline to the others;
//   - the node itself finds a peer's SUBSCRIBE, or a relay's HEADS, of its own origin
//     above its log or at a seq whose hash differs: it is rewound. It records the evidence
//     (NodeStatus.Rewound), refuses local writes with CodeOriginRewound naming the way
//     out, serves none of its own entries (a peer behind would take the fork), and closes
//     the connection with CodeOriginRewound. A base copy that holds its own origin above
//     its log (basecopy.go) is the same evidence.
//
// The way out is `plait reseed` (PlanReseed, Store.Reseed): a new origin id, the old one
// made an ordinary foreign origin whose entries stream back from the peers, and every
// entry of it this node held re-issued under the new id.

// RewindStatus is the evidence that this node's own origin is rewound (NodeStatus.Rewound):
// the first peer position that showed it.
type RewindStatus struct {
	Peer string // the peer whose position showed it
	// Seq and Hash are the peer's position of this node's origin (Hash zero for a head,
	// which carries none); OwnSeq is this node's own log's head when it was found.
	Seq    uint64
	Hash   wire.Hash
	OwnSeq uint64
	// How names the evidence: "subscribe" (the peer's SUBSCRIBE), "heads" (a relay's
	// HEADS) or "copy" (a base copy's snapshot).
	How string
	At  time.Time
}

// Reseed is the operator's way out named by every origin-rewound refusal.
const reseedAdvice = "stop the node and run `plait reseed --data DIR` (docs/operations.md §13)"

// Rewound is the evidence that this node's own origin is rewound, nil when none was seen.
func (r *Replica) Rewound() *RewindStatus {
	if r.rewound == nil {
		return nil
	}
	rs := *r.rewound
	return &rs
}

// ownPosition checks a peer's position of this node's own origin: it reports whether the
// position shows the origin rewound (above its log, or at a seq it holds with another
// hash; hashless positions, heads, are compared by seq only). A seq below the floor has
// nothing left to compare.
func (r *Replica) ownPosition(seq uint64, h wire.Hash, hashed bool) (bool, error) {
	own := r.origins[r.id.Origin].applied
	f := r.floor(r.id.Origin)
	switch {
	case seq > own.Seq:
		return true, nil
	case !hashed || seq == 0 || seq < f.Seq:
		return false, nil
	case seq == own.Seq:
		return h != own.Hash, nil
	case seq == f.Seq:
		return h != f.Hash, nil
	}
	raw, err := r.store.Entry(r.id.Origin, seq)
	if err != nil {
		return false, err
	}
	return sha256.Sum256(raw) != h, nil
}

// checkOwnPosition acts on a peer's position of this node's own origin: when it shows
// the origin rewound, the evidence is recorded and the connection closed. It reports
// whether it did.
func (r *Replica) checkOwnPosition(c *conn, seq uint64, h wire.Hash, hashed bool, how string) bool {
	rewound, err := r.ownPosition(seq, h, hashed)
	if !r.check(err) || !rewound {
		return false
	}
	r.ownRewound(c, RewindStatus{Peer: c.peerName, Seq: seq, Hash: h, How: how})
	r.closeConn(c, wire.CodeOriginRewound, "this node's origin "+r.id.Origin.String()+" is rewound: the peer holds seq "+
		strconv.FormatUint(seq, 10)+", which this node's log does not (it ends at "+
		strconv.FormatUint(r.origins[r.id.Origin].applied.Seq, 10)+"); "+reseedAdvice)
	return true
}

// ownRewound records evidence that this node's own origin is rewound (the first is kept).
// From then on the node serves none of its own entries (servable): a peer that is behind
// would take the fork.
func (r *Replica) ownRewound(c *conn, ev RewindStatus) {
	r.counters.OriginRewinds++
	if r.rewound != nil {
		return
	}
	ev.OwnSeq, ev.At = r.origins[r.id.Origin].applied.Seq, r.now
	r.rewound = &ev
}

// rewindRefusal is the error of a local write on a rewound node, or nil: the node issues
// no seq that a peer may already hold with another entry.
func (r *Replica) rewindRefusal() error {
	rw := r.rewound
	if rw == nil {
		return nil
	}
	return wire.NewError(wire.CodeOriginRewound, "this node's origin is rewound (peer "+strconv.Quote(rw.Peer)+
		" holds seq "+strconv.FormatUint(rw.Seq, 10)+", this node's log ends at "+strconv.FormatUint(rw.OwnSeq, 10)+
		"): it issues no seq; "+reseedAdvice)
}

// headSuspicion is a head of the peer's own origin below what this node applied of it,
// seen at a connection, not yet taken as a rewind.
type headSuspicion struct {
	head, applied uint64    // the head advertised; this node's applied seq then
	until         time.Time // the rewind is found when no head at or above applied came by then
}

// suspectHead takes in a head of the connection's peer origin below the applied seq. It
// is a rewind only once no head at or above that applied seq follows within
// StallTimeout: a head is overtaken by its origin's next entries when they reach this
// node over a relay faster than the direct link (a backlog on it, or a shorter path), so
// a head below the applied seq alone is not evidence. A rewound node's head stays below
// until it writes again, and then its entries, or this node's SUBSCRIBE at its position,
// show the fork by hash.
func (r *Replica) suspectHead(c *conn, st *originState, head uint64) {
	if c.headSuspect == nil {
		c.headSuspect = &headSuspicion{head: head, applied: st.applied.Seq, until: r.now.Add(r.cfg.StallTimeout)}
	}
}

// confirmHeads finds a rewind at each connection whose suspicion was not cleared in time
// (suspectHead); Tick calls it.
func (r *Replica) confirmHeads() {
	var due []*conn
	for _, c := range r.connList {
		if hs := c.headSuspect; hs != nil && !r.now.Before(hs.until) {
			due = append(due, c)
		}
	}
	for _, c := range due {
		hs := c.headSuspect
		c.headSuspect = nil
		if r.conns[c.id] != c || c.closing {
			continue
		}
		r.peerRewound(c, r.origin(c.peerOrigin), "its own node advertises its head at seq "+strconv.FormatUint(hs.head, 10)+
			", below the "+strconv.FormatUint(hs.applied, 10)+" applied here, and no higher head followed for "+r.cfg.StallTimeout.String())
	}
}

// peerRewound handles what shows a peer's own origin rewound, seen on the connection to
// that node: the origin is flagged, not taken from that connection, and the connection
// closed with origin-rewound. Before closing, the peer is sent this node's position of
// its origin (a SUBSCRIBE, withdrawn at once) when it was not: that is how the rewound
// node learns it is.
func (r *Replica) peerRewound(c *conn, st *originState, why string) {
	r.counters.OriginRewinds++
	st.rewound = true
	if !c.in[st.id] && st.applied.Seq > 0 {
		r.subscribe(c, st, st.applied.Seq)
	}
	r.unsubscribe(c, st.id)
	if st.source == c.id {
		r.loseSource(st, ReasonRewound)
	}
	r.closeConn(c, wire.CodeOriginRewound, "origin "+st.id.String()+" ("+c.peerName+") is rewound: "+why+
		"; this node keeps its entries of it; the rewound node's operator runs `plait reseed`")
}
