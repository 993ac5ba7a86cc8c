package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Skip runs (docs/design.md §24.2): a node sent part of an origin's log stores each run of
// entries it was not sent as one log row, at the run's last seq. Seqs stay contiguous and
// the chain is checked at both ends of the run: its Prev joins the log's previous entry,
// and its Hash is what the next entry's previous hash must be. A store holds nothing of the
// entries inside a run, so a seq inside it reads as the whole run (SkippedError).

// MaxSkipTables bounds the placed tables one run names: the bound of a SKIP frame's table
// list (docs/design.md §24.2), which a sender ends a run at.
const MaxSkipTables = 64

// Skip makes a Batch a run of left-out entries: From to the batch's Seq, the batch's Hash
// being the chain hash of entry Seq.
type Skip struct {
	From       uint64    // the run's first seq: the origin's cursor + 1
	Prev       wire.Hash // the chain hash of entry From-1: the cursor's hash
	Tables     [][]byte  // the placed tables the run's entries write, strictly ascending
	Generation uint64    // the map generation the sender judged under (0: none)
	HLC        wire.HLC  // the HLC of entry Seq, at least 1
}

// ErrSkipped marks a seq inside a run this store holds as a skip: Entry answers a
// *SkippedError, which wraps it.
var ErrSkipped = errors.New("store: the entry is inside a skipped run")

// SkippedError is a run of one origin's log that a store holds as a skip: Entry's answer
// for any seq From to To of it.
type SkippedError struct {
	Origin     wire.OriginID
	From, To   uint64
	Prev, Hash wire.Hash // the chain hashes of entries From-1 and To
	HLC        wire.HLC  // the HLC of entry To
	Tables     [][]byte
	Generation uint64
}

func (e *SkippedError) Error() string {
	return fmt.Sprintf("origin %s seqs %d to %d: %v", e.Origin, e.From, e.To, ErrSkipped)
}

func (e *SkippedError) Unwrap() error { return ErrSkipped }

// SkippedOf is the run a checked Skip batch writes, its slices the store's own copies.
func SkippedOf(b *Batch) *SkippedError {
	e := &SkippedError{Origin: b.Origin, From: b.Skip.From, To: b.Seq, Prev: b.Skip.Prev, Hash: b.Hash,
		HLC: b.Skip.HLC, Generation: b.Skip.Generation}
	for _, t := range b.Skip.Tables {
		e.Tables = append(e.Tables, bytes.Clone(t))
	}
	return e
}

// skipRowMark is the first byte of a run's log row. Transaction format 0 is refused by
// every build (wire.ParseTxn), so no log entry ever starts with it.
const skipRowMark = 0x00

// skipRowFixed is the size of a run row before its tables: mark, from, to, prev, hash, HLC,
// generation.
const skipRowFixed = 1 + 8 + 8 + 32 + 32 + 8 + 8

// AppendSkipRow appends the log row a store keeps for run e: 0x00 | from (8) | to (8) |
// prev (32) | hash (32) | HLC (8) | generation (8) | uvarint(count) then
// uvarint(len(table)) table per table. Its length is what the run adds to its log's Bytes,
// in every store.
func AppendSkipRow(dst []byte, e *SkippedError) []byte {
	dst = append(dst, skipRowMark)
	dst = binary.BigEndian.AppendUint64(dst, e.From)
	dst = binary.BigEndian.AppendUint64(dst, e.To)
	dst = append(dst, e.Prev[:]...)
	dst = append(dst, e.Hash[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.HLC))
	dst = binary.BigEndian.AppendUint64(dst, e.Generation)
	dst = binary.AppendUvarint(dst, uint64(len(e.Tables)))
	for _, t := range e.Tables {
		dst = binary.AppendUvarint(dst, uint64(len(t)))
		dst = append(dst, t...)
	}
	return dst
}

// IsSkipRow reports whether a stored log row is a run's (AppendSkipRow) rather than a
// transaction encoding.
func IsSkipRow(row []byte) bool { return len(row) > 0 && row[0] == skipRowMark }

// ParseSkipRow decodes a run's log row of origin (AppendSkipRow), refusing one that does not
// decode or breaks a run's rules (checkSkipFields).
func ParseSkipRow(origin wire.OriginID, row []byte) (*SkippedError, error) {
	if len(row) < skipRowFixed+1 || row[0] != skipRowMark {
		return nil, errorf("origin %s: a skip row of %d bytes that does not decode", origin, len(row))
	}
	e := &SkippedError{Origin: origin, From: binary.BigEndian.Uint64(row[1:]), To: binary.BigEndian.Uint64(row[9:])}
	copy(e.Prev[:], row[17:49])
	copy(e.Hash[:], row[49:81])
	e.HLC = wire.HLC(binary.BigEndian.Uint64(row[81:]))
	e.Generation = binary.BigEndian.Uint64(row[89:])
	rest := row[skipRowFixed:]
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > MaxSkipTables {
		return nil, errorf("origin %s: the skip row of seqs %d to %d has a bad table count", origin, e.From, e.To)
	}
	rest = rest[k:]
	for range n {
		l, k := binary.Uvarint(rest)
		if k <= 0 || l > uint64(len(rest)-k) {
			return nil, errorf("origin %s: the skip row of seqs %d to %d has a table that does not fit", origin, e.From, e.To)
		}
		e.Tables = append(e.Tables, bytes.Clone(rest[k:k+int(l)]))
		rest = rest[k+int(l):]
	}
	if len(rest) != 0 {
		return nil, errorf("origin %s: the skip row of seqs %d to %d has %d bytes after its tables", origin, e.From, e.To, len(rest))
	}
	if err := checkSkipFields(e); err != nil {
		return nil, err
	}
	return e, nil
}

// checkSkipFields is the rule of a run by itself: From at least 1 and not above To, its
// previous hash zero exactly when From is 1, a non-zero hash and HLC, and at most
// MaxSkipTables tables, valid names, strictly ascending.
func checkSkipFields(e *SkippedError) error {
	bad := func(format string, args ...any) error {
		return errorf("origin %s: run %d to %d: "+format, append([]any{e.Origin, e.From, e.To}, args...)...)
	}
	switch {
	case e.From == 0 || e.From > e.To:
		return bad("not a run of seqs")
	case (e.From == 1) != (e.Prev == wire.Hash{}):
		return bad("its previous hash is zero exactly when it does not start at seq 1")
	case e.Hash == wire.Hash{}:
		return bad("no chain hash")
	case e.HLC == 0:
		return bad("HLC 0")
	case len(e.Tables) > MaxSkipTables:
		return bad("%d tables, more than %d", len(e.Tables), MaxSkipTables)
	}
	for i, t := range e.Tables {
		if !wire.ValidName(string(t)) {
			return bad("table %q is not 1-64 bytes of [A-Za-z0-9_.-]", t)
		}
		if i > 0 && bytes.Compare(e.Tables[i-1], t) >= 0 {
			return bad("tables not strictly ascending at %q", t)
		}
	}
	return nil
}

// checkSkip is CheckBatch for a batch with a Skip: no transaction, records or peer cursor;
// b.Skip.From is the cursor's seq + 1 (else ErrNotNext); the run's own rule
// (checkSkipFields); and b.Skip.Prev is the cursor's hash (else ErrNotNext). The checks run
// in this order.
func checkSkip(b *Batch, cursor vector.Entry) error {
	sk := b.Skip
	switch {
	case len(b.Txn) != 0 || len(b.Records) != 0 || !b.PeerOrigin.IsZero():
		return errorf("skip batch of origin %s seq %d carries a transaction, records or a peer cursor", b.Origin, b.Seq)
	case sk.From != cursor.Seq+1:
		return fmt.Errorf("%w: origin %s run from %d, cursor at %d", ErrNotNext, b.Origin, sk.From, cursor.Seq)
	}
	e := &SkippedError{Origin: b.Origin, From: sk.From, To: b.Seq, Prev: sk.Prev, Hash: b.Hash, HLC: sk.HLC,
		Tables: sk.Tables, Generation: sk.Generation}
	if err := checkSkipFields(e); err != nil {
		return err
	}
	if sk.Prev != cursor.Hash {
		return fmt.Errorf("%w: origin %s run from %d follows hash %s, cursor hash is %s", ErrNotNext, b.Origin, sk.From, sk.Prev, cursor.Hash)
	}
	return nil
}

// Extend is the run that run prev followed by run next makes, when the two are adjacent
// (next starts right after prev) and their tables together stay within MaxSkipTables: a
// store keeps adjacent runs as one row, so that an origin whose entries a node is not sent
// costs it one row per stretch of them, however many SKIPs brought it (a receiver that is
// level with its source is sent one run per entry). ok is false when they cannot be one.
func Extend(prev, next *SkippedError) (run *SkippedError, ok bool) {
	if prev == nil || prev.Origin != next.Origin || prev.To+1 != next.From {
		return nil, false
	}
	tables := slices.Clone(prev.Tables)
	for _, t := range next.Tables {
		if i, found := slices.BinarySearchFunc(tables, t, bytes.Compare); !found {
			tables = slices.Insert(tables, i, t)
		}
	}
	if len(tables) > MaxSkipTables {
		return nil, false
	}
	return &SkippedError{Origin: next.Origin, From: prev.From, To: next.To, Prev: prev.Prev, Hash: next.Hash,
		HLC: next.HLC, Tables: tables, Generation: max(prev.Generation, next.Generation)}, true
}
