package replica

import (
	"bytes"
	"errors"
	"time"

	"plait/protocol"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// Anti-entropy (docs/design.md §19). Logs that agree say nothing of a record store that
// lost or altered a record around them; this node walks its records in (table, key) order,
// AntiEntropyRange at a time, and asks each version-3 peer that negotiated
// wire.CapAntiEntropy whether its records in the same range have the same digest. The peer
// answers equal, or with its records in the range (or its first part); this node then
// repairs itself from them and never the peer, which repairs itself in its own pass:
//
//   - a peer version this node has not applied (above the applied HLC of its origin) is in
//     flight: left to the log, not counted as a repair;
//   - a peer version newer (last-writer-wins) than this node's, and applied here, is
//     written with its version kept, around the log (Store.Repair);
//   - equal versions with different contents are re-read from the origin's log entry of
//     that version when it is still retained, else flagged in status, never chosen by value;
//   - a record this node lacks whose version is at or below its tombstone horizon
//     (retention.go) is not written: this node may have deleted it and dropped the
//     tombstone, and writing it would bring it back;
//   - nor is a record this node lacks from a peer that has not shown it applied as far as
//     this node on some origin whose applied timestamp here is at or above the version
//     (peerBehind): the record may be deleted here by an entry the peer has not applied,
//     its tombstone dropped by this node or by the sender of a base copy it took, whose
//     horizon this node's own does not cover;
//   - a peer version older than this node's is left: the peer repairs itself.
//
// The node makes one pass at a time, not one per peer: one range every
// AntiEntropyInterval, each asked of the next version-3 peer in turn (by peer name), so
// that what a node reads and sends for its passes does not grow with its peers (a pass
// per peer would read and send a range per peer every interval). Any peer's answer
// repairs this node: a record lost or altered here is found within one pass, whichever
// peer its range is asked of. One range is in flight at a time: it holds the pass until
// it is answered, its connection closes, or StallTimeout passes (the next range then
// goes to the next peer); none is asked while the storage is degraded or a base copy is
// being taken.

// MaxAntiEntropyConflicts bounds the equal-version conflicts status keeps (the newest).
const MaxAntiEntropyConflicts = 64

// AntiEntropyConflict is a record two nodes hold at the same version with different
// contents, whose log entry this node no longer retains: nothing can say which is right.
type AntiEntropyConflict struct {
	At     time.Time
	Peer   string
	Table  []byte
	Key    []byte
	HLC    wire.HLC
	Origin wire.OriginID
}

// antiEntropy is the replica's state of anti-entropy.
type antiEntropy struct {
	walk aeWalk
	// lastPeer is the peer the last range was asked of: the next goes to the next name.
	lastPeer  string
	conflicts []AntiEntropyConflict
}

// aeWalk is this node's pass over its records.
type aeWalk struct {
	after  wire.RangePoint // the next range starts after it (zero: the first record)
	nextAt time.Time       // no range is asked before then (zero: no peer to ask yet)
	conn   ConnID          // the connection a range is asked on (0: none)
	asked  *wire.RangeDigest
	sent   time.Time // when asked was
}

// aeCapable reports whether a connection takes anti-entropy frames: what its handshake
// negotiated, kept at the handshake, since it is read at every settle of every connection
// and a session's capabilities do not change once it is established.
func aeCapable(c *conn) bool { return c.established && c.aeCap }

// negotiatedAE reports whether a handshake negotiated anti-entropy (version 3 and the
// capability).
func negotiatedAE(info protocol.HandshakeInfo) bool {
	if info.Version < 3 {
		return false
	}
	for _, cp := range info.Caps {
		if cp == wire.CapAntiEntropy {
			return true
		}
	}
	return false
}

// aeIdle reports whether this node's own passes wait: turned off, degraded storage, or a
// base copy being taken (its records are not this node's yet).
func (r *Replica) aeIdle() bool {
	return r.cfg.AntiEntropyInterval < 0 || r.storage.err != nil || r.cp.take != nil || r.cp.state != nil
}

// antiEntropy asks the pass's next range, when it is due, of the next peer in turn.
func (r *Replica) antiEntropy() {
	r.answerPending()
	if r.aeIdle() {
		return
	}
	w := &r.ae.walk
	if !w.nextAt.IsZero() && r.now.Before(w.nextAt) {
		return
	}
	if w.asked != nil && r.conns[w.conn] != nil {
		if r.now.Before(w.sent.Add(r.cfg.StallTimeout)) {
			return // one range at a time
		}
		// Unanswered for StallTimeout: the pass goes on with the next peer (a late answer
		// is taken for nothing, and that peer is not asked again before it answers).
		w.asked, w.conn = nil, 0
		r.counters.AntiEntropyAsksAbandoned++
	}
	c, ok := r.nextAEPeer()
	if !ok {
		return
	}
	switch {
	case c == nil:
		w.nextAt = time.Time{} // the pass waits for a peer; the first range goes an interval after one comes
	case w.nextAt.IsZero():
		w.nextAt = r.now.Add(r.cfg.AntiEntropyInterval)
	default:
		r.askRange(c, w)
	}
}

// nextAEPeer is the connection the next range is asked on: the anti-entropy peer whose
// name follows the last one asked, or the first name after the last (nil: none), passing
// over a connection that still owes an answer. Two connections of one peer (a redial
// before the old one closed) are the same peer: the newer is asked. When a peer may not
// compare every table (a link excludes one, or tables are placed), only the peers that
// compare every table this node compares with any of them take turns, if one does
// (wholePeers): a range asked of a peer that does not compare a table leaves that table's
// part of it out of the pass, and the turns could give that part of every pass to such a
// peer for ever (two peers and a pass of two ranges do), so that a record of the table
// this node lost is compared with no one. ok is false when the store failed.
func (r *Replica) nextAEPeer() (c *conn, ok bool) {
	var whole map[*conn]bool
	if len(r.linkTables) > 0 || len(r.cmap.cur.Placement) > 0 {
		if whole, ok = r.wholePeers(); !ok {
			return nil, false
		}
	}
	var first, next *conn
	for _, c = range r.connList {
		if !r.aeAskable(c) || whole != nil && !whole[c] {
			continue
		}
		if first == nil || c.peerName <= first.peerName {
			first = c
		}
		if c.peerName > r.ae.lastPeer && (next == nil || c.peerName <= next.peerName) {
			next = c
		}
	}
	if next != nil {
		return next, true
	}
	return first, true
}

// aeAskable reports whether a range may be asked on c now: it negotiated anti-entropy,
// owes no answer, and the link lets this node take from the peer (a repair is taking).
func (r *Replica) aeAskable(c *conn) bool {
	return aeCapable(c) && !c.sess.V3().RangeAsked() && r.receivesFrom(c)
}

// wholePeers is the set of connections a range may be asked on that compare every table
// this node holds, or a link leaves out, that any of them compares; nil when none does
// (every askable peer then takes its turn). ok is false when the store failed.
func (r *Replica) wholePeers() (whole map[*conn]bool, ok bool) {
	tables, err := r.store.Tables()
	if !r.check(err) {
		return nil, false
	}
	held := make(map[string]bool, len(tables))
	for _, t := range tables {
		held[string(t)] = true
	}
	for t := range r.linkTables { // a table this node lost whole is still one to compare
		if !held[t] {
			tables = append(tables, []byte(t))
		}
	}
	var askable []*conn
	for _, c := range r.connList {
		if r.aeAskable(c) {
			askable = append(askable, c)
		}
	}
	whole = map[*conn]bool{}
	for _, c := range askable {
		whole[c] = true
	}
	for _, t := range tables {
		some := false
		for _, c := range askable {
			some = some || r.compared(c, t)
		}
		if !some {
			continue // compared with no peer: no choice of peer helps
		}
		for _, c := range askable {
			if !r.compared(c, t) {
				delete(whole, c)
			}
		}
	}
	if len(whole) == 0 {
		return nil, true
	}
	return whole, true
}

// aeDeadline is when the pass's next range is due, or when the answer awaited is given up
// (zero: none).
func (r *Replica) aeDeadline() time.Time {
	w := &r.ae.walk
	switch {
	case r.aeIdle():
		return time.Time{}
	case w.asked != nil && r.conns[w.conn] != nil:
		return w.sent.Add(r.cfg.StallTimeout)
	}
	return w.nextAt
}

func (r *Replica) askRange(c *conn, w *aeWalk) {
	n := r.cfg.AntiEntropyRange
	recs, ok := r.rangeRecords(c, w.after, wire.RangePoint{}, n+1)
	if !ok {
		return
	}
	d := &wire.RangeDigest{AfterTable: w.after.Table, AfterKey: w.after.Key}
	if len(recs) > n {
		recs = recs[:n]
		last := recs[n-1]
		d.ThroughTable, d.ThroughKey = last.Table, last.Key
	}
	h := wire.NewRangeHash()
	for i := range recs {
		h.Add(rangeRecord(c, &recs[i]))
	}
	d.Count, d.Digest = h.Count, h.Sum()
	if len(d.ThroughKey) > wire.MaxCopyKey || len(d.AfterKey) > wire.MaxCopyKey {
		// A key longer than a range's end may be (write limits allow it only when raised
		// past 32 KiB): the pass starts over rather than name it.
		w.after = wire.RangePoint{}
		w.nextAt = r.now.Add(r.cfg.AntiEntropyInterval)
		return
	}
	err := c.sess.V3().AskRange(d)
	if isCode(err, wire.CodeSendBufferFull) {
		// The send buffer holds a burst (a handshake's full advertisement of 100 origins
		// fills the simulator's 8 KiB): ask at a later settle. Passed to checkConn, the
		// refusal closed the connection, and every redial's burst closed it again.
		return
	}
	if !r.checkConn(c, err) {
		return
	}
	w.conn, w.asked, w.sent = c.id, d, r.now
	w.nextAt = r.now.Add(r.cfg.AntiEntropyInterval)
	r.ae.lastPeer = c.peerName
}

// rangeRecord is a record as the peer on c is sent it and as the digests compared with it
// hash it: with its token on version 4; below, without (the connection carries no token,
// and the peer's digests hash none: docs/design.md §25.4), so that a version-3 peer and
// this node compare what both can hold. Its via block (range format 3, version 4) goes to
// the peer and into no digest (docs/design.md §27.1).
func rangeRecord(c *conn, rec *store.Record) *wire.RangeRecord {
	r := &wire.RangeRecord{Table: rec.Table, Key: rec.Key, Value: rec.Value, Deleted: rec.Deleted, HLC: rec.HLC, Origin: rec.Origin}
	if c.version >= v4 {
		r.Token, r.Via, r.ViaHLC = rec.Token, rec.Via, rec.ViaHLC
	}
	return r
}

// rangeDelivering is a peer's range record's delivering identity: its via block's when it
// has one (a leaf write a hub re-originated, §27.1), its version's otherwise.
func rangeDelivering(p *wire.RangeRecord) (wire.HLC, wire.OriginID) {
	if p.Via.IsZero() {
		return p.HLC, p.Origin
	}
	return p.ViaHLC, p.Via
}

// rangeRecords reads up to limit of this node's records in (after, through] (a zero
// through: to the end), tombstones included, of the tables it compares with the peer on c
// (compared).
func (r *Replica) rangeRecords(c *conn, after, through wire.RangePoint, limit int) ([]store.Record, bool) {
	tables, err := r.store.Tables()
	if !r.check(err) {
		return nil, false
	}
	var out []store.Record
	for _, t := range tables {
		if len(out) >= limit {
			break
		}
		if !after.IsZero() && bytes.Compare(t, after.Table) < 0 {
			continue
		}
		if !through.IsZero() && bytes.Compare(t, through.Table) > 0 {
			break
		}
		if !r.compared(c, t) {
			continue
		}
		var from []byte
		if bytes.Equal(t, after.Table) {
			from = after.Key
		}
		// A damaged record is left out, as if absent: the range then differs from a peer
		// that holds it, whose version repairs it here (repairFrom).
		ok := r.scanReadable(t, from, func(rec store.Record) bool {
			if !wire.InRange(rec.Table, rec.Key, after, through) {
				return false
			}
			out = append(out, rec)
			return len(out) < limit
		})
		if !ok {
			return nil, false
		}
	}
	return out, true
}

// onRangeAsked answers a peer's ask: equal when this node's records in the range have the
// digest asked, else its records in the range, as many as AntiEntropyBytes and one more
// than the asker holds allow (the answer then ends at the last one sent). A node answers
// whether or not it runs passes of its own; with its storage degraded it answers with no
// record, which the asker cannot take anything from. An answer the send buffer cannot
// take yet is made again at the next settle (answerPending).
func (r *Replica) onRangeAsked(c *conn, d *wire.RangeDigest) {
	c.aeAsk = nil
	body := r.rangeAnswer(c, d)
	err := c.sess.V3().AnswerRange(body)
	for budget := r.cfg.AntiEntropyBytes; isCode(err, wire.CodeFrameTooLarge) && budget > MinCopyChunk; {
		budget /= 2 // the peer's frame limit is below this node's budget
		body = r.rangeAnswerWithin(c, d, budget)
		err = c.sess.V3().AnswerRange(body)
	}
	switch {
	case isCode(err, wire.CodeSendBufferFull):
		c.aeAsk = d
	case isCode(err, wire.CodeFrameTooLarge):
		// One record is larger than the peer takes: the answer holds none (the asker takes
		// nothing from it, and goes on after the range).
		empty, _ := wire.AppendRangeRecords(nil, false, d.Through(), nil)
		r.checkConn(c, c.sess.V3().AnswerRange(empty))
	default:
		r.checkConn(c, err)
	}
}

// answerPending makes again the answers a full send buffer refused.
func (r *Replica) answerPending() {
	for _, c := range r.connList {
		if c.aeAsk != nil && c.sess.SendBudget() > 0 {
			r.onRangeAsked(c, c.aeAsk)
		}
	}
}

func isCode(err error, code wire.Code) bool {
	var we *wire.Error
	return errors.As(err, &we) && we.Code == code
}

func (r *Replica) rangeAnswer(c *conn, d *wire.RangeDigest) []byte {
	return r.rangeAnswerWithin(c, d, r.cfg.AntiEntropyBytes)
}

// rangeAnswerWithin is the RANGERECORDS body answering d with at most budget bytes of
// records (always one, when this node holds any in the range).
func (r *Replica) rangeAnswerWithin(c *conn, d *wire.RangeDigest, budget int) []byte {
	after, through := d.After(), d.Through()
	var recs []store.Record
	if r.storage.err == nil {
		var ok bool
		if recs, ok = r.rangeRecords(c, after, through, int(d.Count)+1); !ok {
			recs = nil
		}
	}
	if uint64(len(recs)) == d.Count && r.storage.err == nil {
		h := wire.NewRangeHash()
		for i := range recs {
			h.Add(rangeRecord(c, &recs[i]))
		}
		if h.Sum() == d.Digest {
			body, _ := wire.AppendRangeRecords(nil, true, through, nil) // the ask's through passed its checks
			return body
		}
	}
	more := uint64(len(recs)) > d.Count // the peer may hold even more: the answer ends early
	out := make([]wire.RangeRecord, 0, len(recs))
	// The header holds the answer's end: the ask's through, or, for an answer cut short,
	// its last record's point. Each record is taken only if the answer fits with either
	// (a header counted with the ask's end alone passed the frame limit by the last key's
	// bytes, and the answer went out with no record).
	head, size := wire.RangeHeaderSize(through, len(recs)), 0
	for i := range recs {
		rr := rangeRecord(c, &recs[i])
		hdr := max(head, wire.RangeHeaderSize(wire.RangePoint{Table: rr.Table, Key: rr.Key}, len(recs)))
		if len(out) > 0 && hdr+size+wire.RangeRecordSize(rr) > budget {
			more = true
			break
		}
		size += wire.RangeRecordSize(rr)
		out = append(out, *rr)
	}
	end := through
	if more && len(out) > 0 {
		// The answer ends at its last record, whose key must fit a range's end: records
		// of longer keys (write limits raised past MaxCopyKey) wait for a later range.
		for len(out) > 1 && len(out[len(out)-1].Key) > wire.MaxCopyKey {
			out = out[:len(out)-1]
		}
		if last := out[len(out)-1]; len(last.Key) <= wire.MaxCopyKey {
			end = wire.RangePoint{Table: last.Table, Key: last.Key}
		} else {
			out = out[:0]
		}
	}
	body, err := wire.AppendRangeRecords(nil, false, end, out)
	if err != nil {
		// Only a record this node should never hold (a bad table name, an empty key)
		// fails the encoding: answer with none rather than stop.
		body, _ = wire.AppendRangeRecords(nil, false, through, nil)
	}
	return body
}

// onRangeAnswered takes in the peer's answer to this node's ask and repairs what it shows.
func (r *Replica) onRangeAnswered(c *conn, v *wire.RangeView) {
	w := &r.ae.walk
	if w.asked == nil || w.conn != c.id {
		return
	}
	w.asked, w.conn = nil, 0
	r.counters.AntiEntropyRangesCompared++
	if !v.Equal {
		r.counters.AntiEntropyRangesDiffering++
		if !r.repairFrom(c, v) {
			return // degraded: the range is asked again
		}
	}
	w.after = wire.RangePoint{Table: bytes.Clone(v.Through.Table), Key: bytes.Clone(v.Through.Key)}
	if w.after.IsZero() {
		r.counters.AntiEntropyPasses++
	}
}

// peerBehind is the newest timestamp this node applied of an origin that the peer on c has
// not shown it applied as far (0: the peer showed every origin at or past this node's
// positions). A record this node lacks and the peer holds, at or below it, may have been
// deleted by an entry of that origin that this node applied and the peer not yet, with no
// tombstone left here to say so (docs/design.md §19): the delete's timestamp is at or above
// the record's and at or below this node's applied one.
func (r *Replica) peerBehind(c *conn) wire.HLC {
	var at wire.HLC
	for _, o := range r.originOrder {
		if st := r.origins[o]; st.applied.Seq > c.shown[o] {
			at = max(at, st.appliedHLC)
		}
	}
	return at
}

// repairFrom decides, record by record, what a differing range's answer repairs here, and
// writes it in one Store.Repair.
func (r *Replica) repairFrom(c *conn, v *wire.RangeView) bool {
	if r.storage.err != nil || !r.receivesFrom(c) {
		return false
	}
	age, applied, horizon := r.tombstoneHorizon()
	behind := r.peerBehind(c)
	var fix []store.Record
	for i := range v.Records {
		p := &v.Records[i]
		if !r.compared(c, p.Table) {
			continue // a table not both sides carry: never written here from a peer
		}
		l, has, err := r.store.Get(p.Table, p.Key)
		var de *store.DamagedRecordError
		damaged := errors.As(err, &de)
		if !damaged && !r.check(err) {
			return false
		}
		// Below version 4 the peer's records carry no token (its connection cannot): the
		// same version is then the same HLC and origin, whatever token this node's holds.
		// A version is its conflict identity alone: one leaf write two hubs delivered is
		// one version, whichever Via each side holds (§27.1).
		sameToken := l.Token == p.Token || c.version < v4
		if has && l.HLC == p.HLC && l.Origin == p.Origin && sameToken && l.Deleted == p.Deleted && bytes.Equal(l.Value, p.Value) {
			continue // the same version, the same contents
		}
		// In flight by the entry that wrote the peer's version: the hub's, for a leaf
		// write (§27.1); a leaf's origin is applied nowhere downstream of its hub.
		if !r.seen(rangeDelivering(p)) && !r.cfg.Mutations.RepairInFlight {
			r.counters.AntiEntropyInFlight++
			continue // in flight: the log brings it
		}
		switch {
		case has && l.HLC == p.HLC && l.Origin == p.Origin:
			want, found, ok := r.loggedVersion(p, &l)
			if !ok {
				return false
			}
			if !found {
				r.conflict(c.peerName, p)
				continue
			}
			if l.Deleted != want.Deleted || !bytes.Equal(l.Value, want.Value) || l.Token != want.Token {
				fix = append(fix, want)
			}
			continue
		case has && !store.NewerVersion(store.Version{Token: p.Token, HLC: p.HLC, Origin: p.Origin}, l.Version()) && !r.cfg.Mutations.RepairOlder:
			continue // this node's version is newer: the peer repairs itself
		case damaged:
			// This node's record is unreadable: the peer's version, applied here, takes
			// its place (if this node's was newer, its entry reaches the peer, and a later
			// pass brings it back here).
		case !has && horizon && p.HLC < age && p.HLC <= applied && !r.cfg.Mutations.RepairBelowHorizon:
			// This node may have deleted it and dropped the tombstone.
			r.counters.AntiEntropyBelowHorizon++
			continue
		case !has && p.HLC <= behind && !r.cfg.Mutations.RepairFromBehind:
			// The peer may not have applied this record's delete yet (a base copy can take
			// the tombstone away here while the own horizon is below the version).
			r.counters.AntiEntropyPeerBehind++
			continue
		}
		fix = append(fix, store.Record{Table: bytes.Clone(p.Table), Key: bytes.Clone(p.Key), Value: bytes.Clone(p.Value),
			Deleted: p.Deleted, HLC: p.HLC, Origin: p.Origin, Token: p.Token, Via: p.Via, ViaHLC: p.ViaHLC})
	}
	if len(fix) == 0 {
		return true
	}
	if !r.check(r.store.Repair(fix)) {
		return false
	}
	r.stored(fix)
	feedWritten(&r.feeds.repaired, fix)
	r.counters.AntiEntropyRecordsRepaired += uint64(len(fix))
	return true
}

// loggedVersion reads the record p's version (table, key) as the log entry that wrote it
// here: found is false when no log here holds that entry (purged, or never here). The
// entry is the version's delivering identity's (§27.1): the peer's (p's via block, or its
// version), and when that is not found this node's own record's (l: one leaf write two
// hubs delivered is one version, written here by the other hub's entry). It writes the
// version: its conflict identity, and the delivering one of the entry found.
func (r *Replica) loggedVersion(p *wire.RangeRecord, l *store.Record) (rec store.Record, found, ok bool) {
	hlc, o := rangeDelivering(p)
	rec, found, ok = r.loggedIn(o, hlc, p)
	if found || !ok {
		return rec, found, ok
	}
	if lo, lh := l.Delivering(); lo != o || lh != hlc {
		return r.loggedIn(lo, lh, p)
	}
	return rec, found, ok
}

// loggedIn reads the record p's version as origin o's log entry of timestamp hlc wrote it:
// the entry's operation of p's (table, key) when the entry's conflict identity is p's (a
// format-3 entry's leaf block, else the entry's own). An origin's entries carry strictly
// increasing timestamps, so the entry is found by a binary search between the floor and
// the applied seq; a leaf HLC orders nothing in a hub's log, so the search is by the
// entry's HLC, never the version's.
func (r *Replica) loggedIn(o wire.OriginID, hlc wire.HLC, p *wire.RangeRecord) (rec store.Record, found, ok bool) {
	table, key := p.Table, p.Key
	st := r.origins[o]
	if st == nil {
		return store.Record{}, false, true
	}
	lo, hi := r.floor(o).Seq+1, st.applied.Seq
	for lo <= hi {
		mid := lo + (hi-lo)/2
		raw, err := r.store.Entry(o, mid)
		if err == store.ErrPurged || err == store.ErrNotFound {
			return store.Record{}, false, true
		}
		if sk, ok := skipped(err); ok {
			// A run this node was not sent: an entry of hlc is after it, before it, or
			// inside it (then not in this log, and the search ends not found).
			if hlc > sk.HLC {
				lo = sk.To + 1
			} else {
				hi = sk.From - 1
			}
			continue
		}
		if !r.check(err) {
			return store.Record{}, false, false
		}
		tv, err := wire.ParseTxn(raw)
		if !r.check(err) {
			return store.Record{}, false, false
		}
		switch {
		case tv.HLC < hlc:
			lo = mid + 1
		case tv.HLC > hlc:
			hi = mid - 1
		default:
			chlc, corigin := conflictOf(&tv)
			if chlc != p.HLC || corigin != p.Origin {
				return store.Record{}, false, true // the entry wrote another version
			}
			var via wire.OriginID
			var viaHLC wire.HLC
			if tv.Format() == wire.TxnFormat3 {
				via, viaHLC = tv.Origin, tv.HLC
			}
			it := tv.Ops()
			for op, more := it.Next(); more; op, more = it.Next() {
				if bytes.Equal(op.Table, table) && bytes.Equal(op.Key, key) { // the last op of a key wins
					rec = store.Record{Table: bytes.Clone(table), Key: bytes.Clone(key), Value: bytes.Clone(op.Value),
						Deleted: op.Kind == wire.OpDelete, HLC: chlc, Origin: corigin, Token: tv.Token, Via: via, ViaHLC: viaHLC}
					found = true
				}
			}
			return rec, found, true
		}
	}
	return store.Record{}, false, true
}

// conflict flags an equal-version conflict, once while it is in the list.
func (r *Replica) conflict(peer string, p *wire.RangeRecord) {
	for _, f := range r.ae.conflicts {
		if f.Origin == p.Origin && f.HLC == p.HLC && bytes.Equal(f.Table, p.Table) && bytes.Equal(f.Key, p.Key) {
			return // flagged already
		}
	}
	r.counters.AntiEntropyConflicts++
	if len(r.ae.conflicts) == MaxAntiEntropyConflicts {
		r.ae.conflicts = append(r.ae.conflicts[:0], r.ae.conflicts[1:]...)
	}
	r.ae.conflicts = append(r.ae.conflicts, AntiEntropyConflict{At: r.now, Peer: peer, Table: bytes.Clone(p.Table),
		Key: bytes.Clone(p.Key), HLC: p.HLC, Origin: p.Origin})
}

// AntiEntropyConflicts lists the equal-version conflicts flagged (the newest
// MaxAntiEntropyConflicts, oldest first).
func (r *Replica) AntiEntropyConflicts() []AntiEntropyConflict {
	return append([]AntiEntropyConflict(nil), r.ae.conflicts...)
}
