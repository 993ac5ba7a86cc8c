package rocksstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linxGnu/grocksdb"

	"plait/protocol/store"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Key prefixes.
const (
	pIdentity = 'i'
	pCursor   = 'c'
	pLog      = 'l'
	pArrival  = 'a'
	pRecord   = 'r'
	pTable    = 't'
	pName     = 'n'
	pPeer     = 'p'
	pDial     = 'd'
	pLink     = 'e'
	pHLC      = 'h'
	pToken    = 'o'
	pFloor    = 'f'
	pAFloor   = 'g'
	pHold     = 'k'
	pCopy     = 'b'
	pControl  = 's'
	pLeaf     = 'm'
)

// Options configure a store.
type Options struct {
	// SyncEveryApply fsyncs every Apply (--sync all); otherwise an Apply survives a crash of
	// the process, and Sync makes everything so far survive a power loss.
	SyncEveryApply bool
	// BeforeSync, when set, is called at the start of every Sync, on Sync's goroutine, and,
	// with SyncEveryApply, before the synced write of every Apply, on Apply's: a test's way
	// to hold an fsync back and see what the node answers or acknowledges meanwhile. Nil in
	// every running node.
	BeforeSync func()
	// BackgroundErrors, when set, stands for RocksDB's count of background errors in
	// BackgroundError: a test's way to make a flush or compaction fail. Nil in every
	// running node.
	BackgroundErrors func() uint64
}

// Store is a store.Store in a RocksDB directory. Like the replica it serves, it is used
// from one goroutine.
type Store struct {
	db       *grocksdb.DB
	ro       *grocksdb.ReadOptions
	wo       *grocksdb.WriteOptions
	id       store.Identity
	cursor   vector.Vector // kept in memory: read on every Apply
	logs     map[wire.OriginID]store.Log
	arrivals uint64
	afloor   uint64        // the arrival floor
	hlc      wire.HLC      // RecordHLC, kept in memory
	token    wire.Token    // RecordToken, kept in memory
	scratch  []byte        // Apply's buffer for record keys and values
	before   func()        // Options.BeforeSync
	syncAll  bool          // Options.SyncEveryApply
	bgErrors func() uint64 // Options.BackgroundErrors

	compactMu sync.Mutex       // guards toCompact: Purge adds, CompactLogs (off the loop) takes
	toCompact []grocksdb.Range // the key ranges purged since the last CompactLogs

	failMu   sync.Mutex          // guards failed: Sync sets it off the loop
	failed   *store.StorageError // the first write or sync that failed (latch.go)
	dbWrites atomic.Int64        // writes and syncs handed to RocksDB, for the latch's test
	written  atomic.Uint64       // bytes of the batches and puts handed to RocksDB (Written)
}

// Written is the bytes of every batch and put this store handed to RocksDB since it
// opened: what its write-ahead log grew by, and what its memtables will flush. The node's
// free-space guard counts them against the free space it last measured.
func (s *Store) Written() uint64 { return s.written.Load() }

var _ store.Store = (*Store)(nil)

// Open opens the data directory dir, creating it with identity create when it holds no
// store yet; an existing store keeps the identity it was created with.
func Open(dir string, create store.Identity, opts Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	o := grocksdb.NewDefaultOptions()
	o.SetCreateIfMissing(true)
	// Last-writer-wins reads every written key first, and most are new: bloom filters in
	// the memtable and the tables answer "absent" without searching.
	o.SetMemtableWholeKeyFiltering(true)
	t := grocksdb.NewDefaultBlockBasedTableOptions()
	t.SetFilterPolicy(grocksdb.NewBloomFilterFull(10))
	o.SetBlockBasedTableFactory(t)
	// A store reopened after its file system filled (latch.go) replays its write-ahead log
	// into the memtable instead of flushing it to a new table file, and a close does not
	// flush either: neither needs free space, and the log keeps the data all the same.
	o2, err := grocksdb.GetOptionsFromString(o, "memtable_prefix_bloom_size_ratio=0.1;avoid_flush_during_recovery=true;avoid_flush_during_shutdown=true")
	if err != nil {
		return nil, err
	}
	db, err := grocksdb.OpenDb(o2, dir)
	o.Destroy()
	o2.Destroy()
	if err != nil {
		if heldOpen(err) {
			return nil, fmt.Errorf("%w: %s is held open by another plait process (a running node, plait check or plait reseed): stop it, or give another directory", ErrInUse, dir)
		}
		return nil, fmt.Errorf("rocksstore: opening %s: %w", dir, err)
	}
	s := &Store{db: db, ro: grocksdb.NewDefaultReadOptions(), wo: grocksdb.NewDefaultWriteOptions(),
		logs: map[wire.OriginID]store.Log{}, before: opts.BeforeSync, syncAll: opts.SyncEveryApply,
		bgErrors: opts.BackgroundErrors}
	s.wo.SetSync(opts.SyncEveryApply)
	if err := s.load(create); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// ErrInUse is Open's error for a data directory another process, or this one, holds open:
// RocksDB locks the directory's LOCK file for as long as it is open.
var ErrInUse = errors.New("rocksstore: the data directory is in use")

// heldOpen reports whether an open failed on the directory's lock: RocksDB says "While lock
// file: DIR/LOCK: Resource temporarily unavailable" for another process's lock, and "lock
// hold by current process" for this one's; its C API gives no error code to test instead.
func heldOpen(err error) bool {
	m := err.Error()
	return strings.Contains(m, "lock file") && strings.Contains(m, "temporarily unavailable") ||
		strings.Contains(m, "lock hold by current process")
}

// Close releases the database. The store must not be used after.
func (s *Store) Close() {
	s.db.Close()
	s.ro.Destroy()
	s.wo.Destroy()
}

// load reads the identity (writing create's when there is none), the cursor vector and
// the last arrival position.
func (s *Store) load(create store.Identity) error {
	v, err := s.db.GetBytes(s.ro, []byte{pIdentity})
	if err != nil {
		return err
	}
	if v == nil {
		if create.Origin.IsZero() || !wire.ValidName(create.Name) {
			return errors.New("rocksstore: a new store needs a non-zero origin id and a valid name")
		}
		wo := grocksdb.NewDefaultWriteOptions()
		wo.SetSync(true)
		defer wo.Destroy()
		if err := s.db.Put(wo, []byte{pIdentity}, append(create.Origin[:], create.Name...)); err != nil {
			return err
		}
		s.id = create
	} else {
		if len(v) < 16 {
			return errors.New("rocksstore: the identity record is damaged")
		}
		copy(s.id.Origin[:], v[:16])
		s.id.Name = string(v[16:])
	}
	var uncounted []wire.OriginID // cursors written before log bytes were kept
	err = s.each([]byte{pCursor}, nil, func(k, v []byte) (bool, error) {
		if len(k) != 17 || (len(v) != 40 && len(v) != 48) {
			return false, errors.New("rocksstore: a cursor record is damaged")
		}
		e := vector.Entry{Seq: binary.BigEndian.Uint64(v)}
		copy(e.Origin[:], k[1:])
		copy(e.Hash[:], v[8:40])
		s.cursor.Advance(e)
		l := s.logs[e.Origin]
		if len(v) == 48 {
			l.Bytes = binary.BigEndian.Uint64(v[40:])
		} else {
			uncounted = append(uncounted, e.Origin)
		}
		s.logs[e.Origin] = l
		return true, nil
	})
	if err != nil {
		return err
	}
	err = s.each([]byte{pFloor}, nil, func(k, v []byte) (bool, error) {
		if len(k) != 17 || len(v) != 56 {
			return false, errors.New("rocksstore: a log floor record is damaged")
		}
		var o wire.OriginID
		copy(o[:], k[1:])
		l := s.logs[o]
		l.Floor.Seq = binary.BigEndian.Uint64(v)
		copy(l.Floor.Hash[:], v[8:40])
		l.Floor.HLC = wire.HLC(binary.BigEndian.Uint64(v[40:48]))
		l.Below = binary.BigEndian.Uint64(v[48:])
		s.logs[o] = l
		return true, nil
	})
	if err != nil {
		return err
	}
	if err := s.countLogs(uncounted); err != nil {
		return err
	}
	switch v, err := s.db.GetBytes(s.ro, []byte{pAFloor}); {
	case err != nil:
		return err
	case len(v) == 8:
		s.afloor = binary.BigEndian.Uint64(v)
	case v != nil:
		return errors.New("rocksstore: the arrival floor is damaged")
	}
	if err := s.loadHLC(); err != nil {
		return err
	}
	if err := s.loadToken(); err != nil {
		return err
	}
	it := s.db.NewIterator(s.ro)
	defer it.Close()
	it.SeekForPrev([]byte{pArrival, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	if it.ValidForPrefix([]byte{pArrival}) {
		k := it.Key()
		s.arrivals = binary.BigEndian.Uint64(k.Data()[1:])
		k.Free()
	}
	return it.Err()
}

// loadHLC reads RecordHLC. A directory written before the 'h' key existed has records
// and no 'h': their highest HLC is found once and written.
func (s *Store) loadHLC() error {
	v, err := s.db.GetBytes(s.ro, []byte{pHLC})
	switch {
	case err != nil:
		return err
	case len(v) == 8:
		s.hlc = wire.HLC(binary.BigEndian.Uint64(v))
		return nil
	case v != nil:
		return errors.New("rocksstore: the record HLC is damaged")
	}
	err = s.each([]byte{pRecord}, nil, func(_, v []byte) (bool, error) {
		if len(v) < 25 {
			return false, errors.New("rocksstore: a record is damaged")
		}
		s.hlc = max(s.hlc, wire.HLC(binary.BigEndian.Uint64(v[1:9])))
		return true, nil
	})
	if err != nil || s.hlc == 0 {
		return err
	}
	return s.db.Put(s.wo, []byte{pHLC}, u64(uint64(s.hlc)))
}

// loadToken reads RecordToken. A directory without the 'o' key holds no tokened record:
// every write of one writes the key in the same batch (putRecords).
func (s *Store) loadToken() error {
	v, err := s.db.GetBytes(s.ro, []byte{pToken})
	switch {
	case err != nil:
		return err
	case len(v) == wire.TokenSize:
		s.token = decodeToken(v)
	case v != nil:
		return errors.New("rocksstore: the record token is damaged")
	}
	return nil
}

func decodeToken(b []byte) wire.Token {
	t := wire.Token{Generation: binary.BigEndian.Uint64(b), Incarnation: binary.BigEndian.Uint64(b[8:]), Counter: binary.BigEndian.Uint64(b[16:])}
	copy(t.Home[:], b[24:wire.TokenSize])
	return t
}

// countLogs counts the log bytes of origins whose cursor records predate them, and
// writes their cursors in the current form.
func (s *Store) countLogs(origins []wire.OriginID) error {
	for _, o := range origins {
		l := s.logs[o]
		l.Bytes = 0
		err := s.each(key(pLog, o[:]), nil, func(_, v []byte) (bool, error) {
			l.Bytes += uint64(len(v))
			return true, nil
		})
		if err != nil {
			return err
		}
		s.logs[o] = l
		if err := s.db.Put(s.wo, key(pCursor, o[:]), s.cursorValue(s.cursor.Get(o), l.Bytes)); err != nil {
			return err
		}
	}
	return nil
}

// cursorValue is a cursor record: seq, chain hash, log bytes.
func (s *Store) cursorValue(e vector.Entry, logBytes uint64) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 48), e.Seq)
	v = append(v, e.Hash[:]...)
	return binary.BigEndian.AppendUint64(v, logBytes)
}

// floorValue is a log floor record: seq, chain hash, HLC, below.
func floorValue(l store.Log) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 56), l.Floor.Seq)
	v = append(v, l.Floor.Hash[:]...)
	v = binary.BigEndian.AppendUint64(v, uint64(l.Floor.HLC))
	return binary.BigEndian.AppendUint64(v, l.Below)
}

// each calls fn for every key with prefix, from start (nil: the first), with copies of
// the key and value, until fn returns false or an error.
func (s *Store) each(prefix, start []byte, fn func(k, v []byte) (bool, error)) error {
	it := s.db.NewIterator(s.ro)
	defer it.Close()
	if start == nil {
		start = prefix
	}
	for it.Seek(start); it.ValidForPrefix(prefix); it.Next() {
		k, v := it.Key(), it.Value()
		more, err := fn(bytes.Clone(k.Data()), bytes.Clone(v.Data()))
		k.Free()
		v.Free()
		if err != nil || !more {
			return err
		}
	}
	return it.Err()
}

func key(prefix byte, parts ...[]byte) []byte {
	k := []byte{prefix}
	for _, p := range parts {
		k = append(k, p...)
	}
	return k
}

func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

func tablePrefix(table []byte) []byte { return appendTablePrefix(nil, table) }

// appendTablePrefix appends the key prefix of a table's records to b.
func appendTablePrefix(b, table []byte) []byte {
	return append(binary.AppendUvarint(append(b, pRecord), uint64(len(table))), table...)
}

// Identity is the node's identity.
func (s *Store) Identity() (store.Identity, error) { return s.id, nil }

// Vector returns the cursor vector.
func (s *Store) Vector() (vector.Vector, error) { return s.cursor.Clone(), nil }

// Entry returns the transaction encoding at (origin, seq), store.ErrPurged at or below
// the origin's floor, a *store.SkippedError inside a run held as a skip, or
// store.ErrNotFound.
func (s *Store) Entry(origin wire.OriginID, seq uint64) ([]byte, error) {
	if seq > 0 && seq <= s.logs[origin].Floor.Seq {
		return nil, store.ErrPurged
	}
	v, err := s.db.GetBytes(s.ro, key(pLog, origin[:], u64(seq)))
	switch {
	case err != nil:
		return nil, err
	case v != nil && store.IsSkipRow(v):
		return nil, s.skipRow(origin, v)
	case v != nil:
		return v, nil
	case seq == 0 || seq > s.cursor.Get(origin).Seq:
		return nil, store.ErrNotFound
	}
	// No row at seq, below the cursor: a run's, kept at its last seq, is the first row
	// after it.
	it := s.db.NewIterator(s.ro)
	defer it.Close()
	prefix := key(pLog, origin[:])
	if it.Seek(key(pLog, origin[:], u64(seq))); !it.ValidForPrefix(prefix) {
		return nil, errors.Join(store.ErrNotFound, it.Err())
	}
	val := it.Value()
	row := bytes.Clone(val.Data())
	val.Free()
	if !store.IsSkipRow(row) {
		return nil, store.ErrNotFound
	}
	run, err := store.ParseSkipRow(origin, row)
	switch {
	case err != nil:
		return nil, fmt.Errorf("rocksstore: %w", err)
	case run.From <= seq:
		return nil, run
	}
	return nil, store.ErrNotFound
}

// skipRow decodes a run's log row into the error Entry answers, or the error it is damaged
// with.
func (s *Store) skipRow(origin wire.OriginID, row []byte) error {
	run, err := store.ParseSkipRow(origin, row)
	if err != nil {
		return fmt.Errorf("rocksstore: %w", err)
	}
	return run
}

// Arrivals returns up to limit log entries after arrival position after.
func (s *Store) Arrivals(after uint64, limit int) ([]store.Arrival, error) {
	var out []store.Arrival
	if after < s.afloor {
		return nil, store.ErrPurged
	}
	if limit <= 0 || after >= s.arrivals {
		return nil, nil
	}
	err := s.each([]byte{pArrival}, key(pArrival, u64(after+1)), func(k, v []byte) (bool, error) {
		if len(v) != 24 {
			return false, errors.New("rocksstore: an arrival record is damaged")
		}
		var o wire.OriginID
		copy(o[:], v[:16])
		txn, err := s.Entry(o, binary.BigEndian.Uint64(v[16:]))
		if err != nil {
			return false, fmt.Errorf("rocksstore: arrival %d: %w", binary.BigEndian.Uint64(k[1:]), err)
		}
		out = append(out, store.Arrival{Pos: binary.BigEndian.Uint64(k[1:]), Txn: txn})
		return len(out) < limit, nil
	})
	return out, err
}

// LastArrival is the highest arrival position.
func (s *Store) LastArrival() (uint64, error) { return s.arrivals, nil }

// RecordHLC is the highest HLC of a record version Apply wrote.
func (s *Store) RecordHLC() (wire.HLC, error) { return s.hlc, nil }

// RecordToken is the highest token of a record version written.
func (s *Store) RecordToken() (wire.Token, error) { return s.token, nil }

// Get returns a record's current version, tombstones included.
func (s *Store) Get(table, k []byte) (store.Record, bool, error) {
	v, err := s.db.GetBytes(s.ro, append(tablePrefix(table), k...))
	if err != nil || v == nil {
		return store.Record{}, false, err
	}
	r, err := decodeRecord(table, k, v)
	return r, err == nil, err
}

// Flags of a stored record: deleted, tokened (its token follows the origin), and delivered
// by another identity (flagVia: a version a hub re-originated from a leaf, docs/design.md
// §27.1; its via origin and via HLC follow the token, or the origin when untokened). A
// record written before tokens existed has flags 0 or 1 and no token: it decodes as
// untokened, so no data directory is rewritten; an untokened record without a via is
// stored exactly as before. A build from before hubs takes a flag above flagToken for a
// damaged record (decodeRecord's check), so it reports a directory holding leaf writes
// damaged rather than misread the via block as the record's value.
const (
	flagDeleted = 0x01
	flagToken   = 0x02
	flagVia     = 0x04
)

// viaSize is the via block of a flagVia record: via origin (16), via HLC (8).
const viaSize = 16 + 8

// appendRecord appends a record's stored value to v: flags, HLC, origin, the token when it
// carries one, the via block when it has a via, value.
func appendRecord(v []byte, r *store.Record) []byte {
	flags := byte(0)
	if r.Deleted {
		flags |= flagDeleted
	}
	if !r.Token.IsZero() {
		flags |= flagToken
	}
	if !r.Via.IsZero() {
		flags |= flagVia
	}
	v = append(v, flags)
	v = binary.BigEndian.AppendUint64(v, uint64(r.HLC))
	v = append(v, r.Origin[:]...)
	if !r.Token.IsZero() {
		v = wire.AppendToken(v, r.Token)
	}
	if !r.Via.IsZero() {
		v = append(v, r.Via[:]...)
		v = binary.BigEndian.AppendUint64(v, uint64(r.ViaHLC))
	}
	return append(v, r.Value...)
}

func decodeRecord(table, k, v []byte) (store.Record, error) {
	head := 25 // flags, HLC, origin
	if len(v) > 0 && v[0]&flagToken != 0 {
		head += wire.TokenSize
	}
	via := head
	if len(v) > 0 && v[0]&flagVia != 0 {
		head += viaSize
	}
	if len(v) < head || v[0] > flagDeleted|flagToken|flagVia {
		return store.Record{}, &store.DamagedRecordError{Table: slices.Clone(table), Key: slices.Clone(k),
			Err: fmt.Errorf("rocksstore: a stored value of %d bytes that does not decode", len(v))}
	}
	r := store.Record{Deleted: v[0]&flagDeleted != 0, HLC: wire.HLC(binary.BigEndian.Uint64(v[1:9]))}
	copy(r.Origin[:], v[9:25])
	if v[0]&flagToken != 0 {
		r.Token = decodeToken(v[25:via])
	}
	if v[0]&flagVia != 0 {
		copy(r.Via[:], v[via:via+16])
		r.ViaHLC = wire.HLC(binary.BigEndian.Uint64(v[via+16 : head]))
		if r.Via.IsZero() {
			return store.Record{}, &store.DamagedRecordError{Table: slices.Clone(table), Key: slices.Clone(k),
				Err: fmt.Errorf("rocksstore: a stored value of %d bytes with an all-zero via origin", len(v))}
		}
	}
	// One allocation for the table, the key and the value, each slice capped at its own
	// bytes: a scan decodes every record it passes.
	n := len(table) + len(k)
	if !r.Deleted {
		n += len(v) - head
	}
	b := make([]byte, 0, n)
	b = append(append(b, table...), k...)
	r.Table, r.Key = b[:len(table):len(table)], b[len(table):len(b):len(b)]
	if !r.Deleted {
		b = append(b, v[head:]...)
		r.Value = b[len(table)+len(k) : len(b) : len(b)]
	}
	return r, nil
}

// Scan calls fn for the records of table in key order after key after (nil: from the
// first), tombstones included, until fn returns false.
func (s *Store) Scan(table []byte, after []byte, fn func(store.Record) bool) error {
	prefix := tablePrefix(table)
	start := prefix
	if after != nil {
		start = append(slices.Clone(prefix), after...)
	}
	return s.each(prefix, start, func(k, v []byte) (bool, error) {
		rk := k[len(prefix):]
		if after != nil && bytes.Equal(rk, after) {
			return true, nil
		}
		r, err := decodeRecord(table, rk, v)
		if err != nil {
			return false, err
		}
		return fn(r), nil
	})
}

// Tables lists the tables that hold a record, sorted.
func (s *Store) Tables() ([][]byte, error) {
	var out [][]byte
	err := s.each([]byte{pTable}, nil, func(k, _ []byte) (bool, error) {
		out = append(out, k[1:])
		return true, nil
	})
	return out, err
}

// Names returns every origin's name the store knows.
func (s *Store) Names() (map[wire.OriginID]string, error) {
	out := map[wire.OriginID]string{}
	err := s.each([]byte{pName}, nil, func(k, v []byte) (bool, error) {
		var o wire.OriginID
		copy(o[:], k[1:])
		out[o] = string(v)
		return true, nil
	})
	return out, err
}

// PeerCursor is a version-1 peer's cursor (0 when none).
func (s *Store) PeerCursor(peer wire.OriginID) (uint64, error) {
	v, err := s.db.GetBytes(s.ro, key(pPeer, peer[:]))
	if err != nil || v == nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, errors.New("rocksstore: a peer cursor is damaged")
	}
	return binary.BigEndian.Uint64(v), nil
}

// SetPeerCursor sets a peer cursor, lower or higher.
func (s *Store) SetPeerCursor(peer wire.OriginID, pos uint64) error {
	return s.put("peer-cursor", s.wo, key(pPeer, peer[:]), u64(pos))
}

// Apply writes one transaction atomically (store.Store); it checks b with
// store.CheckBatch first and writes nothing when that refuses.
func (s *Store) Apply(b *store.Batch) (uint64, error) {
	if err := s.Failed(); err != nil {
		return 0, err
	}
	if err := store.CheckBatch(b, s.cursor.Get(b.Origin)); err != nil {
		return 0, err
	}
	if b.Skip != nil {
		return 0, s.applySkip(b)
	}
	pos := s.arrivals + 1
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	wb.Put(key(pLog, b.Origin[:], u64(b.Seq)), b.Txn)
	wb.Put(key(pArrival, u64(pos)), append(b.Origin[:], u64(b.Seq)...))
	logBytes := s.logs[b.Origin].Bytes + uint64(len(b.Txn))
	wb.Put(key(pCursor, b.Origin[:]), s.cursorValue(vector.Entry{Seq: b.Seq, Hash: b.Hash}, logBytes))
	tops := s.putRecords(wb, b.Records, s.tops())
	if b.Name != "" {
		wb.Put(key(pName, b.Origin[:]), []byte(b.Name))
	}
	if !b.PeerOrigin.IsZero() {
		cur, err := s.PeerCursor(b.PeerOrigin)
		if err != nil {
			return 0, err
		}
		if b.PeerCursor > cur {
			wb.Put(key(pPeer, b.PeerOrigin[:]), u64(b.PeerCursor))
		}
	}
	if b.Leaf != nil {
		// The leaf's mark in the entry's own batch: a crash leaves both or neither, so a
		// hub never re-originates one leaf entry twice (docs/design.md §27.8).
		if err := s.putLeafMark(wb, b.Leaf); err != nil {
			return 0, err
		}
	}
	if s.syncAll && s.before != nil {
		s.before() // the write below is the apply's fsync
	}
	if err := s.write("apply", s.wo, wb); err != nil {
		return 0, fmt.Errorf("rocksstore: applying origin %s seq %d: %w", b.Origin, b.Seq, err)
	}
	s.cursor.Advance(vector.Entry{Origin: b.Origin, Seq: b.Seq, Hash: b.Hash})
	l := s.logs[b.Origin]
	l.Bytes = logBytes
	s.logs[b.Origin] = l
	s.arrivals = pos
	s.setTops(tops)
	return pos, nil
}

// applySkip writes a checked run as one batch: its log row at its last seq (the layout's
// 'l' key, so that purges, a copy's end and a reseed drop it with the entries around it by
// the same range deletions), the cursor with the row's bytes, and the origin's name.
func (s *Store) applySkip(b *store.Batch) error {
	run := store.SkippedOf(b)
	logBytes := s.logs[b.Origin].Bytes
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	// A run right after a run this store holds extends it (store.Extend): one row.
	prevKey := key(pLog, b.Origin[:], u64(b.Skip.From-1))
	if prev, err := s.db.GetBytes(s.ro, prevKey); err != nil {
		return err
	} else if prev != nil && store.IsSkipRow(prev) {
		pr, err := store.ParseSkipRow(b.Origin, prev)
		if err != nil {
			return fmt.Errorf("rocksstore: %w", err)
		}
		if ext, ok := store.Extend(pr, run); ok {
			wb.Delete(prevKey)
			logBytes -= uint64(len(prev))
			run = ext
		}
	}
	row := store.AppendSkipRow(nil, run)
	wb.Put(key(pLog, b.Origin[:], u64(b.Seq)), row)
	logBytes += uint64(len(row))
	wb.Put(key(pCursor, b.Origin[:]), s.cursorValue(vector.Entry{Seq: b.Seq, Hash: b.Hash}, logBytes))
	if b.Name != "" {
		wb.Put(key(pName, b.Origin[:]), []byte(b.Name))
	}
	if s.syncAll && s.before != nil {
		s.before() // the write below is the apply's fsync
	}
	if err := s.write("apply", s.wo, wb); err != nil {
		return fmt.Errorf("rocksstore: applying origin %s run %d to %d: %w", b.Origin, b.Skip.From, b.Seq, err)
	}
	s.cursor.Advance(vector.Entry{Origin: b.Origin, Seq: b.Seq, Hash: b.Hash})
	l := s.logs[b.Origin]
	l.Bytes = logBytes
	s.logs[b.Origin] = l
	return nil
}

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

// Purge checks p with store.CheckPurge, then writes it as one batch: range deletions of
// the purged log entries and arrival positions, and the new floors, cursors (their log
// bytes) and arrival floor. The space comes back when compaction rewrites the ranges
// (CompactLogs).
func (s *Store) Purge(p *store.Purge) error {
	if err := s.Failed(); err != nil {
		return err
	}
	plan, err := store.CheckPurge(p, store.PurgeView{Logs: s.logs, Cursors: s.cursor, ArrivalFloor: s.afloor,
		LastArrival: s.arrivals, Entry: s.Entry, Arrivals: s.Arrivals})
	if err != nil {
		return err
	}
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	for _, pl := range plan.Logs {
		if pl.To >= pl.From {
			wb.DeleteRange(key(pLog, pl.Origin[:], u64(pl.From)), key(pLog, pl.Origin[:], u64(pl.To+1)))
		}
		wb.Put(key(pFloor, pl.Origin[:]), floorValue(pl.Log))
		wb.Put(key(pCursor, pl.Origin[:]), s.cursorValue(s.cursor.Get(pl.Origin), pl.Log.Bytes))
	}
	if plan.ArrivalFloor > s.afloor {
		wb.DeleteRange(key(pArrival, u64(s.afloor+1)), key(pArrival, u64(plan.ArrivalFloor+1)))
		wb.Put([]byte{pAFloor}, u64(plan.ArrivalFloor))
	}
	if err := s.write("purge", s.wo, wb); err != nil {
		return fmt.Errorf("rocksstore: purging: %w", err)
	}
	var purged []grocksdb.Range
	for _, pl := range plan.Logs {
		s.logs[pl.Origin] = pl.Log
		if pl.To >= pl.From {
			purged = append(purged, grocksdb.Range{Start: key(pLog, pl.Origin[:], u64(pl.From)), Limit: key(pLog, pl.Origin[:], u64(pl.To+1))})
		}
	}
	if plan.ArrivalFloor > s.afloor {
		purged = append(purged, grocksdb.Range{Start: key(pArrival, u64(s.afloor+1)), Limit: key(pArrival, u64(plan.ArrivalFloor+1))})
	}
	s.afloor = plan.ArrivalFloor
	s.compactMu.Lock()
	s.toCompact = mergeRanges(append(s.toCompact, purged...))
	s.compactMu.Unlock()
	return nil
}

// mergeRanges sorts key ranges and joins those that overlap or touch, so that the ranges
// of many small purges of one log compact as one.
func mergeRanges(rs []grocksdb.Range) []grocksdb.Range {
	slices.SortFunc(rs, func(a, b grocksdb.Range) int { return bytes.Compare(a.Start, b.Start) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && bytes.Compare(r.Start, out[n-1].Limit) <= 0 {
			if bytes.Compare(r.Limit, out[n-1].Limit) > 0 {
				out[n-1].Limit = r.Limit
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// CompactLogs compacts the key ranges purged since its last call, so that the space of
// the purged entries returns to the file system (a range deletion only marks it). It
// reports whether there was anything to compact. Like Sync, it may run concurrently with
// the other methods (off the node's loop); it must return before Close.
func (s *Store) CompactLogs() bool {
	s.compactMu.Lock()
	rs := s.toCompact
	s.toCompact = nil
	s.compactMu.Unlock()
	for _, r := range rs {
		s.db.CompactRange(r)
	}
	return len(rs) > 0
}

// Holds lists the retention holds, by peer and then origin.
func (s *Store) Holds() ([]store.Hold, error) {
	var out []store.Hold
	err := s.each([]byte{pHold}, nil, func(k, v []byte) (bool, error) {
		i := bytes.IndexByte(k[1:], 0)
		if i < 0 || len(k) != 1+i+1+16 || len(v) != 16 {
			return false, errors.New("rocksstore: a retention hold is damaged")
		}
		h := store.Hold{Peer: string(k[1 : 1+i]), Seq: binary.BigEndian.Uint64(v),
			Since: time.Unix(0, int64(binary.BigEndian.Uint64(v[8:]))).UTC()}
		copy(h.Origin[:], k[1+i+1:])
		out = append(out, h)
		return true, nil
	})
	return out, err
}

// PutHolds adds or replaces holds, in one batch.
func (s *Store) PutHolds(hs []store.Hold) error {
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	for _, h := range hs {
		if !wire.ValidName(h.Peer) {
			return fmt.Errorf("rocksstore: a hold for peer %q: not a node name", h.Peer)
		}
		wb.Put(holdKey(h.Peer, h.Origin), binary.BigEndian.AppendUint64(u64(h.Seq), uint64(h.Since.UnixNano())))
	}
	return s.write("holds", s.wo, wb)
}

// DeleteHolds forgets every hold of a peer.
func (s *Store) DeleteHolds(peer string) error {
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	wb.DeleteRange(key(pHold, []byte(peer), []byte{0}), key(pHold, []byte(peer), []byte{1}))
	return s.write("holds", s.wo, wb)
}

// DeleteHold forgets one hold of a peer.
func (s *Store) DeleteHold(peer string, origin wire.OriginID) error {
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	wb.Delete(holdKey(peer, origin))
	return s.write("holds", s.wo, wb)
}

func holdKey(peer string, o wire.OriginID) []byte { return key(pHold, []byte(peer), []byte{0}, o[:]) }

// Sync makes every write so far survive a power loss: it fsyncs the write-ahead log. Unlike
// the other methods, it may run concurrently with them (the node's group commit runs it
// off its loop); it must return before Close.
func (s *Store) Sync() error {
	if s.before != nil {
		s.before()
	}
	return s.guard("sync", func() error { return s.db.FlushWAL(true) })
}

// DialPeer is a peer added through the API, kept in the data directory, with this node's
// settings for the link to it (docs/design.md §24.6; the zero Link: both ways, nothing
// excluded).
type DialPeer struct {
	Name string
	URL  string
	Link wire.Link
}

// DialPeers lists the peers added through the API, by name, each with its link's settings.
// The settings are a key of their own ('e', beside the URL's 'd'), so that a data directory
// written before they existed reads as peers of the default link, and a build from before
// them still reads its peers' URLs (and passes the settings over) from one written after.
func (s *Store) DialPeers() ([]DialPeer, error) {
	var out []DialPeer
	err := s.each([]byte{pDial}, nil, func(k, v []byte) (bool, error) {
		out = append(out, DialPeer{Name: string(k[1:]), URL: string(v)})
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		v, err := s.db.GetBytes(s.ro, key(pLink, []byte(out[i].Name)))
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		l, err := wire.DecodeLink(v)
		if err != nil {
			return nil, fmt.Errorf("rocksstore: the link settings kept for peer %s: %w", out[i].Name, err)
		}
		out[i].Link = wire.Link{Mode: l.Mode, Tables: l.Tables}
	}
	return out, nil
}

// PutDialPeer keeps a peer added through the API, its URL and its link's settings in one
// write (synced: it is configuration). Default settings keep no 'e' key.
func (s *Store) PutDialPeer(p DialPeer) error {
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	wb.Put(key(pDial, []byte(p.Name)), []byte(p.URL))
	if l := (wire.Link{Mode: p.Link.Mode, Tables: p.Link.Tables}); l.Mode == wire.LinkBoth && len(l.Tables) == 0 {
		wb.Delete(key(pLink, []byte(p.Name)))
	} else {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("rocksstore: the link settings of peer %s: %w", p.Name, err)
		}
		body, err := l.AppendBody(nil)
		if err != nil {
			return err
		}
		wb.Put(key(pLink, []byte(p.Name)), body)
	}
	wo := grocksdb.NewDefaultWriteOptions()
	defer wo.Destroy()
	wo.SetSync(true)
	return s.write("dial-peer", wo, wb)
}

// DeleteDialPeer forgets a peer added through the API, and its link's settings.
func (s *Store) DeleteDialPeer(name string) error {
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	wb.Delete(key(pDial, []byte(name)))
	wb.Delete(key(pLink, []byte(name)))
	wo := grocksdb.NewDefaultWriteOptions()
	defer wo.Destroy()
	wo.SetSync(true)
	return s.write("dial-peer", wo, wb)
}

// recordTops are RecordHLC and RecordToken.
type recordTops struct {
	hlc   wire.HLC
	token wire.Token
}

func (s *Store) tops() recordTops { return recordTops{hlc: s.hlc, token: s.token} }

// setTops keeps the tops a written batch raised.
func (s *Store) setTops(t recordTops) { s.hlc, s.token = t.hlc, t.token }

// putRecords adds recs' versions to wb, each table's 't' key, and RecordHLC and RecordToken
// where they raise them above from (what the batch holds so far); it returns them after
// recs (the caller keeps them, setTops, once wb is written).
func (s *Store) putRecords(wb *grocksdb.WriteBatch, recs []store.Record, from recordTops) recordTops {
	var last []byte // the table whose 't' key is in the batch; a batch seldom spans many
	hlc, token := from.hlc, from.token
	for i := range recs {
		r := &recs[i]
		hlc = max(hlc, r.HLC)
		if r.Token.Compare(token) > 0 {
			token = r.Token
		}
		// Put copies key and value into the batch, so one scratch buffer serves every record.
		s.scratch = append(appendTablePrefix(s.scratch[:0], r.Table), r.Key...)
		k := len(s.scratch)
		s.scratch = appendRecord(s.scratch, r)
		wb.Put(s.scratch[:k], s.scratch[k:])
		if !bytes.Equal(r.Table, last) {
			wb.Put(key(pTable, r.Table), nil)
			last = r.Table
		}
	}
	if hlc > from.hlc {
		wb.Put([]byte{pHLC}, u64(uint64(hlc)))
	}
	if token != from.token {
		wb.Put([]byte{pToken}, wire.AppendToken(nil, token))
	}
	return recordTops{hlc: hlc, token: token}
}
