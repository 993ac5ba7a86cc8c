package store

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Store is a node's durable state as the replica sees it. Every method is called from the
// one goroutine that drives the replica. The in-memory store (package memstore) and the
// RocksDB store of the native shell implement exactly these semantics, and both pass the
// suite of package storetest.
//
// The store decides nothing: last-writer-wins, which entries to apply and when to
// acknowledge are the replica's. The store's one rule of its own is atomicity: Apply
// writes the records, the log entry, the arrival position, the cursor advance, the
// origin's name and the peer cursor together or not at all, so that after a crash the
// cursor is never ahead of the data.
type Store interface {
	// Identity is the node's origin id and name, fixed when the data directory was created.
	Identity() (Identity, error)

	// Vector returns the cursor vector: for each origin, the highest seq applied and its
	// chain hash. Positions only grow, one seq at a time (Apply).
	Vector() (vector.Vector, error)

	// Entry returns the transaction encoding at (origin, seq), ErrPurged when seq is at or
	// below the origin's floor, a *SkippedError (wrapping ErrSkipped) with the whole run when
	// seq is inside a run the store holds as a skip (skip.go), or ErrNotFound.
	Entry(origin wire.OriginID, seq uint64) ([]byte, error)

	// Arrivals returns up to limit log entries after arrival position after, in arrival
	// order: the order this node applied them, over all origins (version 1 streams it).
	// Positions start at 1 and are contiguous above the arrival floor; it refuses with
	// ErrPurged when after is below the arrival floor.
	Arrivals(after uint64, limit int) ([]Arrival, error)

	// LastArrival is the highest arrival position (0 when the log is empty).
	LastArrival() (uint64, error)

	// Get returns the current version of a record, tombstones included.
	Get(table, key []byte) (Record, bool, error)

	// RecordHLC is the highest HLC of any record version Apply ever wrote (0 when none).
	// It survives what the records survive. Last-writer-wins reads no record for an entry
	// newer than it: no stored version can win.
	RecordHLC() (wire.HLC, error)

	// RecordToken is the highest fencing token of any record version ever written (the
	// zero Token when none carried one), by Apply, Repair, ApplyCopy or Reseed. It survives
	// what the records survive. While it is zero no stored version carries a token, and
	// RecordHLC alone says which entries no stored version can beat (NewerVersion).
	RecordToken() (wire.Token, error)

	// Scan calls fn for the records of table in key order, starting after key after
	// (nil: from the first), tombstones included, until fn returns false.
	Scan(table []byte, after []byte, fn func(Record) bool) error

	// Tables lists the tables that hold at least one record, tombstones included, sorted.
	Tables() ([][]byte, error)

	// Names returns the human name of every origin the store knows.
	Names() (map[wire.OriginID]string, error)

	// PeerCursor is the version-1 position this node processed in the arrival order of the
	// peer with this origin id (0 when none).
	PeerCursor(peer wire.OriginID) (uint64, error)

	// SetPeerCursor sets a peer cursor outside an Apply: higher after duplicates, lower
	// when a version-1 gap shows that an entry before it never arrived.
	SetPeerCursor(peer wire.OriginID, pos uint64) error

	// Apply writes one transaction atomically: every record of b.Records, the log entry
	// (origin, seq) with the next arrival position, the cursor of the origin to
	// (b.Seq, b.Hash), b.Name as the origin's name when set, and b.PeerCursor when set.
	// It refuses with ErrNotNext, writing nothing, unless b.Seq is the origin's cursor + 1.
	// It returns the arrival position given to the entry. When Apply returns, the write
	// survives a crash of the process; Sync makes it survive a power loss too.
	//
	// A batch with a Skip is a run b.Skip.From to b.Seq (skip.go): Apply writes it as one
	// log row at b.Seq (AppendSkipRow, whose size the log's Bytes grow by), the cursor to
	// (b.Seq, b.Hash) and b.Name when set; it writes no record and takes no arrival position
	// (the arrival order holds entries only), and returns 0. It refuses with ErrNotNext
	// unless b.Skip.From is the cursor's seq + 1 and b.Skip.Prev the cursor's hash.
	Apply(b *Batch) (uint64, error)

	// Sync makes every write so far durable against power loss (fsync).
	Sync() error

	// LeafMark returns the mark of one leaf (Batch.Leaf), false when none is held.
	LeafMark(leaf wire.OriginID) (LeafMark, bool, error)

	// LeafMarks calls fn for every leaf mark held, by leaf origin, until fn returns false.
	LeafMarks(fn func(LeafMark) bool) error

	// PutLeafMark raises one leaf's mark to m outside an Apply (a lower Seq is ignored): a
	// leaf entry a hub refused to re-originate still moves the leaf's position past it.
	PutLeafMark(m LeafMark) error

	// DropLeafMarks forgets the marks of these leaves (a hub's index of leaves gone longer
	// than its leaf hold).
	DropLeafMarks(leaves []wire.OriginID) error

	// Logs describes the log of every origin of Vector: its floor, which of its entries
	// are no longer in the arrival order, and the bytes it holds.
	Logs() (map[wire.OriginID]Log, error)

	// ArrivalFloor is the highest arrival position purged from the arrival order (0 when
	// none).
	ArrivalFloor() (uint64, error)

	// Purge writes one retention step atomically, after checking it with CheckPurge; it
	// refuses with an error wrapping ErrBadPurge, writing nothing, when the check fails.
	Purge(p *Purge) error

	// Holds lists the retention holds kept for peers, by peer and then origin.
	Holds() ([]Hold, error)

	// PutHolds adds or replaces holds (one per peer and origin).
	PutHolds(hs []Hold) error

	// DeleteHolds forgets every hold of a peer.
	DeleteHolds(peer string) error

	// DeleteHold forgets one hold of a peer, on one origin (none: nothing to do).
	DeleteHold(peer string, origin wire.OriginID) error

	// DropTombstones deletes the listed tombstones, each only while it is still the
	// record's current version (same token, HLC and origin, deleted); any other record is
	// left as it is. One atomic write.
	DropTombstones(ts []Record) error

	// DropTable deletes every record of table, tombstones included, in one atomic write,
	// and reports how many it deleted and their bytes as the store held them (at least
	// their keys and values): a table this node no longer carries (docs/design.md §24.4).
	// A table without records deletes nothing.
	DropTable(table []byte) (records, bytes uint64, err error)

	// Repair writes record versions as they are, around the log (anti-entropy,
	// docs/design.md §19): no log entry, no cursor; one atomic write. RecordHLC rises to
	// the highest HLC of recs. When it returns the write survives a crash of the process.
	Repair(recs []Record) error

	// Snapshot opens a consistent read-only view of the records as they are now, for a
	// base copy this node serves. It stays valid, whatever is written after, until
	// Release.
	Snapshot() (Snapshot, error)

	// CopyState is the base copy this node is taking, nil when none: it is written with
	// every chunk (ApplyCopy), in the same atomic write, and removed when the copy ends.
	CopyState() (*CopyState, error)

	// ApplyCopy writes one copied chunk atomically: b.Records (put as they are), the
	// deletion of b.Deletes, and b.State as the copy state; RecordHLC rises to the highest
	// HLC of b.Records. When it returns the write survives a crash of the process.
	ApplyCopy(b *CopyBatch) error

	// EndCopy ends the copy atomically, after checking e with CheckCopyEnd: each log of
	// e.Logs jumps to its copied position (cursor and floor there, every entry it held
	// dropped; its name kept when given), the arrival floor rises to the last arrival when
	// a log jumped, e.Deletes are deleted, and the copy state is removed. It refuses (an error wrapping ErrBadCopy),
	// writing nothing, when the check fails.
	EndCopy(e *CopyEnd) error

	// Control returns the control document under key (control.go), nil when there is
	// none; a document written empty comes back as an empty, non-nil slice. A key outside
	// CheckControlKey's rule is refused (ErrBadControl).
	Control(key string) ([]byte, error)

	// PutControl writes value as the control document under key, replacing any, in one
	// atomic write, after checking both with CheckControl (ErrBadControl, writing nothing).
	// When it returns the write survives a crash of the process and a power loss (it is
	// synced by itself, not by Sync): a node that adopted a cluster map must never come
	// back holding an older one (docs/design.md §23.2), and documents change too rarely
	// for the fsync to matter. Control documents are outside the records and the logs:
	// nothing else of this interface reads or changes them.
	PutControl(key string, value []byte) error

	// Reseed gives the node a new origin id atomically (reseed.go), after checking rs with
	// CheckReseed: the identity becomes rs.Identity, with its name as the new origin's; the
	// old origin's log loses every entry above rs.Cut, its cursor and floor are there; the
	// arrival floor rises to the last arrival, and every log's Below to its cursor; then
	// rs.Entries are written as Apply writes them, in order (their records put as they
	// are; RecordHLC does not move, their HLCs being old ones). It refuses (an error
	// wrapping ErrBadReseed), writing nothing, when the check fails. When it returns the
	// write survives a crash of the process.
	Reseed(rs *Reseed) error
}

// Snapshot is a consistent read-only view of a store's records.
type Snapshot interface {
	// Records calls fn for the records after (table, key) in (table, key) order — tables
	// by their bytes, then keys by theirs — tombstones included, until fn returns false.
	// A nil table starts at the first record. The record's slices are fn's to keep.
	Records(table, key []byte, fn func(Record) bool) error
	// Size is the number of tables, and estimates of the records and of their bytes (keys,
	// values and versions), for progress.
	Size() (tables, records, bytes uint64, err error)
	// Release frees the view; it must not be used after.
	Release()
}

// CopyState is the base copy a node is taking (docs/design.md §15), as durable as the
// records it copied.
type CopyState struct {
	// Peer is the peer the copy was last taken from (resuming may take it from another).
	Peer string `cbor:"1,keyasint"`
	// Table and Key are the last record copied (both nil before the first chunk): the
	// range up to them is merged, and the copy resumes after them.
	Table []byte `cbor:"2,keyasint,omitempty"`
	Key   []byte `cbor:"3,keyasint,omitempty"`
	// Vector is, per origin, the lowest position of every snapshot the copy took records
	// from; an origin missing from one of them is missing here. The copy ends at it.
	Vector []wire.CopyPosition `cbor:"4,keyasint,omitempty"`
	// Snapshots counts the snapshots the copy took records from (1 + its resumes).
	Snapshots uint64 `cbor:"5,keyasint,omitempty"`
	// Records and Bytes are what the copy carried so far (records written or skipped),
	// Deleted the records it removed (superseded at the sender, their tombstones gone).
	Records uint64 `cbor:"6,keyasint,omitempty"`
	Bytes   uint64 `cbor:"7,keyasint,omitempty"`
	Deleted uint64 `cbor:"8,keyasint,omitempty"`
	// Started is when the copy began (Unix nanoseconds).
	Started int64 `cbor:"9,keyasint,omitempty"`
	// Tables counts the tables the copy reached (the one it is in included).
	Tables uint64 `cbor:"10,keyasint,omitempty"`
}

// CopyBatch is one copied chunk to write atomically.
type CopyBatch struct {
	Records []Record // record versions to write: the merge's winners
	Deletes []Record // records to delete (Table and Key)
	State   CopyState
}

// CopyEnd is the end of a copy to write atomically.
type CopyEnd struct {
	Logs    []CopiedLog // sorted by origin
	Deletes []Record    // records to delete (Table and Key)
}

// CopiedLog is one log a copy raises: its cursor and its floor become Position, and the
// entries it held (all below Position) are dropped. Name, when set, is kept as the
// origin's name (a log a copy made holds no entry that would have carried it).
type CopiedLog struct {
	Origin   wire.OriginID
	Position wire.CopyPosition
	Name     string
}

// Log is one origin's log as a store holds it: exactly the entries Floor.Seq+1 to the
// origin's cursor, some of them as runs held as skips (skip.go), so its hash chain verifies
// from Floor.Hash.
type Log struct {
	// Floor is the highest entry purged (the zero Floor while none is).
	Floor Floor
	// Below is the highest seq of the origin whose arrival position is at or below the
	// arrival floor (at least Floor.Seq): the entries Floor.Seq+1 to Below are kept in the
	// log (for a peer that holds them, or as the origin's head) but are no longer in the
	// arrival order; the arrival order holds the entries above Below. Runs held as skips
	// have no arrival position: a purge of runs above Below raises it to the new floor.
	Below uint64
	// Bytes is the size of the transaction encodings the log holds.
	Bytes uint64
}

// Floor is the highest entry purged from an origin's log: its seq, chain hash and HLC
// timestamp.
type Floor struct {
	Seq  uint64
	Hash wire.Hash
	HLC  wire.HLC
}

// Purge is one retention step. Each listed log loses its entries up to seq To: To is above
// the log's floor and below its cursor (an origin's head is never purged); a To inside a run
// held as a skip is lowered to the run's start (CheckPurge). The arrival
// order loses every position up to ArrivalFloor, which is not below the current one; every
// entry purged must have its arrival position at or below it, and the entries of those
// positions that stay in their logs become the logs' Below.
type Purge struct {
	Logs         []PurgeLog
	ArrivalFloor uint64
}

// PurgeLog is one log's part of a Purge.
type PurgeLog struct {
	Origin wire.OriginID
	To     uint64
}

// Hold is a peer's claim on one log: the peer has acknowledged (or advertises) the
// origin's entries up to Seq, and retention keeps the entries above it while the hold
// lasts. Origin zero is a version-1 peer's hold on the arrival order, Seq then being an
// arrival position. Since is when Seq last advanced, or when the hold was made: a hold
// that has not advanced for Config.RetainHold lapses.
type Hold struct {
	Peer   string
	Origin wire.OriginID
	Seq    uint64
	Since  time.Time
}

// Identity is a node's identity.
type Identity struct {
	Origin wire.OriginID
	Name   string
}

// Arrival is one log entry in arrival order.
type Arrival struct {
	Pos uint64
	Txn []byte // the transaction encoding
}

// Record is one record's current version. A deleted record is a tombstone: it keeps the
// version (token, HLC, origin) that deleted it, so that an older put arriving later loses.
// Token is the fencing token of the entry that wrote it (transaction format 2), zero for an
// untokened version.
type Record struct {
	Table   []byte
	Key     []byte
	Value   []byte
	Deleted bool
	HLC     wire.HLC
	Origin  wire.OriginID
	Token   wire.Token

	// Via and ViaHLC are the delivering identity of the entry that wrote this version, when
	// it is not the conflict identity: the hub origin and entry HLC of a re-originated leaf
	// write (transaction format 3, docs/design.md §27.1). Zero for every other version: the
	// entry's origin and HLC are then Origin and HLC. Via is this node's bookkeeping, not
	// the version: two nodes may hold one leaf write delivered by two hubs, so it takes no
	// part in Version, equality, digests or range hashes.
	Via    wire.OriginID
	ViaHLC wire.HLC
}

// Delivering is the origin and HLC of the log entry that wrote this version: Via and
// ViaHLC when set, else Origin and HLC.
func (r *Record) Delivering() (wire.OriginID, wire.HLC) {
	if r.Via.IsZero() {
		return r.Origin, r.HLC
	}
	return r.Via, r.ViaHLC
}

// LeafMark is a hub's index entry for one leaf (docs/design.md §27.3): the highest leaf seq
// re-originated in any format-3 entry this node applied, that leaf entry's chain hash, and
// the (origin, seq) of the entry that carried it.
type LeafMark struct {
	Leaf    wire.OriginID
	Seq     uint64
	Hash    wire.Hash
	Carrier wire.OriginID
	At      uint64
}

// Version is what orders a record's versions (NewerVersion): its token, HLC and origin.
func (r *Record) Version() Version { return Version{Token: r.Token, HLC: r.HLC, Origin: r.Origin} }

// Batch is one transaction to apply atomically, or, with Skip set, one run of an origin's
// entries this node was not sent (skip.go): then Seq is the run's last seq, Hash its chain
// hash, and Txn, Records and the peer cursor are empty.
type Batch struct {
	Origin  wire.OriginID
	Seq     uint64
	Hash    wire.Hash // chain hash of Txn: SHA-256 of the encoding
	Txn     []byte    // the transaction encoding: the log entry
	Records []Record  // record versions to write (the winners of last-writer-wins)
	Name    string    // when not empty: the origin's name, persisted with the entry
	Skip    *Skip     // when set: the batch is the run Skip.From to Seq

	// PeerCursor, when PeerOrigin is not zero, raises the version-1 cursor of that peer
	// (a lower value is ignored).
	PeerOrigin wire.OriginID
	PeerCursor uint64

	// Leaf, when set, sets the leaf's mark to it in the same write (a lower Seq is
	// ignored): a hub's exactly-once re-origination (docs/design.md §27.3).
	Leaf *LeafMark
}

// Store errors.
var (
	ErrNotFound = errors.New("store: not found")
	ErrNotNext  = errors.New("store: the entry is not the origin's next seq")
	ErrPurged   = errors.New("store: purged")
	ErrBadPurge = errors.New("store: a purge the logs do not allow")
	ErrBadCopy  = errors.New("store: a copy's end the logs do not allow")
	// ErrRecordDamaged marks a stored record a store cannot decode (a bad disk, a file
	// restored or edited around the store). Reading it is an error of the entries that
	// touch its key, not of the store: such an entry counts against its origin's retry
	// budget (retry.go) while the rest applies.
	ErrRecordDamaged = errors.New("store: a stored record is damaged")
	// A store reports a damaged record as a *DamagedRecordError, which wraps it.
	// ErrCannotApply marks a batch a store refuses for what the batch holds, while other
	// batches write: an error that belongs to one entry, counted like ErrRecordDamaged.
	ErrCannotApply = errors.New("store: the store cannot apply this entry")
)

// DamagedRecordError is a stored record a store cannot decode, named by its table and key:
// reads of it (Get, Scan) return it, and it wraps ErrRecordDamaged. Anti-entropy leaves the
// record out of its digests and writes a peer's version over it (antientropy.go).
type DamagedRecordError struct {
	Table, Key []byte
	Err        error // what is wrong with it, for humans
}

func (e *DamagedRecordError) Error() string {
	return fmt.Sprintf("table %q key %q: %v: %v", e.Table, e.Key, ErrRecordDamaged, e.Err)
}

func (e *DamagedRecordError) Unwrap() error { return ErrRecordDamaged }

// CheckBatch is the check every Store's Apply makes before it writes anything, against the
// origin's cursor: a non-zero origin; b.Seq is the cursor's seq + 1 (else ErrNotNext);
// b.Hash is SHA-256 of b.Txn, which parses and is the entry of b.Origin at b.Seq; and the
// transaction's previous hash is the cursor's hash (else ErrNotNext). The checks run in
// this order. A batch with a Skip is checked as a run instead (checkSkip, skip.go).
func CheckBatch(b *Batch, cursor vector.Entry) error {
	if b.Origin.IsZero() {
		return errorf("batch with an all-zero origin id")
	}
	if b.Skip != nil {
		if b.Leaf != nil {
			return errorf("batch of origin %s: a run held as a skip carries no leaf mark", b.Origin)
		}
		return checkSkip(b, cursor)
	}
	if b.Seq != cursor.Seq+1 {
		return fmt.Errorf("%w: origin %s seq %d, cursor at %d", ErrNotNext, b.Origin, b.Seq, cursor.Seq)
	}
	if b.Hash != sha256.Sum256(b.Txn) {
		return errorf("batch of origin %s seq %d: the batch hash is not SHA-256 of its transaction", b.Origin, b.Seq)
	}
	v, err := wire.ParseTxn(b.Txn)
	if err != nil {
		return errorf("batch of origin %s seq %d: %w", b.Origin, b.Seq, err)
	}
	if v.Origin != b.Origin || v.Seq != b.Seq {
		return errorf("batch of origin %s seq %d carries the transaction of origin %s seq %d", b.Origin, b.Seq, v.Origin, v.Seq)
	}
	if v.Prev != cursor.Hash {
		return fmt.Errorf("%w: origin %s seq %d follows hash %s, cursor hash is %s", ErrNotNext, b.Origin, b.Seq, v.Prev, cursor.Hash)
	}
	// A leaf mark is the leaf block of the format-3 entry written with it, carried at the
	// entry's own position (docs/design.md §27.8): any other mark would point a hub's
	// index at an entry that does not re-originate that leaf write.
	if b.Leaf != nil {
		l := &v.Leaf
		if v.Format() != wire.TxnFormat3 || *b.Leaf != (LeafMark{Leaf: l.Origin, Seq: l.Seq, Hash: l.Hash, Carrier: b.Origin, At: b.Seq}) {
			return errorf("batch of origin %s seq %d: its leaf mark is not its entry's leaf block at its position", b.Origin, b.Seq)
		}
	}
	return nil
}

// CheckLeafMark is the check of a mark PutLeafMark raises: a leaf that is not the all-zero
// origin id, at a leaf seq from 1.
func CheckLeafMark(m *LeafMark) error {
	if m.Leaf.IsZero() || m.Seq == 0 {
		return errorf("leaf mark of origin %s at seq %d: a leaf mark names a leaf and a seq from 1", m.Leaf, m.Seq)
	}
	return nil
}

// Version is one version of a record as the conflict order sees it: the fencing token of
// the entry that wrote it (zero: none), its HLC timestamp and its origin.
type Version struct {
	Token  wire.Token
	HLC    wire.HLC
	Origin wire.OriginID
}

// NewerVersion reports whether version a is strictly newer than b: the conflict order
// (docs/design.md §25.4), by (carries a token, token, HLC, origin). A tokened version beats
// every untokened one, a higher token a lower one, whatever their clocks say; otherwise it is
// last-writer-wins, by HLC time, then by origin id. It is total, and decided by what a
// record carries only, never by a node's map, so every node orders two versions alike.
func NewerVersion(a, b Version) bool {
	if at, bt := !a.Token.IsZero(), !b.Token.IsZero(); at != bt {
		return at
	}
	if c := a.Token.Compare(b.Token); c != 0 {
		return c > 0
	}
	if a.HLC != b.HLC {
		return a.HLC > b.HLC
	}
	return bytes.Compare(a.Origin[:], b.Origin[:]) > 0
}
