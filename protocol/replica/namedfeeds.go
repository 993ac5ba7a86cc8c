package replica

import (
	"maps"
	"slices"
	"strconv"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// Named feeds (docs/design.md §26.5): a change feed of one table whose acknowledged
// position this node keeps, in its store, for a consumer that comes and goes. Its
// position is, per origin, the highest seq the consumer acknowledged; acks only move it
// up, and never past this node's applied positions (CodeAhead). A named feed holds
// retention: each origin's entries above its position stay while the log bytes above its
// position (held) are at or under its HoldBytes; a retention step that finds them over
// lapses the hold, and retention then goes on as without it. Holding is the whole point
// of a named feed, and bounding it is what keeps one forgotten consumer from filling the
// disk: the cap is the operator's, per feed, as PostgreSQL's max_slot_wal_keep_size is per
// slot.
//
// The bytes above a position are kept per origin as the logs change, never summed by a
// walk on the hot path: an applied entry or run adds its bytes to every feed (its seq is
// above every feed's position, which is at most the applied seq); an ack reads the
// shorter of the entries it passes (their bytes come off) and those still above it (their
// bytes are the answer), so that a consumer near the head costs the loop a few reads per
// ack; a purge or a copy keeps the smaller of the feed's bytes and the log's, because the retained log and
// the entries above a position are both a top of the same log, and the shorter one is
// the other's part. Only loading reads a log above a position, once.

// Codes of the named feeds' refusals (docs/contract.md §24.6).
const (
	// CodeTooManyNamedFeeds refuses a feed past Config.MaxNamedFeeds.
	CodeTooManyNamedFeeds wire.Code = "too-many-named-feeds"
	// CodeAhead refuses an ack above this node's applied position of some origin.
	CodeAhead wire.Code = "ahead"
	// CodeNoSuchFeed is a name no feed of this node has.
	CodeNoSuchFeed wire.Code = "not-found"
	// CodeFeedExists refuses a PUT that names another table for an existing feed: its
	// position is of that table's feed, and moving it would skip or repeat changes.
	CodeFeedExists wire.Code = "feed-exists"
	// CodeBadFeedName refuses a name outside ValidFeedName's rule.
	CodeBadFeedName wire.Code = "bad-name"
	// CodeBadFeedTable refuses a table name outside the rule (ValidTable).
	CodeBadFeedTable wire.Code = "bad-table"
)

// MaxFeedName bounds a named feed's name: its control document's key is
// "named-feed-NAME", within store.MaxControlKey.
const MaxFeedName = 48

const (
	controlNamedFeeds = "named-feeds" // the names, sorted
	controlFeedPrefix = "named-feed-" // one document per feed
)

// ValidFeedName reports whether name is a named feed's: 1 to MaxFeedName bytes of
// [a-z0-9-], the rule of a control key, so that the name is its document's key as it is.
func ValidFeedName(name string) bool {
	return len(name) > 0 && len(name) <= MaxFeedName && store.CheckControlKey(controlFeedPrefix+name) == nil
}

// namedFeed is one named feed as the replica keeps it.
type namedFeed struct {
	table     string
	holdBytes uint64
	lapsed    bool
	pos       map[wire.OriginID]uint64 // acknowledged; an origin absent is at 0
	// above: per origin, the bytes of the log's entries (and runs) whose last seq is above
	// pos, as the log holds them now.
	above map[wire.OriginID]uint64
	// heldBack: the bytes the last retention step kept only because of this feed.
	heldBack uint64
}

func (f *namedFeed) aboveBytes() uint64 {
	var n uint64
	for _, b := range f.above {
		n += b
	}
	return n
}

// storedFeed is a named feed's control document.
type storedFeed struct {
	Table     string       `cbor:"1,keyasint"`
	HoldBytes uint64       `cbor:"2,keyasint"`
	Lapsed    bool         `cbor:"3,keyasint,omitempty"`
	Pos       []storedSeqs `cbor:"4,keyasint,omitempty"`
}

// NamedFeedStatus is one named feed's state (GET /v1/feeds/{name} and the status).
type NamedFeedStatus struct {
	Name      string
	Table     string
	HoldBytes uint64
	// Position is the acknowledged position, ascending by origin, without origins at 0.
	Position []wire.OriginSeq
	// LagEntries is, summed over the origins, how far this node's applied seq is past
	// the position; LagBytes the log bytes above the position that the logs still hold.
	LagEntries uint64
	LagBytes   uint64
	// HeldBytes is what the last retention step kept only because of this feed.
	HeldBytes uint64
	// Lapsed: the log bytes above the position went over HoldBytes, and the feed holds
	// nothing until an ack or a larger cap brings them back under it with nothing above
	// its position purged.
	Lapsed bool
}

func (r *Replica) namedFeedStatus(name string, f *namedFeed) NamedFeedStatus {
	s := NamedFeedStatus{Name: name, Table: f.table, HoldBytes: f.holdBytes, Position: holdSeqs(f.pos),
		LagBytes: f.aboveBytes(), HeldBytes: f.heldBack, Lapsed: f.lapsed}
	for _, st := range r.originList {
		if a := st.applied.Seq; a > f.pos[st.id] {
			s.LagEntries += a - f.pos[st.id]
		}
	}
	return s
}

// NamedFeeds lists the named feeds, sorted by name.
func (r *Replica) NamedFeeds() []NamedFeedStatus {
	out := make([]NamedFeedStatus, 0, len(r.named))
	for _, name := range slices.Sorted(maps.Keys(r.named)) {
		out = append(out, r.namedFeedStatus(name, r.named[name]))
	}
	return out
}

// NamedFeed is one named feed's state; false when there is none of that name.
func (r *Replica) NamedFeed(name string) (NamedFeedStatus, bool) {
	f := r.named[name]
	if f == nil {
		return NamedFeedStatus{}, false
	}
	return r.namedFeedStatus(name, f), true
}

// PutNamedFeed creates a named feed of table at this node's applied positions (of its own
// origin, its synced seq: feedSeq), or sets an existing one's cap (created says which). A feed of another table of that name is
// refused (CodeFeedExists), and a new one past Config.MaxNamedFeeds too
// (CodeTooManyNamedFeeds, counted). It returns once the feed is in the store.
func (r *Replica) PutNamedFeed(name, table string, holdBytes uint64) (st NamedFeedStatus, created bool, err error) {
	if r.fatal != nil {
		return NamedFeedStatus{}, false, r.fatal
	}
	switch {
	case !ValidFeedName(name):
		return NamedFeedStatus{}, false, wire.NewError(CodeBadFeedName, "a feed name is 1 to "+strconv.Itoa(MaxFeedName)+" of [a-z0-9-]")
	case !ValidTable([]byte(table)):
		return NamedFeedStatus{}, false, wire.NewError(CodeBadFeedTable, "a table name is 1 to 64 of [A-Za-z0-9_.-]")
	}
	if f := r.named[name]; f != nil {
		if f.table != table {
			return NamedFeedStatus{}, false, wire.NewError(CodeFeedExists, "the feed "+name+" follows the table "+f.table+"; delete it to follow another")
		}
		n := *f
		n.holdBytes = holdBytes
		r.rearm(&n)
		if err := r.writeFeed(name, &n); err != nil {
			return NamedFeedStatus{}, false, err
		}
		*f = n
		return r.namedFeedStatus(name, f), false, nil
	}
	if len(r.named) >= r.cfg.MaxNamedFeeds {
		r.counters.NamedFeedsRefused++
		return NamedFeedStatus{}, false, wire.NewError(CodeTooManyNamedFeeds,
			"this node keeps "+strconv.Itoa(r.cfg.MaxNamedFeeds)+" named feeds already (--max-named-feeds); delete one first")
	}
	pos := r.appliedSeqs()
	if s := r.feedSeq(r.id.Origin); s > 0 {
		pos[r.id.Origin] = s
	} else {
		delete(pos, r.id.Origin)
	}
	f := &namedFeed{table: table, holdBytes: holdBytes, pos: pos, above: map[wire.OriginID]uint64{}}
	// The bytes above a position under the own origin's applied seq (entries not yet
	// synced) are above it already.
	if a := r.origin(r.id.Origin).applied.Seq; a > pos[r.id.Origin] {
		passed, err := r.logBytes(r.id.Origin, pos[r.id.Origin], a)
		if err != nil {
			return NamedFeedStatus{}, false, err
		}
		f.above[r.id.Origin] = passed
	}
	if err := r.writeFeed(name, f); err != nil {
		return NamedFeedStatus{}, false, err
	}
	names := append(slices.Sorted(maps.Keys(r.named)), name)
	slices.Sort(names)
	if err := r.writeFeedNames(names); err != nil {
		return NamedFeedStatus{}, false, err
	}
	if r.named == nil {
		r.named = map[string]*namedFeed{}
	}
	r.named[name] = f
	return r.namedFeedStatus(name, f), true, nil
}

// DeleteNamedFeed forgets a named feed and its hold (false: there was none).
func (r *Replica) DeleteNamedFeed(name string) (bool, error) {
	if r.fatal != nil {
		return false, r.fatal
	}
	if r.named[name] == nil {
		return false, nil
	}
	var names []string
	for _, n := range slices.Sorted(maps.Keys(r.named)) {
		if n != name {
			names = append(names, n)
		}
	}
	// The list first: a crash after it leaves a document no list names, which a feed
	// created again under the name overwrites.
	if err := r.writeFeedNames(names); err != nil {
		return false, err
	}
	delete(r.named, name)
	if !r.check(r.store.PutControl(controlFeedPrefix+name, []byte{})) {
		return true, r.failure()
	}
	return true, nil
}

// AckNamedFeed moves a named feed's position up to pos, origin by origin (an origin
// below the feed's position stays where it is). An origin above this node's applied seq
// (of its own origin, its synced seq: feedSeq) refuses the whole ack (CodeAhead), moving
// nothing. It returns once the position is in the store.
func (r *Replica) AckNamedFeed(name string, pos []wire.OriginSeq) (NamedFeedStatus, error) {
	if r.fatal != nil {
		return NamedFeedStatus{}, r.fatal
	}
	f := r.named[name]
	if f == nil {
		return NamedFeedStatus{}, wire.NewError(CodeNoSuchFeed, "no named feed "+name)
	}
	for _, p := range pos {
		if a := r.feedSeq(p.Origin); p.Seq > a {
			r.counters.NamedFeedAcksAhead++
			return NamedFeedStatus{}, wire.NewError(CodeAhead, "the position of "+p.Origin.String()+" is "+strconv.FormatUint(p.Seq, 10)+
				", above this node's applied "+strconv.FormatUint(a, 10))
		}
	}
	n := *f
	n.pos, n.above = maps.Clone(f.pos), maps.Clone(f.above)
	if n.pos == nil {
		n.pos = map[wire.OriginID]uint64{}
	}
	if n.above == nil {
		n.above = map[wire.OriginID]uint64{}
	}
	moved := false
	for _, p := range pos {
		from := n.pos[p.Origin]
		if p.Seq <= from {
			continue
		}
		above, err := r.bytesAbove(p.Origin, from, p.Seq, n.above[p.Origin])
		if err != nil {
			return NamedFeedStatus{}, err
		}
		n.above[p.Origin] = above
		n.pos[p.Origin], moved = p.Seq, true
	}
	if !moved {
		return r.namedFeedStatus(name, f), nil
	}
	r.rearm(&n)
	if err := r.writeFeed(name, &n); err != nil {
		return NamedFeedStatus{}, err
	}
	*f = n
	r.counters.NamedFeedAcks++
	return r.namedFeedStatus(name, f), nil
}

// feedSeq is how far a feed may read origin o on this node: its applied seq, and of this
// node's own origin, while entries wait for their sync (HoldUnsynced), the synced seq, as
// the shell's feeds read it (node.FeedRead): a crash may take back a local write not
// synced, and a position past it would pass over the write that reuses its seq.
// An origin this node does not know is at 0; it is looked up, never made (origin would
// list it in the status from then on, for an ack's say).
func (r *Replica) feedSeq(o wire.OriginID) uint64 {
	st := r.origins[o]
	if st == nil {
		return 0
	}
	a := st.applied.Seq
	if o == r.id.Origin && r.cfg.HoldUnsynced {
		return min(a, r.synced)
	}
	return a
}

// bytesAbove is the bytes of origin o's log above seq to, for a feed whose position moves
// there from seq from with above bytes above it. It reads the shorter of the two stretches
// of the log: the entries the ack passes (their bytes come off above), or those still
// above to (their bytes are the answer). A consumer near the head reads few either way,
// one far behind that acks often too; the loop reads at most what the feed holds.
func (r *Replica) bytesAbove(o wire.OriginID, from, to, above uint64) (uint64, error) {
	fl, head := r.floor(o).Seq, r.origin(o).applied.Seq
	if to <= fl {
		return r.ret.logs[o].Bytes, nil // the whole log is above it
	}
	if to-max(from, fl) <= head-to {
		passed, err := r.logBytes(o, from, to)
		return above - min(above, passed), err
	}
	return r.logBytes(o, to, head)
}

// rearm holds again a lapsed feed whose bytes are at or under its cap and none of whose
// entries above its position were purged: it lost nothing, so holding it again keeps
// what its consumer still reads. One that lost entries stays lapsed: its consumer meets
// purged, and the status says why.
func (r *Replica) rearm(f *namedFeed) {
	if !f.lapsed || f.aboveBytes() > f.holdBytes {
		return
	}
	for _, st := range r.originList {
		if r.floor(st.id).Seq > f.pos[st.id] {
			return
		}
	}
	f.lapsed = false
}

// logBytes is the bytes of origin o's entries and runs whose last seq is in (from, to]
// that its log holds now (those purged count nothing).
func (r *Replica) logBytes(o wire.OriginID, from, to uint64) (uint64, error) {
	var n uint64
	for seq := max(from, r.floor(o).Seq) + 1; seq <= to; seq++ {
		raw, err := r.store.Entry(o, seq)
		if sk, ok := skipped(err); ok {
			if sk.To > to {
				break // its last seq is past to: still above
			}
			if sk.To > from {
				n += uint64(len(store.AppendSkipRow(nil, sk)))
			}
			seq = sk.To
			continue
		}
		if isPurged(err) {
			continue
		}
		if !r.check(err) {
			return 0, r.failure()
		}
		n += uint64(len(raw))
	}
	return n, nil
}

// feedsApplied adds an applied entry's or run's bytes to every named feed.
func (r *Replica) feedsApplied(o wire.OriginID, n int) {
	for _, f := range r.named {
		if f.above == nil {
			f.above = map[wire.OriginID]uint64{}
		}
		f.above[o] += uint64(n)
	}
}

// feedsRunMerged adds a run's bytes to every named feed when the store merged it with the
// run before it, through prevTo, into a row of n bytes that replaced one of was: a feed
// that counted the earlier row (its position below prevTo) grows by the difference, one
// that did not has the whole merged row above it now (its last seq is above every
// position).
func (r *Replica) feedsRunMerged(o wire.OriginID, prevTo uint64, n, was int) {
	for _, f := range r.named {
		if f.above == nil {
			f.above = map[wire.OriginID]uint64{}
		}
		if f.pos[o] < prevTo {
			f.above[o] = f.above[o] + uint64(n) - min(f.above[o], uint64(was))
		} else {
			f.above[o] += uint64(n)
		}
	}
}

// feedsLogsChanged keeps every named feed's bytes within its logs' after a purge or a
// copy (see the package's note above), and lapses a held feed a log's floor passed: a
// base copy raises floors whatever the holds (a purge never passes a held feed), and the
// entries after the feed's position are then gone here, so its status must not say it
// holds them (its consumer meets purged, and lists the table again).
func (r *Replica) feedsLogsChanged() {
	for _, name := range slices.Sorted(maps.Keys(r.named)) {
		f := r.named[name]
		for o, b := range f.above {
			f.above[o] = min(b, r.ret.logs[o].Bytes)
		}
		if f.lapsed {
			continue
		}
		for o, l := range r.ret.logs {
			if l.Floor.Seq > f.pos[o] {
				n := *f
				n.lapsed = true
				if r.writeFeed(name, &n) == nil {
					*f = n
					r.counters.NamedFeedHoldsLapsed++
				}
				break
			}
		}
	}
}

// feedLimits lapses the feeds whose bytes went over their caps (written, and counted),
// and adds each held feed's position to the per-origin limits of a retention step.
func (r *Replica) feedLimits(perOrigin map[wire.OriginID]uint64) {
	for _, name := range slices.Sorted(maps.Keys(r.named)) {
		f := r.named[name]
		if !f.lapsed && f.aboveBytes() > f.holdBytes {
			// Written first: a lapse the store did not take holds on (a store failure
			// stops this step's purge as well).
			n := *f
			n.lapsed = true
			if r.writeFeed(name, &n) == nil {
				*f = n
				r.counters.NamedFeedHoldsLapsed++
			}
		}
		if f.lapsed {
			continue
		}
		for _, st := range r.originList {
			if st.applied.Seq <= f.pos[st.id] {
				continue // nothing above it to hold
			}
			if cur, ok := perOrigin[st.id]; !ok || f.pos[st.id] < cur {
				perOrigin[st.id] = f.pos[st.id]
			}
		}
	}
}

// feedsHeld counts an entry of origin o at seq of n bytes that a retention step keeps
// against each held feed whose position is below it.
func (r *Replica) feedsHeld(o wire.OriginID, seq uint64, n int, held map[string]uint64) {
	for name, f := range r.named {
		if !f.lapsed && f.pos[o] < seq {
			held[name] += uint64(n)
		}
	}
}

func (r *Replica) writeFeed(name string, f *namedFeed) error {
	raw, err := wire.Marshal(storedFeed{Table: f.table, HoldBytes: f.holdBytes, Lapsed: f.lapsed, Pos: storeSeqs(f.pos)})
	if !r.check(err) || !r.check(r.store.PutControl(controlFeedPrefix+name, raw)) {
		return r.failure()
	}
	return nil
}

func (r *Replica) writeFeedNames(names []string) error {
	raw, err := wire.Marshal(names)
	if !r.check(err) || !r.check(r.store.PutControl(controlNamedFeeds, raw)) {
		return r.failure()
	}
	return nil
}

// loadNamedFeeds reads the named feeds, and counts each one's bytes above its position
// in the logs: one walk of each log from the lowest position of a feed above its floor
// (a feed at or below the floor has the whole log above it).
func (r *Replica) loadNamedFeeds() error {
	raw, err := r.store.Control(controlNamedFeeds)
	if err != nil || raw == nil {
		return err
	}
	var names []string
	if err := wire.Unmarshal(raw, &names); err != nil {
		return errorf("the control document %s is not a list of names: %v", controlNamedFeeds, err)
	}
	r.named = make(map[string]*namedFeed, len(names))
	for _, name := range names {
		raw, err := r.store.Control(controlFeedPrefix + name)
		if err != nil {
			return err
		}
		var sf storedFeed
		if err := wire.Unmarshal(raw, &sf); err != nil || len(raw) == 0 {
			return errorf("the control document %s%s is not a named feed: %v", controlFeedPrefix, name, err)
		}
		r.named[name] = &namedFeed{table: sf.Table, holdBytes: sf.HoldBytes, lapsed: sf.Lapsed, pos: loadSeqs(sf.Pos),
			above: map[wire.OriginID]uint64{}}
	}
	for _, st := range r.originList {
		o, head := st.id, st.applied.Seq
		fl := r.floor(o).Seq
		lowest := head
		for _, f := range r.named {
			if p := f.pos[o]; p <= fl {
				f.above[o] = r.ret.logs[o].Bytes
			} else if p < head {
				lowest = min(lowest, p)
			}
		}
		// One walk from the lowest position above the floor: each entry's bytes go to
		// every feed below its last seq.
		for seq := lowest + 1; seq <= head; seq++ {
			raw, err := r.store.Entry(o, seq)
			last, n := seq, len(raw)
			if sk, ok := skipped(err); ok {
				last, n = sk.To, len(store.AppendSkipRow(nil, sk))
			} else if err != nil {
				return err
			}
			for _, f := range r.named {
				if p := f.pos[o]; p > fl && p < last {
					f.above[o] += uint64(n)
				}
			}
			seq = last
		}
	}
	return nil
}
