package replica

import (
	"plait/protocol/lock"
	"plait/protocol/wire"
)

// A read under a lock waits until this node has applied the lease's fence (docs/design.md
// §25.7). FenceReach tells the shell whether waiting can end: a fence this node applied is
// met whatever retention purged since; one above its position waits while some connection
// may still bring the missing entries, and is unreachable once none can, so that the read
// answers fence-unreachable at once rather than wait out --lock-fence-wait for entries no
// peer still holds.

// FenceState is what FenceReach says of a fence.
type FenceState int

const (
	// FenceMet: this node has applied every position of the fence.
	FenceMet FenceState = iota
	// FenceWaiting: some position is above this node's, and something may still bring it:
	// a connection that can serve the origin from here, a copy running, or no connection
	// that says otherwise.
	FenceWaiting
	// FenceUnreachable: some position is above this node's, no copy runs, and every
	// connection this node takes entries from said that its log of the origin begins
	// above this node's position (its floor); there is at least one such connection.
	FenceUnreachable
)

// FenceReach says whether this node has applied fence, may still apply it, or cannot from
// what it is connected to now; for the two last, the first origin of the fence above its
// position (for FenceUnreachable, the first one no connection can bring).
//
// The rule is conservative: a fence is unreachable only on evidence. A connection counts
// as a source of an origin unless it is established at version 3 or later and its peer
// advertised or answered a floor of that origin above this node's applied seq (entries up
// to the floor are gone from its log, so it can serve from floor+1 only, and this node
// needs applied+1); a connection whose floor is unknown (version 1 or 2, or not said yet)
// is a source. A connection this node does not take entries from (its link sends only, or
// the peer's link does not send) is none. A running base copy raises this node's positions
// to its source's, so while one runs nothing is unreachable; and with no connection at all
// nothing is known, so the fence waits (its reader times out, fence-timeout). A
// disconnected peer may hold the entries and come back: the answer is about now, and a
// later read may find the fence reachable again.
func (r *Replica) FenceReach(fence lock.Fence) (FenceState, wire.OriginID) {
	state, first := FenceMet, wire.OriginID{}
	for _, p := range fence {
		st := r.origins[p.Origin]
		applied := uint64(0)
		if st != nil {
			applied = st.applied.Seq
		}
		if applied >= p.Seq {
			continue
		}
		if r.fenceSourceless(p.Origin, applied) {
			return FenceUnreachable, p.Origin
		}
		if state == FenceMet {
			state, first = FenceWaiting, p.Origin
		}
	}
	return state, first
}

// fenceSourceless reports whether nothing this node is connected to can bring origin o on
// from applied, by FenceReach's rule.
func (r *Replica) fenceSourceless(o wire.OriginID, applied uint64) bool {
	if r.cp.take != nil {
		return false
	}
	seen := false
	for _, c := range r.connList {
		if !c.established {
			return false // its version and floors are not known yet
		}
		if !r.receivesFrom(c) {
			continue
		}
		f, known := c.floors[o]
		if c.version < 3 || !known || f <= applied {
			return false
		}
		seen = true
	}
	return seen
}
