package replica

import (
	"bytes"
	"slices"
	"strconv"
	"time"

	"plait/protocol"
	"plait/protocol/wire"
)

// Links (docs/design.md §24.6): the direction a node replicates in with one peer and the
// tables it excludes from that link, as the operator set them on the side that names the
// peer, and as the peer's LINK says for the other side. What crosses a link is decided
// here, for every decision that asks: advertise and pump (what this node sends), the
// routing rule's candidates (what it takes), apply and receiveSkip (what it applies and
// accepts), anti-entropy (what it compares).

// LinkSettings are this node's settings for the link to one peer. The zero value is the
// default: both ways, no table excluded.
type LinkSettings struct {
	Mode wire.LinkMode
	// Exclude are the tables left out of the link, sorted by their bytes and distinct, at
	// most wire.MaxLinkTables (CheckLink).
	Exclude [][]byte
}

// CheckLink checks a link's settings against LINK's rules (a mode of 0 to 2; at most
// wire.MaxLinkTables tables under the name rule, sorted and distinct) and returns them in
// the form the replica keeps: the tables sorted, a name twice refused.
func CheckLink(ls LinkSettings) (LinkSettings, error) {
	tables := slices.Clone(ls.Exclude)
	slices.SortFunc(tables, bytes.Compare)
	l := wire.Link{Mode: ls.Mode, Tables: tables}
	if err := l.Validate(); err != nil {
		return LinkSettings{}, wire.NewError(wire.CodeBadArgument, "link: "+err.Error())
	}
	return LinkSettings{Mode: ls.Mode, Exclude: tables}, nil
}

// SetLink changes this node's settings for the link to peer: at once on its connection
// (a version-4 peer is sent the new LINK; what this node sends, takes and applies on it
// follows the new settings from here), and for every connection of that name after. A
// connection below version 4 to a peer it now excludes tables from is closed
// (link-needs-v4).
func (r *Replica) SetLink(now time.Time, peer string, ls LinkSettings) error {
	if r.fatal != nil {
		return r.fatal
	}
	ls, err := CheckLink(ls)
	if err != nil {
		return err
	}
	r.setNow(now)
	if ls.Mode == wire.LinkBoth && len(ls.Exclude) == 0 {
		delete(r.links, peer)
	} else {
		if r.links == nil {
			r.links = map[string]LinkSettings{}
		}
		r.links[peer] = ls
	}
	r.noteExcluded()
	for _, c := range r.connList {
		if c.established && c.peerName == peer && c.sess.State() == protocol.StateEstablished {
			if r.greetLink(c) {
				r.linkChanged(c)
			}
		}
	}
	return r.settle()
}

// Link returns this node's settings for the link to peer.
func (r *Replica) Link(peer string) LinkSettings { return r.links[peer] }

// noteExcluded keeps the set of every table some link excludes, on this side or the
// peer's: apply and receiveSkip note such tables among an origin's writes (canServe).
func (r *Replica) noteExcluded() {
	r.linkTables = map[string]bool{}
	for _, ls := range r.links {
		for _, t := range ls.Exclude {
			r.linkTables[string(t)] = true
		}
	}
	for _, c := range r.connList {
		for _, t := range c.peerLink.Tables {
			r.linkTables[string(t)] = true
		}
	}
}

// greetLink sends the link's settings to a version-4 peer, and refuses a connection below
// version 4 to a peer this node excludes tables from: without SKIP nothing can leave them
// out. Version 1 has no routing (every entry goes to every peer), so no direction can be
// kept on it either: any setting but the default refuses it. It reports false when it
// closed the connection.
func (r *Replica) greetLink(c *conn) bool {
	own := r.links[c.peerName]
	if c.version < v4 {
		if len(own.Exclude) > 0 || c.version == 1 && own.Mode != wire.LinkBoth {
			r.closeConn(c, wire.CodeLinkNeedsV4, "tables are excluded from the link to "+c.peerName+
				", which only protocol version 4 can leave out; this connection runs at version "+strconv.FormatUint(c.version, 10))
			return false
		}
		return true
	}
	return r.checkConn(c, c.sess.V4().Link(wire.Link{Mode: own.Mode, Tables: own.Exclude})) && r.checkMismatch(c)
}

// onLink takes the peer's settings for the link on c.
func (r *Replica) onLink(c *conn, l *wire.Link) {
	c.peerLink = wire.Link{Mode: l.Mode, Tables: slices.Clone(l.Tables)}
	r.noteExcluded()
	if r.checkMismatch(c) {
		r.linkChanged(c)
	}
}

// checkMismatch closes the connection when the two ends' directions contradict each other:
// both only receive, or both only send. It reports false when it closed it.
func (r *Replica) checkMismatch(c *conn) bool {
	own, peer := r.links[c.peerName].Mode, c.peerLink.Mode
	if own == wire.LinkBoth || own != peer {
		return true
	}
	r.closeConn(c, wire.CodeLinkMismatch, "this node and "+c.peerName+" both set the link to "+own.String()+
		": nothing would cross it the way either end means")
	return false
}

// linkChanged acts on new settings of either end: a peer this node no longer sends to has
// its streams dropped, its heads withdrawn and the base copy it takes from this node
// stopped; origins this node no longer takes over the link lose it as their source, a
// copy this node takes over it stops (it resumes from another peer), so does a copy the
// link now leaves a table of (copyHidden), and every origin is routed again.
func (r *Replica) linkChanged(c *conn) {
	if !r.sendsTo(c) {
		for _, s := range slices.Clone(c.outList) {
			c.dropOut(s.origin)
		}
		if r.cp.serving[c.id] != nil {
			r.checkConn(c, c.sess.V3().AbortCopy(true, wire.CodeCopyBusy, "this node no longer sends to "+c.peerName+" (the link's direction)"))
			r.stopServing(c.id)
		}
	}
	if t := r.cp.take; t != nil && t.conn == c.id && r.receivesFrom(c) && r.copyHidden(c, t) {
		// Chunks of the table may have been stored already; it resumes, from this peer
		// with the table left out or from another.
		err := wire.NewError(wire.CodeGoingAway, "the link to "+c.peerName+" now excludes a table this copy takes")
		r.checkConn(c, c.sess.V3().AbortCopy(false, err.Code, err.Message))
		r.stopTaking(err)
		r.cp.retryAt = time.Time{}
	}
	if !r.receivesFrom(c) {
		if t := r.cp.take; t != nil && t.conn == c.id {
			err := wire.NewError(wire.CodeGoingAway, "this node no longer takes from "+c.peerName+" (the link's direction)")
			r.checkConn(c, c.sess.V3().AbortCopy(false, err.Code, err.Message))
			r.stopTaking(err)
			r.cp.retryAt = time.Time{} // another peer may serve it now
		}
		for _, o := range r.originOrder {
			if c.in[o] {
				r.unsubscribe(c, o)
			}
			if st := r.origins[o]; st.source == c.id {
				r.loseSource(st, ReasonWithdrawn)
			}
		}
	}
	c.fullAdv, r.advFull, r.routeAll = true, true, true
}

// sendsTo reports whether this node sends entries to the peer on c: its own mode for the
// peer is send or both, and the peer's (from its LINK; both when it sent none) receive or
// both.
func (r *Replica) sendsTo(c *conn) bool {
	return r.links[c.peerName].Mode.Sends() && c.peerLink.Mode.Receives() || r.cfg.Mutations.IgnoreLinks
}

// receivesFrom reports whether this node takes entries from the peer on c: the mirror of
// sendsTo.
func (r *Replica) receivesFrom(c *conn) bool {
	if c.leaf {
		return false // a hub takes nothing from a leaf but its own origin, re-originated (hub.go)
	}
	return r.links[c.peerName].Mode.Receives() && c.peerLink.Mode.Sends()
}

// linkFilters reports whether the link on c excludes any table, on either side.
func (r *Replica) linkFilters(c *conn) bool {
	return len(r.links[c.peerName].Exclude) > 0 || len(c.peerLink.Tables) > 0
}

// linkExcludes reports whether the link on c excludes table: the union of both ends'
// exclusions.
func (r *Replica) linkExcludes(c *conn, table []byte) bool {
	if c == nil {
		return false
	}
	has := func(ts [][]byte) bool {
		_, ok := slices.BinarySearchFunc(ts, table, bytes.Compare)
		return ok
	}
	return has(r.links[c.peerName].Exclude) || has(c.peerLink.Tables)
}

// appliesOn reports whether this node applies an operation of table from an entry that came
// on the connection from (nil: a local write, or a copy): it carries the table, and the
// link does not exclude it.
func (r *Replica) appliesOn(from *conn, table []byte) bool {
	return r.carries(table) && !r.linkExcludes(from, table)
}

// linkHides reports whether the link on c hides from this node a table it carries and
// origin st was seen to write (its entries and runs, placed): the origin is then never
// taken over it, not even from the origin itself, as canServe refuses a relay. With no
// other candidate the origin stays where it is, behind, its lag showing: taken over the
// hiding link, the origin's entries of that table would be passed (their operations of it
// not applied), and a delete passed so is lost for good once retention drops the
// tombstones that anti-entropy would need to bring it (the simulator's seed 583).
func (r *Replica) linkHides(c *conn, st *originState) bool {
	if !r.linkFilters(c) {
		return false
	}
	for t := range st.writes {
		if r.carries([]byte(t)) && r.linkExcludes(c, []byte(t)) {
			return true
		}
	}
	return false
}

// hiddenIn reports whether the entry v of origin st, come over the link on c, has an
// operation of a table this node carries and the link excludes, noting its placed and
// link-excluded tables among the origin's writes (placed) on the way: such an entry is
// not applied from that link (receive).
func (r *Replica) hiddenIn(c *conn, st *originState, v *wire.TxnView) bool {
	if c == nil || !r.linkFilters(c) {
		return false
	}
	hidden := false
	it := v.Ops()
	for op, ok := it.Next(); ok; op, ok = it.Next() {
		r.placed(st, op.Table)
		hidden = hidden || r.carries(op.Table) && r.linkExcludes(c, op.Table)
	}
	return hidden
}

// refuseHidden refuses an entry or run of origin st that came over the link on c and
// writes table t, which this node carries and the link excludes: it is not applied, the
// origin's stream on c stops, and a source whose link hides none of the origin's tables is
// sought (linkHides, which the origin's writes now name). The link is kept out by
// linkHides alone, not by a timed exclusion: once the link stops excluding the table, the
// origin may be taken over it again at once.
func (r *Replica) refuseHidden(c *conn, st *originState, why MoveReason) {
	r.unsubscribe(c, st.id)
	if st.source == c.id {
		r.loseSource(st, why)
	}
	r.routeSome[st.id] = true
}

// linkHidesCarried reports whether the link on c excludes a table this node carries.
func (r *Replica) linkHidesCarried(c *conn) bool {
	for _, ts := range [][][]byte{r.links[c.peerName].Exclude, c.peerLink.Tables} {
		for _, t := range ts {
			if r.carries(t) {
				return true
			}
		}
	}
	return false
}

// hideTables notes, on the copy t from the peer on c, the tables this node carries that the
// link excludes, and holds them through nothing: the copy stores none of their chunks
// (onChunk), takes none of this node's records of them for deleted (superseded: not held
// whole), and raises no origin that may write them (unsafeRaises), as for a table its
// source does not hold. Stored, or taken for deleted, a copy over the link would carry the
// table the link leaves out, and a record the source kept from before a delete it passed
// would come back with it.
func (r *Replica) hideTables(c *conn, t *copyTake) {
	for _, ts := range [][][]byte{r.links[c.peerName].Exclude, c.peerLink.Tables} {
		for _, table := range ts {
			if !r.carries(table) || t.hidden[string(table)] {
				continue
			}
			if t.hidden == nil {
				t.hidden = map[string]bool{}
			}
			if t.holds == nil {
				t.holds = map[string]map[wire.OriginID]uint64{}
			}
			t.hidden[string(table)] = true
			t.holds[string(table)] = map[wire.OriginID]uint64{}
		}
	}
}

// copyHidden reports whether the link on c now hides from the copy t taken over it a
// table the copy was started without: a fill of a table the link excludes, or a base copy
// and a table this node carries that the link excludes and the copy stores (hideTables).
func (r *Replica) copyHidden(c *conn, t *copyTake) bool {
	if t.fill != "" {
		return r.linkExcludes(c, []byte(t.fill))
	}
	for _, ts := range [][][]byte{r.links[c.peerName].Exclude, c.peerLink.Tables} {
		for _, table := range ts {
			if r.carries(table) && !t.hidden[string(table)] {
				return true
			}
		}
	}
	return false
}
