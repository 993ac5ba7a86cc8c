package replica

import (
	"slices"
	"strconv"
	"time"

	"plait/protocol/wire"
)

// The bound on clock offset (docs/design.md, "Clock offset and its bound"). Last-writer-
// wins on hybrid logical clocks makes skew a correctness property: a node whose clock runs
// ahead wins every conflicting write until real time catches up, and every node that
// applies its entries carries its HLC forward with them. The bound MaxClockOffset (D)
// acts on both ends:
//
//   - a received entry whose HLC wall time is more than D ahead of this node's wall clock
//     is held back: not applied, not acknowledged, its channel closed until this node's
//     clock is within D of it (the origin reports StuckClockAhead); nothing is skipped,
//     and other origins keep flowing;
//   - a node whose clock a majority of its measured peers see more than D off refuses
//     local writes (CodeClockOffset), so a node with a bad clock stops making entries
//     that the others would have to hold.
//
// Peers that cannot be measured (versions 1 and 2, frozen releases) count for neither.

// StuckReason says why an origin's entries do not apply (OriginStatus.Stuck): a general
// field, of which the clock is the first reason.
type StuckReason string

// The stuck reasons.
const (
	// StuckClockAhead: the next entry's HLC is more than MaxClockOffset ahead of this
	// node's wall clock; it applies once the clock catches up.
	StuckClockAhead StuckReason = "clock-ahead"
)

// ClockStatus is this node's clock as its peers see it (NodeStatus.Clock).
type ClockStatus struct {
	// Measured is how many established peers report a clock offset; Off how many of them
	// see this node's clock more than MaxClockOffset away, beyond the measurement's error
	// (half the latest round trip with the peer).
	Measured, Off int
	// Offset is the median, over the measured peers, of this node's clock minus the
	// peer's (positive: this node is ahead); meaningful only when Measured > 0.
	Offset time.Duration
	// Bound is the bound on clock offset in effect (0: none).
	Bound time.Duration
	// RefusingWrites: a majority of the measured peers see this node's clock off, so local
	// writes are refused with CodeClockOffset.
	RefusingWrites bool
}

// DefaultMaxClockOffset is the bound on clock offset when Config.MaxClockOffset is 0.
const DefaultMaxClockOffset = 500 * time.Millisecond

// clockBound is the bound in whole milliseconds (the HLC's unit); 0: no bound.
func (r *Replica) clockBound() int64 {
	if r.cfg.MaxClockOffset <= 0 {
		return 0
	}
	return max(r.cfg.MaxClockOffset.Milliseconds(), 1)
}

// aheadOfClock reports whether an entry's timestamp is beyond the bound of this node's
// wall clock, and if so the time at which it no longer is.
func (r *Replica) aheadOfClock(h wire.HLC) (time.Time, bool) {
	d := r.clockBound()
	if d == 0 || int64(h.WallMillis()) <= r.now.UnixMilli()+d {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(h.WallMillis()) - d), true
}

// holding reports whether an origin's entries are held back now.
func (r *Replica) holding(st *originState) bool {
	return st.stuck != "" && r.now.Before(st.stuckUntil)
}

// holdAhead holds back an entry that is ahead of this node's clock: nothing of it is
// applied or acknowledged. On version 2 and later the origin's channel is closed, so the
// source sends nothing more until the clock catches up (routing then subscribes again from
// the applied seq, and the entry comes again). Version 1 has one stream for every origin:
// the peer cursor is rewound before the entry and the connection closed; the node dials
// again and the entry, if still ahead, is held again.
func (r *Replica) holdAhead(c *conn, st *originState, v *wire.TxnView, until time.Time) {
	st.stuck, st.stuckUntil = StuckClockAhead, until
	why := "origin " + st.id.String() + " entry " + strconv.FormatUint(v.Seq, 10) + ": its timestamp is " +
		strconv.FormatInt(int64(v.HLC.WallMillis())-r.now.UnixMilli(), 10) + " ms ahead of this node's clock"
	if c.version == 1 {
		r.rewindV1(c, v.Origin)
		r.closeConn(c, wire.CodeGoingAway, why)
		return
	}
	r.unsubscribe(c, st.id)
}

// releaseHold ends a hold whose time has come: the origin's source, kept through the
// hold, is subscribed again from the applied seq.
func (r *Replica) releaseHold(st *originState) {
	st.stuck, st.stuckUntil = "", time.Time{}
	if src := r.conns[st.source]; src != nil && !src.in[st.id] && r.usable(src, st.id) {
		r.subscribe(src, st, st.applied.Seq)
	}
}

// Clock reports this node's clock as its established, measured peers see it.
func (r *Replica) Clock() ClockStatus {
	var cs ClockStatus
	var offs []time.Duration
	d := time.Duration(r.clockBound()) * time.Millisecond
	for _, c := range r.connList {
		if !c.established {
			continue
		}
		off, ok := c.sess.ClockOffset()
		if !ok {
			continue
		}
		off = -off // the peer's view: this node's clock minus the peer's
		cs.Measured++
		offs = append(offs, off)
		// The estimate is wrong by up to half the round trip of its sample (protocol's
		// clock filter), at most half the latest one: a peer counts as off only when even
		// the nearest offset the measurement allows is beyond the bound. A loaded machine,
		// whose queues delay the PINGs, then never refuses writes for a skew it made up.
		if margin := c.sess.RTT() / 2; d > 0 && (off > d+margin || off < -d-margin) {
			cs.Off++
		}
	}
	if cs.Measured > 0 {
		slices.Sort(offs)
		m := len(offs) / 2
		cs.Offset = offs[m]
		if len(offs)%2 == 0 {
			cs.Offset = offs[m-1] + (offs[m]-offs[m-1])/2
		}
	}
	cs.Bound = d
	cs.RefusingWrites = 2*cs.Off > cs.Measured
	return cs
}

// clockRefusal is the error of a local write refused for this node's clock, or nil.
func (r *Replica) clockRefusal() error {
	cs := r.Clock()
	if !cs.RefusingWrites {
		return nil
	}
	return wire.NewError(wire.CodeClockOffset, strconv.Itoa(cs.Off)+" of "+strconv.Itoa(cs.Measured)+
		" measured peers see this node's clock more than "+r.cfg.MaxClockOffset.String()+" off (median offset "+
		cs.Offset.Round(time.Millisecond).String()+")")
}
