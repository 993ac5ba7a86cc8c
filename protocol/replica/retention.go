package replica

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"time"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// Retention: bounded history (docs/design.md §14). Every origin log on this node, its own
// and every relayed one, is kept from a floor up. An entry may be purged once its HLC
// timestamp is older than Config.RetainAge, or while the logs hold more than
// Config.RetainBytes, oldest in arrival order first; but never an origin's head, never the
// local origin's entries not yet synced (HoldUnsynced), and never an entry a holding peer
// has not acknowledged. A hold is a peer's position in one log, made when the peer
// subscribes to the origin here (or, version 1, to the arrival order) and advanced by its
// acknowledgements and the heads it advertises; it lapses after Config.RetainHold without
// advancing. Purging runs on Tick as bounded steps (Config.PurgeStep entries examined),
// each one Store.Purge.

// holdKey names a hold: a peer and an origin (zero: the version-1 arrival order).
type holdKey struct {
	peer   string
	origin wire.OriginID
}

// hold is a peer's position in one log and when it last advanced. A hold at its log's
// head counts as advancing: nothing is held, and the peer is not behind.
type hold struct {
	seq   uint64
	since time.Time
	dirty bool // not yet written to the store
	// atHead: a hold of this node's own origin at its head, listed in retention.atHead
	// for the next local write (watchHead, leftHead).
	atHead bool
}

// heldBack is what a peer's holds kept from the last retention step: the entries (and
// their bytes) that step would have purged but for them.
type heldBack struct{ entries, bytes uint64 }

// retention is the replica's state of bounded history.
type retention struct {
	logs   map[wire.OriginID]store.Log // as the store holds them (kept in step with Apply and Purge)
	afloor uint64
	holds  map[holdKey]*hold
	nextAt time.Time // the next retention step
	held   map[string]heldBack
	// restarted: holds were read from the store, and their since waits for the first
	// input's time
	restarted bool
	// tombTable and tombKey are where the tombstone walk goes on (nil: from the first
	// record).
	tombTable, tombKey []byte
	// atHead: the holds of this node's own origin that reached its head since the last
	// local write (each listed once while atHead is set), so that a write finds the peers
	// it puts behind without walking every hold.
	atHead []*hold
}

// loadRetention reads the logs, the arrival floor and the holds.
func (r *Replica) loadRetention() error {
	logs, err := r.store.Logs()
	if err != nil {
		return err
	}
	af, err := r.store.ArrivalFloor()
	if err != nil {
		return err
	}
	hs, err := r.store.Holds()
	if err != nil {
		return err
	}
	r.ret = retention{logs: logs, afloor: af, holds: map[holdKey]*hold{}, held: map[string]heldBack{}}
	for _, h := range hs {
		// since is set at the first input (settle): the peers were cut off by this node's
		// own stop, and each gets RetainHold from its return to come back.
		r.ret.holds[holdKey{h.Peer, h.Origin}] = &hold{seq: h.Seq, since: h.Since, dirty: true}
	}
	r.ret.restarted = len(hs) > 0
	return nil
}

// floor is an origin's log floor on this node.
func (r *Replica) floor(o wire.OriginID) store.Floor { return r.ret.logs[o].Floor }

// logApplied records an Apply's bytes in the origin's log.
func (r *Replica) logApplied(o wire.OriginID, n int) {
	l := r.ret.logs[o]
	l.Bytes += uint64(n)
	r.ret.logs[o] = l
	r.feedsApplied(o, n)
}

// runApplied records a run's Apply in the origin's log: the row run, which replaced the
// row prev when the store merged the two (store.Extend; nil when it did not).
func (r *Replica) runApplied(o wire.OriginID, run, prev *store.SkippedError) {
	n := len(store.AppendSkipRow(nil, run))
	if prev == nil {
		r.logApplied(o, n)
		return
	}
	was := len(store.AppendSkipRow(nil, prev))
	l := r.ret.logs[o]
	l.Bytes = l.Bytes + uint64(n) - min(l.Bytes, uint64(was))
	r.ret.logs[o] = l
	r.feedsRunMerged(o, prev.To, n, was)
}

// holdAt makes or moves a peer's hold: to seq at the peer's (re)subscription, which may
// be lower than before (it lost entries), or as an advance (only upwards).
func (r *Replica) holdAt(peer string, o wire.OriginID, seq uint64, reset bool) {
	if peer == "" {
		return
	}
	k := holdKey{peer, o}
	h := r.ret.holds[k]
	put := true
	switch {
	case h == nil:
		h = &hold{seq: seq, since: r.now}
		r.ret.holds[k] = h
	case reset && seq != h.seq:
		h.seq, h.since = seq, r.now
	case seq > h.seq:
		// An advance is written with the next retention step: lost in a crash, the hold
		// is only lower than it was, which keeps more.
		h.seq, h.since, h.dirty = seq, r.now, true
		put = false
	default:
		put = false
	}
	if o == r.id.Origin {
		r.watchHead(h)
	}
	if put {
		// A new hold, or one moved down, is written at once: a crash must not forget what
		// a peer still needs.
		h.dirty = false
		r.check(r.store.PutHolds([]store.Hold{{Peer: peer, Origin: o, Seq: h.seq, Since: h.since}}))
	}
}

// watchHead notes whether a hold of this node's own origin is at the origin's head. The
// peer of one that is has not been behind since it got there: the next local write puts it
// behind, and its lag counts from that write (leftHead), not from when its position last
// moved, which may be long before on an origin that wrote nothing since (PeerBehindOf).
func (r *Replica) watchHead(h *hold) {
	switch at := h.seq >= r.origin(r.id.Origin).applied.Seq; {
	case !at:
		h.atHead = false // moved down (a resubscription): behind since that move
	case !h.atHead:
		h.atHead = true
		r.ret.atHead = append(r.ret.atHead, h)
	}
}

// leftHead is called when a local write extended this node's own origin: the peers whose
// holds were at its head are behind from now. Their holds advanced until now, as
// holdLimits counts a hold at the head.
func (r *Replica) leftHead() {
	head := r.origin(r.id.Origin).applied.Seq
	keep := r.ret.atHead[:0]
	for _, h := range r.ret.atHead {
		switch {
		case !h.atHead: // moved down since it was listed
		case h.seq < head:
			h.atHead, h.since = false, r.now
		default:
			keep = append(keep, h) // ahead of the origin's log (a rewind, rewind.go)
		}
	}
	clear(r.ret.atHead[len(keep):]) // released and lapsed holds are not kept alive here
	r.ret.atHead = keep
}

// advanceHold moves an existing hold up (a CURSOR, an ACK1, an advertised head).
func (r *Replica) advanceHold(peer string, o wire.OriginID, seq uint64) {
	if r.ret.holds[holdKey{peer, o}] != nil {
		r.holdAt(peer, o, seq, false)
	}
}

// releasePeerHold forgets a peer's hold on one origin (the peer was told this node takes the
// origin directly: quiet.go), in the store at once, as a new hold is written.
func (r *Replica) releasePeerHold(peer string, o wire.OriginID) {
	k := holdKey{peer, o}
	if h := r.ret.holds[k]; h != nil {
		h.atHead = false
		delete(r.ret.holds, k)
		r.check(r.store.DeleteHold(peer, o))
	}
}

// ReleaseHolds forgets every hold of a peer (the peer was removed).
func (r *Replica) ReleaseHolds(peer string) error {
	if r.fatal != nil {
		return r.fatal
	}
	for k := range r.ret.holds {
		if k.peer == peer {
			delete(r.ret.holds, k)
		}
	}
	delete(r.ret.held, peer)
	if !r.check(r.store.DeleteHolds(peer)) {
		return r.settleFailed()
	}
	return nil
}

// RetentionHeld is what a peer's holds kept from the last retention step: entries and
// their bytes.
func (r *Replica) RetentionHeld(peer string) (entries, bytes uint64) {
	h := r.ret.held[peer]
	return h.entries, h.bytes
}

// RetentionHoldAge is how long the oldest of a peer's holds that keeps entries back has
// not advanced, at now: once it reaches RetainHold the hold lapses, retention may purge what
// the peer still needs, and the peer may need a base copy. 0 while none keeps anything.
func (r *Replica) RetentionHoldAge(peer string, now time.Time) time.Duration {
	var age time.Duration
	for k, h := range r.ret.holds {
		if k.peer != peer {
			continue
		}
		head := r.arrivals
		if !k.origin.IsZero() {
			head = r.origin(k.origin).applied.Seq
		}
		if h.seq < head && !h.since.IsZero() {
			age = max(age, now.Sub(h.since))
		}
	}
	return age
}

// limits is what the holds allow retention to purge now: per origin, the lowest held seq
// (absent: no hold), and the lowest version-1 arrival position held (0 with hasV1 false:
// none). Holds that have not advanced for RetainHold lapse and are forgotten; a hold at
// or past the log's head holds nothing, and counts as advancing.
func (r *Replica) holdLimits() (perOrigin map[wire.OriginID]uint64, v1 uint64, hasV1 bool, lapsed []holdKey) {
	perOrigin = map[wire.OriginID]uint64{}
	for k, h := range r.ret.holds {
		head := r.arrivals
		if !k.origin.IsZero() {
			head = r.origin(k.origin).applied.Seq
		}
		if h.seq >= head {
			h.since = r.now // caught up: nothing is held, and the peer is not behind
			continue
		}
		if r.now.Sub(h.since) >= r.holdLapse(k.peer) {
			lapsed = append(lapsed, k)
			continue
		}
		if k.origin.IsZero() {
			if !hasV1 || h.seq < v1 {
				v1, hasV1 = h.seq, true
			}
		} else if cur, ok := perOrigin[k.origin]; !ok || h.seq < cur {
			perOrigin[k.origin] = h.seq
		}
	}
	return perOrigin, v1, hasV1, lapsed
}

// retain runs one retention step when it is due.
func (r *Replica) retain() {
	if r.storage.err != nil {
		return // degraded: a purge writes, and the store takes no write now
	}
	if r.now.Before(r.ret.nextAt) {
		return
	}
	r.ret.nextAt = r.now.Add(r.cfg.RetentionInterval)
	r.refreshCopyHolds()
	perOrigin, v1, hasV1, lapsed := r.holdLimits()
	for _, k := range lapsed {
		delete(r.ret.holds, k)
	}
	r.leafRetention(perOrigin)
	r.feedLimits(perOrigin)
	st := retentionStep{r: r, budget: r.cfg.PurgeStep, limits: perOrigin, next: map[wire.OriginID]uint64{},
		held: map[string]heldBack{}, feedsHeld: map[string]uint64{}}
	for _, l := range r.ret.logs {
		st.total += l.Bytes
	}
	if r.cfg.RetainBytes > 0 && st.total > r.cfg.RetainBytes {
		st.over = st.total - r.cfg.RetainBytes
	}
	st.ageLimit = uint64(max(r.now.Add(-r.cfg.RetainAge).UnixMilli(), 0))
	if !st.stragglers() || !st.arrivalOrder(v1, hasV1) {
		return // a store failure: r.fatal says why
	}
	r.ret.held = st.held
	for name, f := range r.named {
		f.heldBack = st.feedsHeld[name]
	}
	p := &store.Purge{ArrivalFloor: max(r.ret.afloor, st.afloor)}
	for _, o := range r.originOrder {
		if to, ok := st.next[o]; ok && to > r.floor(o).Seq {
			p.Logs = append(p.Logs, store.PurgeLog{Origin: o, To: to})
		}
	}
	if len(p.Logs) > 0 || p.ArrivalFloor > r.ret.afloor {
		if !r.check(r.store.Purge(p)) {
			return
		}
		logs, err := r.store.Logs()
		if !r.check(err) {
			return
		}
		r.ret.logs, r.ret.afloor = logs, p.ArrivalFloor
		r.feedsLogsChanged()
		r.counters.EntriesPurged += st.purged
		for _, l := range p.Logs {
			r.headsDirty[l.Origin] = true // version-3 peers are told the new floor
		}
	}
	if st.budget <= 0 {
		r.ret.nextAt = r.now // more may be due: the next Tick goes on
	}
	r.persistHolds(lapsed)
	r.dropTombstones()
	r.dropLeafMarks()
}

// tombstoneHorizon says which tombstones may be dropped (docs/design.md §14, §27.4): those
// older than RetainAge (below age) and at or below every other origin's applied timestamp
// less the leaf window W (applied), every origin this node knows but its own, whose later
// writes are all newer than its clock. Every later entry of an origin is newer than the
// one applied, and the versions it writes are at most W older than it (a hub's entry
// carries a leaf write at most W below its own HLC; W is 0 without hubs), so no version
// still to come is as old as such a tombstone: a put it beat can no longer arrive. With
// W > 0 this node's own origin has a term too, its clock less W: a hub's own later entries
// may carry leaf writes that old. ok is false while some origin known is applied nowhere.
// Anti-entropy's below-horizon check reads the same horizon.
func (r *Replica) tombstoneHorizon() (age, applied wire.HLC, ok bool) {
	age = wire.MakeHLC(uint64(max(r.now.Add(-r.cfg.RetainAge).UnixMilli(), 0)), 0)
	applied = ^wire.HLC(0)
	w := r.leafWindow()
	for _, o := range r.originOrder {
		if o == r.id.Origin {
			if w > 0 {
				applied = min(applied, hlcBelow(r.hlc, w))
			}
			continue
		}
		st := r.origins[o]
		if st.applied.Seq == 0 {
			return 0, 0, false
		}
		applied = min(applied, hlcBelow(st.appliedHLC, w))
	}
	return age, applied, true
}

// leafWindow is the leaf window of the map this node holds (clustermap.Map.LeafWindow,
// docs/design.md §27.4): how far below a hub's entry HLC the versions it carries may be.
// 0 without a map, or without a window. The one place the replica reads it.
func (r *Replica) leafWindow() time.Duration { return r.cmap.cur.LeafWindow }

// hlcBelow is h less d (whole milliseconds, the HLC's unit), 0 at the least.
func hlcBelow(h wire.HLC, d time.Duration) wire.HLC {
	w := wire.MakeHLC(uint64(d.Milliseconds()), 0)
	if h <= w {
		return 0
	}
	return h - w
}

// dropTombstones walks PurgeStep records on from where the last walk stopped, and drops
// the tombstones older than the horizon, in one write. The walk starts over after the
// last record. A tombstone that carries a fencing token is never dropped: it is its key's
// token floor (docs/design.md §25.4), below which a stale holder's late write of the
// deleted key must still lose, and a late write may come at any time (its token, not its
// clock, orders it), so no horizon covers it. Nor is a tombstone of a table this node does
// not hold whole (docs/design.md §24.4): a copy taker keeps its own records of such a
// table that the snapshot lacks, so the tombstone is the only way the delete reaches it,
// and its source's own origin is raised past the delete all the same.
func (r *Replica) dropTombstones() {
	age, applied, ok := r.tombstoneHorizon()
	if !ok {
		return
	}
	tables, err := r.store.Tables()
	if !r.check(err) {
		return
	}
	partial := r.partialTables()
	budget := r.cfg.PurgeStep
	var drop []store.Record
	i, _ := slices.BinarySearchFunc(tables, r.ret.tombTable, bytes.Compare)
	for ; i < len(tables) && budget > 0; i++ {
		if _, found := slices.BinarySearch(partial, string(tables[i])); found {
			continue // the walk passes it whole: none of its tombstones may go
		}
		after := []byte(nil)
		if bytes.Equal(tables[i], r.ret.tombTable) {
			after = r.ret.tombKey
		}
		ok := r.scanReadable(tables[i], after, func(rec store.Record) bool {
			budget--
			r.ret.tombTable, r.ret.tombKey = rec.Table, rec.Key
			if rec.Deleted && rec.Token.IsZero() && rec.HLC < age && (rec.HLC <= applied || r.cfg.Mutations.DropTombstonesEarly) {
				drop = append(drop, rec)
			}
			return budget > 0
		})
		if !ok {
			return
		}
	}
	if budget > 0 { // the walk reached the end: the next one starts over
		r.ret.tombTable, r.ret.tombKey = nil, nil
	}
	if len(drop) > 0 && r.check(r.store.DropTombstones(drop)) {
		r.counters.TombstonesDropped += uint64(len(drop))
	}
}

// persistHolds writes the holds that changed and forgets the lapsed ones in the store.
func (r *Replica) persistHolds(lapsed []holdKey) {
	var dirty []store.Hold
	for k, h := range r.ret.holds {
		if h.dirty {
			dirty = append(dirty, store.Hold{Peer: k.peer, Origin: k.origin, Seq: h.seq, Since: h.since})
			h.dirty = false
		}
	}
	if len(dirty) > 0 {
		slices.SortFunc(dirty, func(a, b store.Hold) int {
			if c := strings.Compare(a.Peer, b.Peer); c != 0 {
				return c
			}
			return bytes.Compare(a.Origin[:], b.Origin[:])
		})
		r.check(r.store.PutHolds(dirty))
	}
	// A lapsed hold of a peer that holds nothing else goes with all of that peer's; a
	// peer's other holds stay (the store forgets per peer).
	peers := map[string]bool{}
	for _, k := range lapsed {
		peers[k.peer] = true
	}
	for k := range r.ret.holds {
		delete(peers, k.peer)
	}
	names := make([]string, 0, len(peers))
	for p := range peers {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		r.check(r.store.DeleteHolds(p))
	}
}

// retentionStep is one step's decision: which entries go, within its budget.
type retentionStep struct {
	r        *Replica
	budget   int                      // entries it may still examine
	limits   map[wire.OriginID]uint64 // the lowest held seq per origin
	next     map[wire.OriginID]uint64 // each log's floor after the step, where it moves
	afloor   uint64                   // the arrival floor after the step (0: unmoved)
	total    uint64                   // the logs' bytes before the step
	over     uint64                   // bytes past RetainBytes still to purge
	ageLimit uint64                   // HLC wall milliseconds: older entries may go
	purged   uint64
	held     map[string]heldBack
	// feedsHeld: what the named feeds' holds kept, by feed (namedfeeds.go).
	feedsHeld map[string]uint64
	// stays: the floor at which runsBefore found a log's next row staying (runsBefore).
	stays map[wire.OriginID]uint64
}

// verdict is what a step makes of one entry.
type verdict uint8

const (
	purge    verdict = iota
	tooYoung         // neither old enough nor wanted for bytes: later entries are younger still
	kept             // the head, or not yet synced
	held             // purgeable but for a peer's hold
)

// judge decides one entry (o, seq) of size n and timestamp hlc. With decide it is next in
// its log and goes when it may (the step counts it); without, an earlier entry of its log
// stays and judge only finds whether a hold is what keeps it. An entry held is counted
// against each peer whose hold keeps it.
func (st *retentionStep) judge(o wire.OriginID, seq uint64, hlc wire.HLC, n int, decide bool) verdict {
	r := st.r
	os := r.origin(o)
	switch {
	case seq >= os.applied.Seq:
		return kept // the head stays, so the chain can go on from it
	case o == r.id.Origin && r.cfg.HoldUnsynced && seq > r.synced:
		return kept // not yet durable, nor served
	case hlc.WallMillis() >= st.ageLimit && st.over == 0:
		return tooYoung
	}
	if lim, ok := st.limits[o]; ok && seq > lim && !r.cfg.Mutations.IgnoreHolds {
		for k, h := range r.ret.holds {
			if k.origin == o && h.seq < seq && r.now.Sub(h.since) < r.cfg.RetainHold {
				hb := st.held[k.peer]
				hb.entries++
				hb.bytes += uint64(n)
				st.held[k.peer] = hb
			}
		}
		r.feedsHeld(o, seq, n, st.feedsHeld)
		return held
	}
	if decide {
		st.purged++
		st.over -= min(st.over, uint64(n))
	}
	return purge
}

// floorOf is a log's floor as the step has moved it so far.
func (st *retentionStep) floorOf(o wire.OriginID) uint64 {
	if f, ok := st.next[o]; ok {
		return f
	}
	return st.r.floor(o).Seq
}

// stragglers purges, log by log, the entries that the arrival floor passed while they were
// kept: they are older in arrival order than every entry still in it.
func (st *retentionStep) stragglers() bool {
	r := st.r
	for _, o := range r.originOrder {
		l := r.ret.logs[o]
		for seq := l.Floor.Seq + 1; seq <= r.origin(o).applied.Seq && st.budget > 0; seq++ {
			raw, err := r.store.Entry(o, seq)
			if sk, ok := skipped(err); ok {
				// A run has no arrival position: it goes when it is next in its log, above
				// Below too, so that a log of runs alone is purged (§24.2).
				st.budget--
				if !st.judgeRun(sk) {
					break
				}
				seq = sk.To
				continue
			}
			if seq > l.Below {
				break // the entries above are in the arrival order: arrivalOrder's
			}
			st.budget--
			if !r.check(err) {
				return false
			}
			v, err := wire.ParseTxn(raw)
			if !r.check(err) {
				return false
			}
			next := st.floorOf(o) == seq-1 // every earlier entry of the run goes
			switch st.judge(o, seq, v.HLC, len(raw), next) {
			case purge:
				if next {
					st.next[o] = seq
				}
			case held:
				// the rest of the run is counted against the holds too
			default:
				seq = l.Below // kept or too young: the rest of the run stays
			}
		}
	}
	return true
}

// judgeRun judges a run of a log as one entry of its last seq, HLC and row size: it goes
// when it is next in its log and may. It reports whether the walk of its log goes on past
// it (purged, or held: what is after it is counted against the holds too).
func (st *retentionStep) judgeRun(sk *store.SkippedError) bool {
	next := st.floorOf(sk.Origin) == sk.From-1
	switch st.judge(sk.Origin, sk.To, sk.HLC, len(store.AppendSkipRow(nil, sk)), next) {
	case purge:
		if next {
			st.next[sk.Origin] = sk.To
		}
		return true
	case held:
		return true
	}
	return false
}

// runsBefore purges the runs between a log's floor (as the step moved it) and seq, which
// have no arrival position of their own, as far as they may go; it reports whether seq is
// then next in its log.
func (st *retentionStep) runsBefore(o wire.OriginID, seq uint64) bool {
	r := st.r
	if f, ok := st.stays[o]; ok && f == st.floorOf(o) {
		return false // found at this floor already: the walk meets the log's other entries
	}
	for f := st.floorOf(o); f+1 < seq; f = st.floorOf(o) {
		_, err := r.store.Entry(o, f+1)
		sk, ok := skipped(err)
		if !ok || sk.To >= seq || !st.judgeRun(sk) || st.floorOf(o) != sk.To {
			// An entry (kept in the arrival order), or a run that stays: the same answer
			// for every later entry of the log while its floor does not move.
			if st.stays == nil {
				st.stays = map[wire.OriginID]uint64{}
			}
			st.stays[o] = st.floorOf(o)
			return false
		}
	}
	return true
}

// arrivalOrder walks the arrival order from its floor: an entry next in its log goes when
// it may; one kept (a head, held) is passed over, and stays in its log below the arrival
// floor once a later entry goes; the walk ends at the first entry too young to go, at the
// version-1 holds, or when the budget is spent.
func (st *retentionStep) arrivalOrder(v1 uint64, hasV1 bool) bool {
	r := st.r
	after := r.ret.afloor
	for st.budget > 0 && after < r.arrivals {
		if hasV1 && after >= v1 {
			return true // a version-1 peer still needs every position above v1
		}
		n := min(st.budget, arrivalBatch)
		batch, err := r.store.Arrivals(after, n)
		if !r.check(err) {
			return false
		}
		if len(batch) == 0 {
			return true
		}
		for _, a := range batch {
			if hasV1 && a.Pos > v1 {
				return true
			}
			st.budget--
			after = a.Pos
			v, err := wire.ParseTxn(a.Txn)
			if !r.check(err) {
				return false
			}
			if v.Seq != st.floorOf(v.Origin)+1 && !st.runsBefore(v.Origin, v.Seq) {
				st.judge(v.Origin, v.Seq, v.HLC, len(a.Txn), false) // an earlier entry stays: counted if held
				continue
			}
			switch st.judge(v.Origin, v.Seq, v.HLC, len(a.Txn), true) {
			case purge:
				st.next[v.Origin] = v.Seq
				st.afloor = a.Pos
			case tooYoung:
				return true
			}
			if st.budget <= 0 {
				return true
			}
		}
	}
	return true
}

// purgedAnswer answers a peer that asks for entries below a log's floor (docs/contract.md
// §16): this node's own origin, or any origin to a version-1 peer, closes the connection
// with purged; a relayed origin is withdrawn from a version-2 peer, which is sent no entry
// of it on this connection.
func (r *Replica) purgedAnswer(c *conn, o wire.OriginID, why string) {
	r.counters.PurgedAnswers++
	if c.version >= 3 {
		f := r.floor(o)
		c.dropOut(o)
		r.checkConn(c, c.sess.V3().Purged(o, f.Seq, f.Hash))
		return
	}
	if c.version == 1 || o == r.id.Origin {
		r.closeConn(c, wire.CodePurged, why)
		return
	}
	c.purged[o] = true
	c.dropOut(o)
	if c.adv[o] {
		delete(c.adv, o)
		r.checkConn(c, c.sess.V2().WithdrawHeads([]wire.OriginID{o}))
	}
}

// isPurged reports whether err says an entry is below its log's floor.
func isPurged(err error) bool { return errors.Is(err, store.ErrPurged) }
