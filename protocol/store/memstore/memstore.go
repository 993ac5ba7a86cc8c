package memstore

import (
	"bytes"
	"cmp"
	"maps"
	"slices"
	"strings"

	"plait/protocol/store"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// logKey names one log entry.
type logKey struct {
	origin wire.OriginID
	seq    uint64
}

// Store is an in-memory store.Store. Every byte slice it holds is its own copy and is
// never modified once stored (a later write replaces it), so copies of the Store may share
// them.
type Store struct {
	id       store.Identity
	cursor   vector.Vector
	log      map[logKey][]byte
	runs     map[wire.OriginID][]*store.SkippedError // each origin's runs held as skips, by seq; never modified once stored
	logs     map[wire.OriginID]store.Log             // floor, below and bytes of each origin's log
	arrivals [][]byte                                // arrivals[pos-1] is the encoding at arrival position pos (nil once purged)
	afloor   uint64                                  // the arrival floor
	tables   map[string][]store.Record               // per table, sorted by key
	names    map[wire.OriginID]string
	peers    map[wire.OriginID]uint64
	holds    map[holdKey]store.Hold
	hlc      wire.HLC          // the highest record HLC written
	token    wire.Token        // the highest record token written
	copying  *store.CopyState  // the copy being taken (nil: none)
	control  map[string][]byte // control documents, by key
	leaves   map[wire.OriginID]store.LeafMark
}

type holdKey struct {
	peer   string
	origin wire.OriginID
}

var _ store.Store = (*Store)(nil)

// New returns an empty store with the given identity.
func New(id store.Identity) *Store {
	return &Store{
		id:      id,
		log:     map[logKey][]byte{},
		runs:    map[wire.OriginID][]*store.SkippedError{},
		logs:    map[wire.OriginID]store.Log{},
		tables:  map[string][]store.Record{},
		names:   map[wire.OriginID]string{},
		peers:   map[wire.OriginID]uint64{},
		holds:   map[holdKey]store.Hold{},
		control: map[string][]byte{},
		leaves:  map[wire.OriginID]store.LeafMark{},
	}
}

// Clone returns an independent copy: writes to either store do not reach the other.
func (s *Store) Clone() *Store {
	c := &Store{
		id:       s.id,
		cursor:   s.cursor.Clone(),
		log:      make(map[logKey][]byte, len(s.log)),
		runs:     make(map[wire.OriginID][]*store.SkippedError, len(s.runs)),
		logs:     make(map[wire.OriginID]store.Log, len(s.logs)),
		arrivals: slices.Clone(s.arrivals),
		afloor:   s.afloor,
		holds:    make(map[holdKey]store.Hold, len(s.holds)),
		tables:   make(map[string][]store.Record, len(s.tables)),
		names:    make(map[wire.OriginID]string, len(s.names)),
		peers:    make(map[wire.OriginID]uint64, len(s.peers)),
		hlc:      s.hlc,
		token:    s.token,
		copying:  cloneCopyState(s.copying),
		control:  make(map[string][]byte, len(s.control)),
		leaves:   maps.Clone(s.leaves),
	}
	for k, v := range s.control {
		c.control[k] = v // never modified once stored
	}
	for k, v := range s.log {
		c.log[k] = v
	}
	for k, v := range s.runs {
		c.runs[k] = slices.Clone(v)
	}
	for k, v := range s.logs {
		c.logs[k] = v
	}
	for k, v := range s.holds {
		c.holds[k] = v
	}
	for k, v := range s.tables {
		c.tables[k] = slices.Clone(v)
	}
	for k, v := range s.names {
		c.names[k] = v
	}
	for k, v := range s.peers {
		c.peers[k] = v
	}
	return c
}

// Identity returns the identity given to New.
func (s *Store) Identity() (store.Identity, error) { return s.id, nil }

// Vector returns a copy of the cursor vector.
func (s *Store) Vector() (vector.Vector, error) { return s.cursor.Clone(), nil }

// Cursor returns one origin's entry of the cursor vector, without copying the vector (the
// simulator checks it after every apply).
func (s *Store) Cursor(origin wire.OriginID) vector.Entry { return s.cursor.Get(origin) }

// Entry returns a copy of the transaction encoding at (origin, seq), store.ErrPurged at
// or below the origin's floor, a *store.SkippedError inside a run held as a skip, or
// store.ErrNotFound.
func (s *Store) Entry(origin wire.OriginID, seq uint64) ([]byte, error) {
	// The rows first, the floor after: a row a purge or a copy's end failed to drop shows.
	b, ok := s.log[logKey{origin, seq}]
	if !ok {
		if r := s.run(origin, seq); r != nil {
			c := *r
			c.Tables = cloneTables(r.Tables)
			return nil, &c
		}
		if seq > 0 && seq <= s.logs[origin].Floor.Seq {
			return nil, store.ErrPurged
		}
		return nil, store.ErrNotFound
	}
	return bytes.Clone(b), nil
}

// run is the run of origin that holds seq, nil when none does.
func (s *Store) run(origin wire.OriginID, seq uint64) *store.SkippedError {
	runs := s.runs[origin]
	i, _ := slices.BinarySearchFunc(runs, seq, func(r *store.SkippedError, seq uint64) int { return cmp.Compare(r.To, seq) })
	if i < len(runs) && runs[i].From <= seq {
		return runs[i]
	}
	return nil
}

// dropRows deletes origin's log entries and runs from seq from to seq to.
func (s *Store) dropRows(origin wire.OriginID, from, to uint64) {
	for seq := from; seq <= to; seq++ {
		if r := s.run(origin, seq); r != nil {
			seq = r.To // a run's seqs hold no entry
			continue
		}
		delete(s.log, logKey{origin, seq})
	}
	s.runs[origin] = slices.DeleteFunc(slices.Clone(s.runs[origin]), func(r *store.SkippedError) bool { return r.From >= from && r.To <= to })
	if len(s.runs[origin]) == 0 {
		delete(s.runs, origin)
	}
}

func cloneTables(ts [][]byte) [][]byte {
	var out [][]byte
	for _, t := range ts {
		out = append(out, bytes.Clone(t))
	}
	return out
}

// Arrivals returns up to limit entries after position after, in arrival order (none when
// limit is not positive); store.ErrPurged when after is below the arrival floor.
func (s *Store) Arrivals(after uint64, limit int) ([]store.Arrival, error) {
	if after < s.afloor {
		return nil, store.ErrPurged
	}
	var out []store.Arrival
	for i := after; i < uint64(len(s.arrivals)) && len(out) < limit; i++ {
		out = append(out, store.Arrival{Pos: i + 1, Txn: bytes.Clone(s.arrivals[i])})
	}
	return out, nil
}

// LastArrival returns the highest arrival position, 0 when the log is empty.
func (s *Store) LastArrival() (uint64, error) { return uint64(len(s.arrivals)), nil }

// RecordHLC is the highest HLC of a record version Apply wrote.
func (s *Store) RecordHLC() (wire.HLC, error) { return s.hlc, nil }

// RecordToken is the highest token of a record version written.
func (s *Store) RecordToken() (wire.Token, error) { return s.token, nil }

// raiseToken raises RecordToken to r's token.
func (s *Store) raiseToken(r *store.Record) {
	if r.Token.Compare(s.token) > 0 {
		s.token = r.Token
	}
}

// Get returns a copy of the record's current version, tombstones included.
func (s *Store) Get(table, key []byte) (store.Record, bool, error) {
	recs := s.tables[string(table)]
	i, ok := search(recs, key)
	if !ok {
		return store.Record{}, false, nil
	}
	return cloneRecord(recs[i]), true, nil
}

// Scan calls fn with a copy of each record of table whose key is after after, in key
// order, tombstones included, until fn returns false.
func (s *Store) Scan(table []byte, after []byte, fn func(store.Record) bool) error {
	recs := s.tables[string(table)]
	i := 0
	if after != nil {
		j, found := search(recs, after)
		if found {
			j++
		}
		i = j
	}
	for ; i < len(recs); i++ {
		if !fn(cloneRecord(recs[i])) {
			break
		}
	}
	return nil
}

// Tables returns the names of the tables that hold a record, sorted.
func (s *Store) Tables() ([][]byte, error) {
	out := make([][]byte, 0, len(s.tables))
	for name := range s.tables {
		out = append(out, []byte(name))
	}
	slices.SortFunc(out, bytes.Compare)
	return out, nil
}

// Names returns a copy of the origin names.
func (s *Store) Names() (map[wire.OriginID]string, error) {
	out := make(map[wire.OriginID]string, len(s.names))
	for k, v := range s.names {
		out[k] = v
	}
	return out, nil
}

// PeerCursor returns the version-1 cursor of a peer, 0 when none.
func (s *Store) PeerCursor(peer wire.OriginID) (uint64, error) { return s.peers[peer], nil }

// SetPeerCursor sets a peer's cursor, lower or higher.
func (s *Store) SetPeerCursor(peer wire.OriginID, pos uint64) error {
	s.peers[peer] = pos
	return nil
}

func (s *Store) raisePeer(peer wire.OriginID, pos uint64) {
	if pos > s.peers[peer] {
		s.peers[peer] = pos
	}
}

// Apply checks b completely, then writes all of it. It refuses, writing nothing:
//   - a zero b.Origin (plain error);
//   - b.Seq other than the origin's cursor + 1 (ErrNotNext);
//   - b.Hash other than SHA-256 of b.Txn, a b.Txn that wire.ParseTxn rejects, or one whose
//     origin or seq differs from b.Origin, b.Seq (plain errors);
//   - a b.Txn whose previous hash is not the cursor's hash (ErrNotNext).
//
// The checks run in this order. Apply copies everything it keeps from b. A batch with a
// Skip is checked as a run (store.CheckBatch) and kept as one (store.Store's Apply).
func (s *Store) Apply(b *store.Batch) (uint64, error) {
	if err := s.check(b); err != nil {
		return 0, err
	}
	if b.Skip != nil {
		run := store.SkippedOf(b)
		runs := slices.Clone(s.runs[b.Origin])
		l := s.logs[b.Origin]
		if n := len(runs); n > 0 {
			if ext, ok := store.Extend(runs[n-1], run); ok {
				l.Bytes -= uint64(len(store.AppendSkipRow(nil, runs[n-1])))
				runs, run = runs[:n-1], ext
			}
		}
		s.runs[b.Origin] = append(runs, run)
		l.Bytes += uint64(len(store.AppendSkipRow(nil, run)))
		s.logs[b.Origin] = l
		s.cursor.Advance(vector.Entry{Origin: b.Origin, Seq: b.Seq, Hash: b.Hash})
		if b.Name != "" {
			s.names[b.Origin] = b.Name
		}
		return 0, nil
	}
	txn := bytes.Clone(b.Txn)
	s.arrivals = append(s.arrivals, txn)
	pos := uint64(len(s.arrivals))
	s.log[logKey{b.Origin, b.Seq}] = txn
	l := s.logs[b.Origin]
	l.Bytes += uint64(len(txn))
	s.logs[b.Origin] = l
	s.cursor.Advance(vector.Entry{Origin: b.Origin, Seq: b.Seq, Hash: b.Hash})
	for _, r := range b.Records {
		s.put(cloneRecord(r))
		s.hlc = max(s.hlc, r.HLC)
		s.raiseToken(&r)
	}
	if b.Name != "" {
		s.names[b.Origin] = b.Name
	}
	if !b.PeerOrigin.IsZero() {
		s.raisePeer(b.PeerOrigin, b.PeerCursor)
	}
	if b.Leaf != nil && b.Leaf.Seq > s.leaves[b.Leaf.Leaf].Seq {
		s.leaves[b.Leaf.Leaf] = *b.Leaf
	}
	return pos, nil
}

// LeafMark returns the mark of one leaf.
func (s *Store) LeafMark(leaf wire.OriginID) (store.LeafMark, bool, error) {
	m, ok := s.leaves[leaf]
	return m, ok, nil
}

// LeafMarks calls fn for every leaf mark, by leaf origin.
func (s *Store) LeafMarks(fn func(store.LeafMark) bool) error {
	for _, o := range slices.SortedFunc(maps.Keys(s.leaves), func(a, b wire.OriginID) int { return bytes.Compare(a[:], b[:]) }) {
		if !fn(s.leaves[o]) {
			break
		}
	}
	return nil
}

// PutLeafMark raises one leaf's mark.
func (s *Store) PutLeafMark(m store.LeafMark) error {
	if err := store.CheckLeafMark(&m); err != nil {
		return err
	}
	if m.Seq > s.leaves[m.Leaf].Seq {
		s.leaves[m.Leaf] = m
	}
	return nil
}

// DropLeafMarks forgets the marks of these leaves.
func (s *Store) DropLeafMarks(leaves []wire.OriginID) error {
	for _, o := range leaves {
		delete(s.leaves, o)
	}
	return nil
}

func (s *Store) check(b *store.Batch) error {
	return store.CheckBatch(b, s.cursor.Get(b.Origin))
}

// put inserts or replaces a record the store owns.
func (s *Store) put(r store.Record) {
	recs := s.tables[string(r.Table)]
	i, found := search(recs, r.Key)
	if found {
		recs[i] = r
	} else {
		recs = slices.Insert(recs, i, r)
	}
	s.tables[string(r.Table)] = recs
}

// search finds key in recs, sorted by key: its index, or where it would be inserted.
func search(recs []store.Record, key []byte) (int, bool) {
	return slices.BinarySearchFunc(recs, key, func(r store.Record, k []byte) int { return bytes.Compare(r.Key, k) })
}

func cloneRecord(r store.Record) store.Record {
	r.Table = bytes.Clone(r.Table)
	r.Key = bytes.Clone(r.Key)
	r.Value = bytes.Clone(r.Value)
	return r
}

// Sync does nothing: there is no power to lose.
func (s *Store) Sync() error { return nil }

// Logs returns each origin's log: floor, below and bytes.
func (s *Store) Logs() (map[wire.OriginID]store.Log, error) {
	out := make(map[wire.OriginID]store.Log, len(s.logs))
	for o, l := range s.logs {
		out[o] = l
	}
	return out, nil
}

// ArrivalFloor is the highest arrival position purged.
func (s *Store) ArrivalFloor() (uint64, error) { return s.afloor, nil }

// Purge checks p with store.CheckPurge, then writes all of it.
func (s *Store) Purge(p *store.Purge) error {
	plan, err := store.CheckPurge(p, store.PurgeView{Logs: s.logs, Cursors: s.cursor, ArrivalFloor: s.afloor,
		LastArrival: uint64(len(s.arrivals)), Entry: s.Entry, Arrivals: s.Arrivals})
	if err != nil {
		return err
	}
	for _, pl := range plan.Logs {
		s.dropRows(pl.Origin, pl.From, pl.To)
		s.logs[pl.Origin] = pl.Log
	}
	for i := s.afloor; i < plan.ArrivalFloor; i++ {
		s.arrivals[i] = nil
	}
	s.afloor = plan.ArrivalFloor
	return nil
}

// Holds lists the holds, by peer and then origin.
func (s *Store) Holds() ([]store.Hold, error) {
	out := make([]store.Hold, 0, len(s.holds))
	for _, h := range s.holds {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b store.Hold) int {
		if a.Peer != b.Peer {
			return strings.Compare(a.Peer, b.Peer)
		}
		return bytes.Compare(a.Origin[:], b.Origin[:])
	})
	return out, nil
}

// PutHolds adds or replaces holds.
func (s *Store) PutHolds(hs []store.Hold) error {
	for _, h := range hs {
		s.holds[holdKey{h.Peer, h.Origin}] = h
	}
	return nil
}

// DeleteHolds forgets every hold of a peer.
func (s *Store) DeleteHolds(peer string) error {
	for k := range s.holds {
		if k.peer == peer {
			delete(s.holds, k)
		}
	}
	return nil
}

// DeleteHold forgets one hold of a peer.
func (s *Store) DeleteHold(peer string, origin wire.OriginID) error {
	delete(s.holds, holdKey{peer, origin})
	return nil
}

// DropTombstones deletes each listed tombstone that is still its record's version.
func (s *Store) DropTombstones(ts []store.Record) error {
	for _, t := range ts {
		recs := s.tables[string(t.Table)]
		if i, ok := search(recs, t.Key); ok && recs[i].Deleted && recs[i].Version() == t.Version() {
			s.remove(t.Table, t.Key)
		}
	}
	return nil
}

// DropTable deletes every record of table (store.Store).
func (s *Store) DropTable(table []byte) (records, bytes uint64, err error) {
	for _, r := range s.tables[string(table)] {
		records++
		bytes += uint64(len(r.Key) + len(r.Value))
	}
	delete(s.tables, string(table))
	return records, bytes, nil
}

// remove deletes a record, and its table when it was the last.
func (s *Store) remove(table, key []byte) {
	recs := s.tables[string(table)]
	if i, ok := search(recs, key); ok {
		recs = slices.Delete(recs, i, i+1)
		if len(recs) == 0 {
			delete(s.tables, string(table))
		} else {
			s.tables[string(table)] = recs
		}
	}
}

// snapshot is a copy of the tables: records are never modified once stored, so sharing
// them with the store is safe; the per-table slices are cloned.
type snapshot struct {
	tables map[string][]store.Record
	names  []string
}

// Snapshot returns a view of the records as they are now.
func (s *Store) Snapshot() (store.Snapshot, error) {
	sn := &snapshot{tables: make(map[string][]store.Record, len(s.tables))}
	for t, recs := range s.tables {
		sn.tables[t] = slices.Clone(recs)
		sn.names = append(sn.names, t)
	}
	slices.Sort(sn.names)
	return sn, nil
}

// Records calls fn for the records after (table, key), in (table, key) order.
func (sn *snapshot) Records(table, key []byte, fn func(store.Record) bool) error {
	i, _ := slices.BinarySearch(sn.names, string(table))
	for ; i < len(sn.names); i++ {
		recs := sn.tables[sn.names[i]]
		j := 0
		if table != nil && sn.names[i] == string(table) {
			j, _ = search(recs, key)
			if j < len(recs) && bytes.Equal(recs[j].Key, key) {
				j++
			}
		}
		for ; j < len(recs); j++ {
			if !fn(cloneRecord(recs[j])) {
				return nil
			}
		}
	}
	return nil
}

// Size counts the tables, records and their bytes exactly.
func (sn *snapshot) Size() (tables, records, size uint64, err error) {
	for _, recs := range sn.tables {
		for _, r := range recs {
			records++
			size += uint64(len(r.Key) + len(r.Value) + 24)
		}
	}
	return uint64(len(sn.tables)), records, size, nil
}

// Release does nothing: the view is garbage once dropped.
func (sn *snapshot) Release() {}

// CopyState returns a copy of the copy being taken, nil when none.
func (s *Store) CopyState() (*store.CopyState, error) { return cloneCopyState(s.copying), nil }

func cloneCopyState(c *store.CopyState) *store.CopyState {
	if c == nil {
		return nil
	}
	d := *c
	d.Table, d.Key, d.Vector = bytes.Clone(c.Table), bytes.Clone(c.Key), slices.Clone(c.Vector)
	return &d
}

// Repair writes record versions as they are (anti-entropy).
func (s *Store) Repair(recs []store.Record) error {
	for _, r := range recs {
		s.put(cloneRecord(r))
		s.hlc = max(s.hlc, r.HLC)
		s.raiseToken(&r)
	}
	return nil
}

// Corrupt writes a record version, or deletes the record when rec is nil, around
// everything the replica decides: no log entry, and RecordHLC and RecordToken do not move. Tests use it
// for a record lost or altered in one node's store (a bug, a restored file, a bad disk).
func (s *Store) Corrupt(table, key []byte, rec *store.Record) {
	if rec == nil {
		s.remove(table, key)
		return
	}
	c := cloneRecord(*rec)
	c.Table, c.Key = bytes.Clone(table), bytes.Clone(key)
	s.put(c)
}

// ApplyCopy writes one copied chunk: its records, its deletions and the copy state.
func (s *Store) ApplyCopy(b *store.CopyBatch) error {
	for _, r := range b.Deletes {
		s.remove(r.Table, r.Key)
	}
	for _, r := range b.Records {
		s.put(cloneRecord(r))
		s.hlc = max(s.hlc, r.HLC)
		s.raiseToken(&r)
	}
	st := b.State
	s.copying = cloneCopyState(&st)
	return nil
}

// EndCopy checks e with store.CheckCopyEnd, then writes all of it.
func (s *Store) EndCopy(e *store.CopyEnd) error {
	plan, err := store.CheckCopyEnd(e, store.CopyEndView{Identity: s.id.Origin, Logs: s.logs, Cursors: s.cursor,
		ArrivalFloor: s.afloor, LastArrival: uint64(len(s.arrivals))})
	if err != nil {
		return err
	}
	s.logs = store.LogsAfterCopy(plan, s.logs, s.cursor, s.afloor)
	for _, rl := range plan.Logs {
		s.dropRows(rl.Origin, rl.From, rl.To)
		s.cursor.Advance(rl.Cursor)
	}
	for _, l := range e.Logs {
		if l.Name != "" {
			s.names[l.Origin] = l.Name
		}
	}
	for i := s.afloor; i < plan.ArrivalFloor; i++ {
		s.arrivals[i] = nil
	}
	s.afloor = plan.ArrivalFloor
	for _, r := range e.Deletes {
		s.remove(r.Table, r.Key)
	}
	s.copying = nil
	return nil
}

// Reseed checks rs with store.CheckReseed, then writes all of it.
func (s *Store) Reseed(rs *store.Reseed) error {
	plan, err := store.CheckReseed(rs, s.reseedView())
	if err != nil {
		return err
	}
	s.dropRows(rs.Old, plan.From, plan.To)
	var cursor vector.Vector
	for _, e := range s.cursor.Entries() {
		if e.Origin != rs.Old {
			cursor.Advance(e)
		}
	}
	cursor.Advance(plan.OldCursor)
	s.cursor = cursor
	for i := s.afloor; i < plan.ArrivalFloor; i++ {
		s.arrivals[i] = nil
	}
	s.afloor = plan.ArrivalFloor
	s.logs = plan.Logs
	s.id = rs.Identity
	s.names[rs.Identity.Origin] = rs.Identity.Name
	for i := range rs.Entries {
		b := rs.Entries[i]
		txn := bytes.Clone(b.Txn)
		s.arrivals = append(s.arrivals, txn)
		s.log[logKey{b.Origin, b.Seq}] = txn
		s.cursor.Advance(vector.Entry{Origin: b.Origin, Seq: b.Seq, Hash: b.Hash})
		for _, r := range b.Records {
			s.put(cloneRecord(r))
			s.raiseToken(&r)
		}
	}
	return nil
}

func (s *Store) reseedView() store.ReseedView {
	return store.ReseedView{Identity: s.id, Cursors: s.cursor, Logs: s.logs, Copying: s.copying != nil,
		ArrivalFloor: s.afloor, LastArrival: uint64(len(s.arrivals)), Entry: s.Entry, Get: s.Get}
}

// Control returns a copy of the control document under key, nil when there is none.
func (s *Store) Control(key string) ([]byte, error) {
	if err := store.CheckControlKey(key); err != nil {
		return nil, err
	}
	v, ok := s.control[key]
	if !ok {
		return nil, nil
	}
	return append([]byte{}, v...), nil // not nil when empty: an empty document is one
}

// PutControl keeps a copy of value under key, after store.CheckControl.
func (s *Store) PutControl(key string, value []byte) error {
	if err := store.CheckControl(key, value); err != nil {
		return err
	}
	s.control[key] = append([]byte{}, value...)
	return nil
}
