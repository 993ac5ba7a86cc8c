package store

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"

	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Reseed: the way out of an origin rewind (docs/design.md §20). The rewound node takes a
// new origin id; its old origin becomes an ordinary foreign origin whose log is cut back to
// its floor, so the old timeline streams in from the peers that hold it; and every entry of
// the old origin the node held above the floor is re-issued, in order, as an entry of the
// new origin with its original HLC, token and operations. Nothing is lost: an entry no peer holds
// reaches them under the new id, and one they hold arrives twice, which last-writer-wins
// absorbs. The node's records written by a re-issued entry (their version is the entry's
// HLC and the old origin) take the new origin into their version, so that they are what the
// re-issued entry makes them at every peer: the new id is chosen above the old one, so the
// re-issued version also supersedes the old one wherever a peer holds both.

// ErrBadReseed marks a reseed the store refuses (CheckReseed), writing nothing.
var ErrBadReseed = errors.New("store: a reseed the store does not allow")

// Reseed is one reseed to write atomically (Store.Reseed), planned by PlanReseed.
type Reseed struct {
	// Identity is the node's new identity: a new origin id, above the old one, the name
	// kept.
	Identity Identity
	// Old is the old origin id; Cut is its log's floor, where its log is cut back to.
	Old wire.OriginID
	Cut Floor
	// Entries are the new origin's entries, seqs 1 to n: the old origin's entries above
	// Cut re-issued, each with the records it rewrites (the node's records whose version
	// is the entry's HLC and the old origin, with the new origin).
	Entries []Batch
}

// ReseedView is what PlanReseed and CheckReseed read of a store.
type ReseedView struct {
	Identity Identity
	Cursors  vector.Vector
	Logs     map[wire.OriginID]Log
	// Copying: a base copy is in progress (Store.CopyState is not nil).
	Copying      bool
	ArrivalFloor uint64
	LastArrival  uint64
	Entry        func(origin wire.OriginID, seq uint64) ([]byte, error)
	Get          func(table, key []byte) (Record, bool, error)
}

// ReseedPlan is what a checked Reseed writes besides its entries: the old origin's entries
// From to To are dropped (none when To < From), its cursor becomes OldCursor, every log's
// state becomes Logs (the new origin's as its entries leave it), and the arrival floor
// rises to ArrivalFloor, the last arrival before the new entries (the dropped entries leave
// holes in the arrival order, so a version-1 peer below must take a base copy).
type ReseedPlan struct {
	From, To     uint64
	OldCursor    vector.Entry
	Logs         map[wire.OriginID]Log
	ArrivalFloor uint64
}

// PlanReseed plans the reseed of a store to the new origin id: see the file's comment.
// It reads every entry of the node's origin above its floor and the records they wrote.
func PlanReseed(v ReseedView, newOrigin wire.OriginID) (*Reseed, error) {
	old := v.Identity.Origin
	rs := &Reseed{Identity: Identity{Origin: newOrigin, Name: v.Identity.Name}, Old: old, Cut: v.Logs[old].Floor}
	if err := checkReseedIdentity(rs, v); err != nil {
		return nil, err
	}
	prev := wire.Hash{}
	head := v.Cursors.Get(old).Seq
	for seq := rs.Cut.Seq + 1; seq <= head; seq++ {
		raw, err := v.Entry(old, seq)
		if err != nil {
			return nil, errorf("reseed: entry %d of origin %s: %w", seq, old, err)
		}
		tv, err := wire.ParseTxn(raw)
		if err != nil {
			return nil, errorf("reseed: entry %d of origin %s: %w", seq, old, err)
		}
		// A format-2 entry is re-issued with its token: the token orders its versions, and
		// the record it rewrites keeps it. A format-3 entry (a leaf write this node, a hub,
		// re-originated) is re-issued with its leaf block unchanged: the leaf's HLC and
		// origin are its records' version (docs/design.md §27.8), which the reseed keeps;
		// only their delivering identity, the via, moves to the new origin.
		t := wire.Txn{Origin: newOrigin, Seq: uint64(len(rs.Entries)) + 1, HLC: tv.HLC, Prev: prev, Token: tv.Token}
		ver := Version{Token: tv.Token, HLC: tv.HLC, Origin: old}
		if tv.Format() == wire.TxnFormat3 {
			l := tv.Leaf
			t.Leaf = &l
			ver = Version{HLC: l.HLC, Origin: l.Origin}
		}
		b := Batch{Origin: newOrigin, Seq: t.Seq}
		it := tv.Ops()
		for op, ok := it.Next(); ok; op, ok = it.Next() {
			t.Ops = append(t.Ops, wire.Op{Kind: op.Kind, Table: bytes.Clone(op.Table), Key: bytes.Clone(op.Key), Value: bytes.Clone(op.Value)})
			rec, found, err := v.Get(op.Table, op.Key)
			if err != nil {
				return nil, err
			}
			// The record this entry wrote: its version, delivered by this entry (a record
			// of the same leaf write that another hub delivered first keeps that hub's via).
			if o, h := rec.Delivering(); !found || rec.Version() != ver || o != old || h != tv.HLC || rewrites(b.Records, rec) {
				continue
			}
			if t.Leaf != nil {
				rec.Via = newOrigin
			} else {
				rec.Origin = newOrigin
			}
			b.Records = append(b.Records, rec)
		}
		if b.Txn, err = t.Encode(); err != nil {
			return nil, errorf("reseed: re-issuing entry %d of origin %s: %w", seq, old, err)
		}
		b.Hash = sha256.Sum256(b.Txn)
		prev = b.Hash
		rs.Entries = append(rs.Entries, b)
	}
	return rs, nil
}

// rewrites reports whether recs holds the record of rec's table and key (a transaction
// that writes one key twice rewrites it once).
func rewrites(recs []Record, rec Record) bool {
	for _, r := range recs {
		if bytes.Equal(r.Table, rec.Table) && bytes.Equal(r.Key, rec.Key) {
			return true
		}
	}
	return false
}

// checkReseedIdentity checks the identities: the store is the old origin's, the new origin
// is not zero, is above the old one, and is no origin the store knows; no copy is in
// progress; the cut is the old log's floor.
func checkReseedIdentity(rs *Reseed, v ReseedView) error {
	n := rs.Identity.Origin
	switch {
	case rs.Old != v.Identity.Origin:
		return fmt.Errorf("%w: the store is origin %s's, not %s's", ErrBadReseed, v.Identity.Origin, rs.Old)
	case bytes.Compare(n[:], rs.Old[:]) <= 0:
		return fmt.Errorf("%w: the new origin %s is not above the old %s", ErrBadReseed, n, rs.Old)
	case v.Cursors.Has(n):
		return fmt.Errorf("%w: the new origin %s is one the store holds", ErrBadReseed, n)
	case !wire.ValidName(rs.Identity.Name):
		return fmt.Errorf("%w: the name %q is not a node name", ErrBadReseed, rs.Identity.Name)
	case v.Copying:
		return fmt.Errorf("%w: a base copy is in progress; let it end first", ErrBadReseed)
	case rs.Cut != v.Logs[rs.Old].Floor:
		return fmt.Errorf("%w: the cut is not the old log's floor", ErrBadReseed)
	}
	return nil
}

// CheckReseed is the check every Store's Reseed makes before it writes anything, and the
// plan of what it writes besides the entries: the identities (checkReseedIdentity), and
// entries of the new origin with seqs 1 to n, chained, each passing CheckBatch, without a
// name (the store writes the identity's) or a peer cursor, their records delivered by the
// entry that rewrites them (Record.Delivering: the new origin and the entry's HLC; a record
// of a format-3 entry keeps its leaf's origin and HLC, its via being the new origin). It
// refuses with an error wrapping ErrBadReseed.
func CheckReseed(rs *Reseed, v ReseedView) (*ReseedPlan, error) {
	if err := checkReseedIdentity(rs, v); err != nil {
		return nil, err
	}
	cur := vector.Entry{Origin: rs.Identity.Origin}
	logs := LogsAfterCopy(&CopyEndPlan{ArrivalFloor: v.LastArrival}, v.Logs, v.Cursors, v.ArrivalFloor)
	var l Log
	for i := range rs.Entries {
		b := &rs.Entries[i]
		if b.Origin != rs.Identity.Origin || !b.PeerOrigin.IsZero() || b.Name != "" {
			return nil, fmt.Errorf("%w: entry %d is not a plain entry of the new origin", ErrBadReseed, i+1)
		}
		if err := CheckBatch(b, cur); err != nil {
			return nil, fmt.Errorf("%w: entry %d: %w", ErrBadReseed, i+1, err)
		}
		tv, err := wire.ParseTxn(b.Txn) // CheckBatch parsed it
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d: %w", ErrBadReseed, i+1, err)
		}
		for _, r := range b.Records {
			if o, h := r.Delivering(); o != rs.Identity.Origin || h != tv.HLC {
				return nil, fmt.Errorf("%w: entry %d rewrites a record to be delivered by origin %s at %d, not by the entry", ErrBadReseed, i+1, o, h)
			}
			switch leaf := tv.Format() == wire.TxnFormat3; {
			case leaf && (r.Version() != Version{HLC: tv.Leaf.HLC, Origin: tv.Leaf.Origin}):
				return nil, fmt.Errorf("%w: entry %d rewrites a record of its leaf write to another version", ErrBadReseed, i+1)
			case !leaf && !r.Via.IsZero():
				return nil, fmt.Errorf("%w: entry %d rewrites a record to a via, and is no leaf write", ErrBadReseed, i+1)
			}
		}
		cur = vector.Entry{Origin: b.Origin, Seq: b.Seq, Hash: b.Hash}
		l.Bytes += uint64(len(b.Txn))
	}
	logs[rs.Old] = Log{Floor: rs.Cut, Below: rs.Cut.Seq}
	logs[rs.Identity.Origin] = l
	return &ReseedPlan{From: rs.Cut.Seq + 1, To: v.Cursors.Get(rs.Old).Seq,
		OldCursor: vector.Entry{Origin: rs.Old, Seq: rs.Cut.Seq, Hash: rs.Cut.Hash}, Logs: logs, ArrivalFloor: v.LastArrival}, nil
}

// ReseedStore plans the reseed of s to the new origin id and has s write it: what `plait
// reseed` runs on a stopped node's store, and the simulator on a memstore.
func ReseedStore(s Store, newOrigin wire.OriginID) (*Reseed, error) {
	v, err := ReseedViewOf(s)
	if err != nil {
		return nil, err
	}
	rs, err := PlanReseed(v, newOrigin)
	if err != nil {
		return nil, err
	}
	return rs, s.Reseed(rs)
}

// ReseedViewOf reads a store's ReseedView through its Store methods.
func ReseedViewOf(s Store) (ReseedView, error) {
	v := ReseedView{Entry: s.Entry, Get: s.Get}
	var err error
	if v.Identity, err = s.Identity(); err != nil {
		return v, err
	}
	if v.Cursors, err = s.Vector(); err != nil {
		return v, err
	}
	if v.Logs, err = s.Logs(); err != nil {
		return v, err
	}
	cs, err := s.CopyState()
	if err != nil {
		return v, err
	}
	v.Copying = cs != nil
	if v.ArrivalFloor, err = s.ArrivalFloor(); err != nil {
		return v, err
	}
	v.LastArrival, err = s.LastArrival()
	return v, err
}
