package feed

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"plait/internal/mutate"
	"plait/protocol/store"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Kind is what an event is.
type Kind uint8

const (
	// Change is one log entry's operations of the feed's table.
	Change Kind = iota + 1
	// Reread says the logs cannot tell what changed in the table (Reason says why): the
	// consumer reads the table again (a listing) to catch up, then goes on from Position.
	Reread
)

func (k Kind) String() string {
	switch k {
	case Change:
		return "change"
	case Reread:
		return "reread"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// The reasons of a Reread event.
const (
	// ReasonSkipped: a run of entries this node was not sent names the table (the node did
	// not carry the table then).
	ReasonSkipped = "skipped"
	// ReasonCopy: a base copy or a table's fill wrote records of the table around the log,
	// or a copy raised the floors past the reader's position.
	ReasonCopy = "copy"
	// ReasonRepair: anti-entropy wrote records of the table around the log.
	ReasonRepair = "repair"
)

// Event is one event of a feed.
type Event struct {
	Kind   Kind
	Origin wire.OriginID // Change: the entry's origin; Reread of a run: the run's origin
	Name   string        // the origin's name, as the store knows it ("" when it knows none)
	Seq    uint64        // Change: the entry's seq; Reread of a run: the run's last seq
	HLC    wire.HLC      // Change: the entry's HLC; Reread of a run: its last entry's
	Token  wire.Token    // Change: the entry's fencing token (zero: none)
	// Leaf and LeafSeq: Change of a hub's format-3 entry (a leaf write it re-originated,
	// docs/design.md §27): the leaf's origin and the write's seq in the leaf's log; zero
	// for any other entry. Origin, Seq and HLC stay the entry's: the feed's position.
	Leaf    wire.OriginID
	LeafSeq uint64
	Ops     []Op   // Change: the entry's operations of the feed's table, in entry order
	Reason  string // Reread: ReasonSkipped, ReasonCopy or ReasonRepair
	// Position is the feed's position after this event: resuming from it gives the events
	// after this one.
	Position Position
}

// Op is one operation of a Change event.
type Op struct {
	Kind  wire.OpKind
	Key   []byte
	Value []byte // a put's value (nil for a delete)
	// Won is whether the store's current version of the key, when the event was read, is
	// this entry's version (token, HLC and origin: its conflict identity, the leaf's for a
	// hub's format-3 entry, docs/design.md §27.1): false when a newer version overwrote
	// it, or this entry lost last-writer-wins when it was applied.
	Won bool
}

// Inputs is what the reader is told beside the store: what the replica knows and the logs
// do not (replica.Replica.FeedInputs). Counters only ever rise while a replica runs; the
// reader compares them with the values it last saw, so it needs no history.
type Inputs struct {
	// Repaired counts the records of the feed's table anti-entropy wrote around the log.
	Repaired uint64
	// Copied counts the records of the feed's table a base copy or a table's fill wrote or
	// deleted around the log.
	Copied uint64
	// CopiesEnded counts the base copies the node ended (each may raise every floor).
	CopiesEnded uint64
	// Own and Synced, when Own is set, hold back the node's own entries above Synced: a
	// node that serves peers only what is durable against power loss (the replica's
	// HoldUnsynced) serves a feed no more, since a power loss may give such a seq to
	// another write, and a consumer given the first would never be given the second.
	Own    wire.OriginID
	Synced uint64
	// Mutations are the test-only breaks of the reader (internal/mutate): the replica's,
	// the zero Set in production.
	Mutations mutate.Set
}

// BehindError is Start's refusal of a position ahead of the node's applied positions on
// some origin: the node has not applied what the consumer was given elsewhere. The caller
// may wait and start again.
type BehindError struct {
	Origin wire.OriginID // the first origin, by id, the position is ahead on
	Seq    uint64        // the position's seq of it
	Have   Position      // the node's applied positions
}

func (e *BehindError) Error() string {
	return fmt.Sprintf("feed: the position is at seq %d of origin %s, this node has applied %d", e.Seq, e.Origin, e.Have.Seq(e.Origin))
}

// PurgedError is a position below an origin's floor: the node no longer holds the entries
// after it (retention, or a copy the reader was not reading across). The consumer reads
// the table again, or goes to a node that holds them.
type PurgedError struct {
	Origin wire.OriginID
	Floor  uint64 // the origin's floor: its lowest entry held is Floor+1
	Seq    uint64 // the position's seq of the origin
}

func (e *PurgedError) Error() string {
	return fmt.Sprintf("feed: origin %s is purged up to seq %d, the position is at %d", e.Origin, e.Floor, e.Seq)
}

// Reader reads one table's feed from a node's store. It holds its position and the inputs
// it last saw, nothing of the store: every call is given the store, and reads it as it is.
// A Reader is not safe for concurrent use; a shell keeps it on the loop that owns the store.
type Reader struct {
	table  []byte
	pos    Position
	in     Inputs
	based  bool // in holds the inputs the reader started with
	caught bool
	failed error // a *PurgedError, the answer of every later Next
}

// Start makes a reader of table on the store after since: at the store's applied
// positions (SinceNow), at every origin's floor (SinceOldest), or after a position. It
// refuses a position ahead of the store's vector on some origin (*BehindError, judged
// first) and one below some origin's floor (*PurgedError). The first Next's inputs are the
// ones the reader starts with (no reread for what was written before): a shell calls it in
// the loop step it started the reader in, or uses StartWith, which a node that holds back
// its unsynced writes (Inputs.Own) must use.
func Start(st store.Store, table []byte, since Since) (*Reader, error) {
	return start(st, table, since, nil)
}

// StartWith is Start with the inputs the reader starts with given: a rise of them after
// in, not before, makes a reread; and SinceNow starts the node's own origin at in.Synced
// when in.Own is set (a write a power loss may take back is not "now" yet).
func StartWith(st store.Store, table []byte, since Since, in Inputs) (*Reader, error) {
	r, err := start(st, table, since, &in)
	if err != nil {
		return nil, err
	}
	r.in, r.based = in, true
	if in.Mutations.FeedRedeliverOnResume && since.Kind == SincePosition {
		for _, e := range r.Position() {
			r.pos = r.pos.With(e.Origin, e.Seq-min(e.Seq, 3))
		}
	}
	return r, nil
}

func start(st store.Store, table []byte, since Since, in *Inputs) (*Reader, error) {
	vec, err := st.Vector()
	if err != nil {
		return nil, err
	}
	logs, err := st.Logs()
	if err != nil {
		return nil, err
	}
	entries := vec.Entries()
	have := make(Position, 0, len(entries))
	for _, e := range entries {
		if e.Seq > 0 {
			have = append(have, PositionEntry{Origin: e.Origin, Seq: e.Seq})
		}
	}
	r := &Reader{table: bytes.Clone(table)}
	switch since.Kind {
	case SinceNow:
		r.pos = have
		if in != nil && !in.Own.IsZero() && in.Synced < have.Seq(in.Own) {
			r.pos = have.With(in.Own, in.Synced)
		}
	case SinceOldest:
		for _, e := range entries {
			if f := logs[e.Origin].Floor.Seq; f > 0 {
				r.pos = append(r.pos, PositionEntry{Origin: e.Origin, Seq: f})
			}
		}
	case SincePosition:
		for _, e := range since.Position {
			if e.Seq > vec.Get(e.Origin).Seq {
				return nil, &BehindError{Origin: e.Origin, Seq: e.Seq, Have: have}
			}
		}
		for _, e := range entries {
			if s, f := since.Position.Seq(e.Origin), logs[e.Origin].Floor.Seq; s < f {
				return nil, &PurgedError{Origin: e.Origin, Floor: f, Seq: s}
			}
		}
		for _, e := range since.Position {
			if e.Seq > 0 {
				r.pos = append(r.pos, e)
			}
		}
	default:
		return nil, errorf("since of kind %d", since.Kind)
	}
	return r, nil
}

// Position is the reader's position: every event Next returned and every entry it passed
// without one. A shell sends it when the position moved with no event (a heartbeat's id).
func (r *Reader) Position() Position { return slices.Clone(r.pos) }

// set moves the reader's position of origin o to seq (above 0) in place: the reader's
// position is its own, and events carry copies of it.
func (r *Reader) set(o wire.OriginID, seq uint64) {
	i, ok := slices.BinarySearchFunc(r.pos, o, func(e PositionEntry, o wire.OriginID) int { return bytes.Compare(e.Origin[:], o[:]) })
	if ok {
		r.pos[i].Seq = seq
		return
	}
	r.pos = slices.Insert(r.pos, i, PositionEntry{Origin: o, Seq: seq})
}

// Table is the feed's table.
func (r *Reader) Table() []byte { return r.table }

// CaughtUp reports whether the last Next reached the store's applied positions: a shell
// calls Next again only when the store moved, or at once when it is false.
func (r *Reader) CaughtUp() bool { return r.caught }

// head is the next entry of one origin the reader has not passed.
type head struct {
	origin wire.OriginID
	seq    uint64 // the entry's seq, or the run's last
	hlc    wire.HLC
	raw    []byte              // an entry's encoding
	run    *store.SkippedError // or a run held as a skip
}

// Next reads the entries after the reader's position up to the store's applied positions,
// in order (per origin by seq; across origins by the next entry's HLC, then origin id),
// and returns the events of at most maxEvents entries and about maxBytes of their
// encodings (at least one entry is read whenever one is there; bounds below 1 count as 1).
// Before the entries come the rereads in's rise calls for: one for records written around
// the log (reason copy when a copy or fill wrote some since the last Next, else repair).
// A log purged past the reader is a reread (reason copy) and a jump to the floors when a
// copy ended since the last Next, else a *PurgedError, returned with the events read
// before it and by every later call. Any other error is the store's.
func (r *Reader) Next(st store.Store, in Inputs, maxEvents, maxBytes int) ([]Event, error) {
	if r.failed != nil {
		return nil, r.failed
	}
	maxEvents, maxBytes = max(maxEvents, 1), max(maxBytes, 1)
	var events []Event
	copyEnded := r.based && in.CopiesEnded != r.in.CopiesEnded
	switch {
	case !r.based:
	case in.Copied != r.in.Copied:
		events = append(events, Event{Kind: Reread, Reason: ReasonCopy, Position: r.Position()})
	case in.Repaired != r.in.Repaired:
		events = append(events, Event{Kind: Reread, Reason: ReasonRepair, Position: r.Position()})
	}
	r.in, r.based = in, true
	r.caught = false

	vec, err := st.Vector()
	if err != nil {
		return events, err
	}
	logs, err := st.Logs()
	if err != nil {
		return events, err
	}
	entries := vec.Entries()
	// A log purged past the position: across a copy, the reader jumps to the floors with
	// one reread; else the feed cannot go on here.
	jumped := false
	for _, e := range entries {
		s, f := r.pos.Seq(e.Origin), logs[e.Origin].Floor.Seq
		if s >= f {
			continue
		}
		if !copyEnded {
			r.failed = &PurgedError{Origin: e.Origin, Floor: f, Seq: s}
			return events, r.failed
		}
		r.set(e.Origin, f)
		jumped = true
	}
	if jumped && !slices.ContainsFunc(events, func(ev Event) bool { return ev.Reason == ReasonCopy }) {
		events = append(events, Event{Kind: Reread, Reason: ReasonCopy, Position: r.Position()})
	} else if jumped {
		for i := range events {
			events[i].Position = r.Position()
		}
	}

	var heads []head
	for i, e := range entries {
		if e.Origin == in.Own && !in.Own.IsZero() {
			e.Seq = min(e.Seq, in.Synced)
			entries[i] = e
		}
		if e.Seq <= r.pos.Seq(e.Origin) {
			continue
		}
		h, err := r.read(st, e.Origin, r.pos.Seq(e.Origin)+1, logs)
		if err != nil {
			return events, err
		}
		heads = append(heads, h)
	}
	var names map[wire.OriginID]string
	read, bytesRead := 0, 0
	for len(heads) > 0 && len(events) < maxEvents {
		i := 0
		for j := 1; j < len(heads); j++ {
			if heads[j].hlc < heads[i].hlc || heads[j].hlc == heads[i].hlc && bytes.Compare(heads[j].origin[:], heads[i].origin[:]) < 0 {
				i = j
			}
		}
		h := heads[i]
		if read > 0 && bytesRead+len(h.raw) > maxBytes {
			break
		}
		read++
		bytesRead += len(h.raw)
		r.set(h.origin, h.seq)
		if h.run != nil {
			if slices.ContainsFunc(h.run.Tables, func(t []byte) bool { return bytes.Equal(t, r.table) }) && !in.Mutations.FeedPassNamedRun {
				events = append(events, Event{Kind: Reread, Reason: ReasonSkipped, Origin: h.origin, Seq: h.seq, HLC: h.hlc,
					Name: r.name(st, &names, h.origin), Position: r.Position()})
			}
		} else if ev, ok, err := r.change(st, h); err != nil {
			return events, err
		} else if ok && in.Mutations.FeedSkipEntry && ev.Seq%5 == 0 {
			// test-only: passed with no event
		} else if ok {
			ev.Name = r.name(st, &names, h.origin)
			events = append(events, ev)
		}
		if h.seq < limit(entries, h.origin) {
			if heads[i], err = r.read(st, h.origin, h.seq+1, logs); err != nil {
				return events, err
			}
		} else {
			heads = slices.Delete(heads, i, i+1)
		}
	}
	r.caught = len(heads) == 0
	return events, nil
}

// limit is the last seq of origin the reader may read: its entry of entries, sorted by
// origin.
func limit(entries []vector.Entry, o wire.OriginID) uint64 {
	i, ok := slices.BinarySearchFunc(entries, o, func(e vector.Entry, o wire.OriginID) int { return bytes.Compare(e.Origin[:], o[:]) })
	if !ok {
		return 0
	}
	return entries[i].Seq
}

// read is the entry of origin at seq: the entry, or the run that holds it.
func (r *Reader) read(st store.Store, origin wire.OriginID, seq uint64, logs map[wire.OriginID]store.Log) (head, error) {
	raw, err := st.Entry(origin, seq)
	var run *store.SkippedError
	switch {
	case err == nil:
		v, err := wire.ParseTxn(raw)
		if err != nil {
			return head{}, fmt.Errorf("feed: origin %s seq %d: %w", origin, seq, err)
		}
		return head{origin: origin, seq: seq, hlc: v.HLC, raw: raw}, nil
	case errors.As(err, &run):
		return head{origin: origin, seq: max(run.To, seq), hlc: run.HLC, run: run}, nil
	case errors.Is(err, store.ErrPurged):
		// Start and Next check the floors first: a store that purges under a read is
		// not one this reader can go on with.
		r.failed = &PurgedError{Origin: origin, Floor: logs[origin].Floor.Seq, Seq: seq - 1}
		return head{}, r.failed
	}
	return head{}, fmt.Errorf("feed: origin %s seq %d: %w", origin, seq, err)
}

// change is the Change event of entry h, ok false when it has no operation of the table.
func (r *Reader) change(st store.Store, h head) (Event, bool, error) {
	v, err := wire.ParseTxn(h.raw)
	if err != nil {
		return Event{}, false, err
	}
	var ops []Op
	chlc, corigin := v.Conflict()
	it := v.Ops()
	for {
		op, more := it.Next()
		if !more {
			break
		}
		if !bytes.Equal(op.Table, r.table) {
			continue
		}
		o := Op{Kind: op.Kind, Key: bytes.Clone(op.Key)}
		if op.Kind == wire.OpPut {
			o.Value = bytes.Clone(op.Value)
			if o.Value == nil {
				o.Value = []byte{}
			}
		}
		rec, has, err := st.Get(r.table, op.Key)
		if err != nil && !errors.Is(err, store.ErrRecordDamaged) {
			return Event{}, false, err
		}
		o.Won = err == nil && has && rec.Token == v.Token && rec.HLC == chlc && rec.Origin == corigin
		ops = append(ops, o)
	}
	if len(ops) == 0 {
		return Event{}, false, nil
	}
	ev := Event{Kind: Change, Origin: v.Origin, Seq: v.Seq, HLC: v.HLC, Token: v.Token, Ops: ops, Position: r.Position()}
	if v.Format() == wire.TxnFormat3 {
		ev.Leaf, ev.LeafSeq = v.Leaf.Origin, v.Leaf.Seq
	}
	return ev, true, nil
}

func (r *Reader) name(st store.Store, names *map[wire.OriginID]string, o wire.OriginID) string {
	if *names == nil {
		n, err := st.Names()
		if err != nil || n == nil {
			n = map[wire.OriginID]string{}
		}
		*names = n
	}
	return (*names)[o]
}
