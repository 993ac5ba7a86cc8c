package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"strconv"
)

// Anti-entropy (SPEC.md, "Version 3", "Anti-entropy"): a node compares its records with a
// peer's one key range at a time. RANGEDIGEST gives the asker's digest of its records in a
// range (after, through] of (table, key) order; RANGERECORDS answers that the peer's digest
// is the same, or gives the peer's records in the range (or in its first part). Both are
// connection-level frames of version 3, sent only on a connection that negotiated
// CapAntiEntropy; each side has at most one range asked and not answered.

// CapAntiEntropy is the capability of a side that answers RANGEDIGEST frames. A build that
// implements version 3's anti-entropy offers it on every version-3 connection.
const CapAntiEntropy = "anti-entropy"

// Frame types of anti-entropy (the registry's repair block, 0x40-0x4F).
const (
	TypeRangeDigest  Type = 0x40 // asker: my digest of the records in a range
	TypeRangeRecords Type = 0x41 // answerer: equal, or my records in the range
)

// MaxRangeCount bounds the records a RANGEDIGEST may say it covers: an answerer reads at
// most one more than this to compare a range.
const MaxRangeCount = 4096

// RangePoint is one end of a range in (table, key) order: a table name and a key, or the
// zero point (no table): before the first record as an after, past the last as a through.
type RangePoint struct {
	Table []byte
	Key   []byte
}

// IsZero reports whether p is the zero point.
func (p RangePoint) IsZero() bool { return len(p.Table) == 0 }

// Compare orders two points as (table, key); the zero point is first (as an after).
func (p RangePoint) Compare(q RangePoint) int {
	if c := bytes.Compare(p.Table, q.Table); c != 0 {
		return c
	}
	return bytes.Compare(p.Key, q.Key)
}

// Equal reports whether two points are the same.
func (p RangePoint) Equal(q RangePoint) bool { return p.Compare(q) == 0 }

// InRange reports whether (table, key) lies in (after, through]; a zero through is the end.
func InRange(table, key []byte, after, through RangePoint) bool {
	at := RangePoint{Table: table, Key: key}
	if !after.IsZero() && at.Compare(after) <= 0 {
		return false
	}
	return through.IsZero() || at.Compare(through) <= 0
}

// RangeDigest is the RANGEDIGEST body: the asker holds Count records in (after, through]
// — after (AfterTable, AfterKey), the start when absent; through (ThroughTable,
// ThroughKey), the end when absent — whose digest (RangeHash) is Digest.
type RangeDigest struct {
	AfterTable   []byte `cbor:"1,keyasint,omitempty"`
	AfterKey     []byte `cbor:"2,keyasint,omitempty"`
	ThroughTable []byte `cbor:"3,keyasint,omitempty"`
	ThroughKey   []byte `cbor:"4,keyasint,omitempty"`
	Count        uint64 `cbor:"5,keyasint,omitempty"`
	Digest       Hash   `cbor:"6,keyasint"`
	Unknown
}

func (*RangeDigest) FrameType() Type { return TypeRangeDigest }

func (d *RangeDigest) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, d, d.Extra) }

// After is the range's lower end (exclusive).
func (d *RangeDigest) After() RangePoint { return RangePoint{Table: d.AfterTable, Key: d.AfterKey} }

// Through is the range's upper end (inclusive; zero: the end).
func (d *RangeDigest) Through() RangePoint {
	return RangePoint{Table: d.ThroughTable, Key: d.ThroughKey}
}

// Validate: each end is a valid table name and a key of 1 to MaxCopyKey bytes, both or
// neither; through is above after; Count is at most MaxRangeCount.
func (d *RangeDigest) Validate() error {
	if err := validPoint("after", d.AfterTable, d.AfterKey); err != nil {
		return err
	}
	if err := validPoint("through", d.ThroughTable, d.ThroughKey); err != nil {
		return err
	}
	if !d.Through().IsZero() && d.Through().Compare(d.After()) <= 0 {
		return badField("RANGEDIGEST through is not above its after")
	}
	if d.Count > MaxRangeCount {
		return badField("RANGEDIGEST count " + strconv.FormatUint(d.Count, 10) + " exceeds " + strconv.Itoa(MaxRangeCount))
	}
	return nil
}

func validPoint(what string, table, key []byte) error {
	switch {
	case (len(table) == 0) != (len(key) == 0):
		return badField("a RANGEDIGEST " + what + " point needs both a table and a key")
	case len(table) > 0 && !validNameBytes(table):
		return badField("RANGEDIGEST " + what + " table " + strconv.Quote(string(table)) + " is not a valid name")
	case len(key) > MaxCopyKey:
		return badField("RANGEDIGEST " + what + " key of " + strconv.Itoa(len(key)) + " bytes exceeds " + strconv.Itoa(MaxCopyKey))
	}
	return nil
}

// The RANGERECORDS body:
//
//	size  field
//	1     format   0x01
//	1     result   0x01 equal (no record follows), 0x02 records
//	var   table    the answer's through: varint length (0: the end) then the name
//	var   key      through only: varint length (1..MaxCopyKey) then the key
//	var   count    number of records
//	      records  count times:
//	1       kind   0x01 put, 0x02 tombstone
//	var     table  varint length (1..64) then the name
//	var     key    varint length (>= 1) then the key
//	8       hlc    the version's HLC timestamp
//	16      origin the version's origin, not all zero
//	var     value  put only: varint length then the value
//
// Records are strictly ascending in (table, key) and none is above the through; nothing
// follows the last record. The digest of a range (RangeHash) is SHA-256 of its records
// encoded as here (a tokened one as in format 2, a via block left out), one after another.
const RangeFormat1 = 0x01

// RangeFormat2 is format 1 whose records may carry a fencing token, as a CHUNK of format 2
// has them: a record's kind with the ChunkTokened bit is followed, after its origin, by the
// token's TokenSize bytes; a record without it is encoded as in format 1, so that an
// untokened record hashes into a digest exactly as before tokens. Only a version-4
// connection carries it, and an answer uses it only when a record carries a token.
const RangeFormat2 = 0x02

// RangeFormat3 is format 2 whose records may carry a via block, as a CHUNK of format 3 has
// them (the kind's ChunkVia bit, the via origin and HLC after the origin and the token if
// any). The via block is the record's delivering identity, this node's bookkeeping, not
// its version: RangeHash hashes every record without it (as format 2 encodes it), so that
// two nodes holding one leaf write delivered by two hubs have the same digest. Only a
// version-4 connection carries it, and an answer uses it only when a record has a via
// block.
const RangeFormat3 = 0x03

// Results of a RANGERECORDS.
const (
	RangeEqual   = 0x01
	RangeRecords = 0x02
)

// RangeRecord is one record version of a range; Token is zero for an untokened one.
type RangeRecord struct {
	Table   []byte
	Key     []byte
	Value   []byte
	Deleted bool
	HLC     HLC
	Origin  OriginID
	Token   Token
	// Via and ViaHLC are the record's delivering identity when it is not its conflict
	// identity (store.Record.Via: a re-originated leaf write), zero otherwise. They travel
	// outside what any hash covers (docs/design.md §27.1).
	Via    OriginID
	ViaHLC HLC
}

func badRange(msg string) error { return &codedError{CodeBadRange, msg} }

// AppendRangeRecord appends one record's encoding as RANGERECORDS has it: a tokened
// record's kind carries the ChunkTokened bit and its token follows the origin; a record
// with a via block carries the ChunkVia bit and the block follows (the token, then) the
// origin. RangeHash hashes a record without its via block (appendRangeRecord's hashed form).
func AppendRangeRecord(dst []byte, r *RangeRecord) []byte { return appendRangeRecord(dst, r, true) }

func appendRangeRecord(dst []byte, r *RangeRecord, withVia bool) []byte {
	var via OriginID
	if withVia {
		via = r.Via
	}
	dst = append(dst, recordKind(r.Deleted, r.Token, via))
	dst = appendBytes(dst, r.Table)
	dst = appendBytes(dst, r.Key)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.HLC))
	dst = append(dst, r.Origin[:]...)
	if !r.Token.IsZero() {
		dst = AppendToken(dst, r.Token)
	}
	if !via.IsZero() {
		dst = appendVia(dst, via, r.ViaHLC)
	}
	if !r.Deleted {
		dst = appendBytes(dst, r.Value)
	}
	return dst
}

// RangeRecordSize is the encoded size of a record in a RANGERECORDS body.
func RangeRecordSize(r *RangeRecord) int {
	n := 1 + uvarintLen(uint64(len(r.Table))) + len(r.Table) + uvarintLen(uint64(len(r.Key))) + len(r.Key) + 8 + 16
	if !r.Token.IsZero() {
		n += TokenSize
	}
	if !r.Via.IsZero() {
		n += ViaBlockSize
	}
	if !r.Deleted {
		n += uvarintLen(uint64(len(r.Value))) + len(r.Value)
	}
	return n
}

// RangeHeaderSize is the size of a RANGERECORDS header for a through and count records.
func RangeHeaderSize(through RangePoint, count int) int {
	n := 2 + uvarintLen(uint64(len(through.Table))) + len(through.Table) + uvarintLen(uint64(count))
	if !through.IsZero() {
		n += uvarintLen(uint64(len(through.Key))) + len(through.Key)
	}
	return n
}

// RangeHash computes a range's digest: feed it the range's records in order.
type RangeHash struct {
	sum   hash.Hash
	buf   []byte
	Count uint64 // records added
}

// NewRangeHash starts a digest.
func NewRangeHash() *RangeHash { return &RangeHash{sum: sha256.New()} }

// Add takes in the next record, without its via block: the via block is not the version
// (docs/design.md §27.1).
func (d *RangeHash) Add(r *RangeRecord) {
	d.buf = appendRangeRecord(d.buf[:0], r, false)
	_, _ = d.sum.Write(d.buf)
	d.Count++
}

// Sum is the digest of the records added.
func (d *RangeHash) Sum() Hash {
	var h Hash
	d.sum.Sum(h[:0])
	return h
}

// AppendRangeRecords appends a RANGERECORDS body: equal (records then empty), or records
// ascending up to through (zero: the end); of format 3 when a record has a via block, else
// of format 2 when a record carries a token, 1 otherwise. It checks what a receiver checks.
func AppendRangeRecords(dst []byte, equal bool, through RangePoint, records []RangeRecord) ([]byte, error) {
	if equal && len(records) > 0 {
		return dst, badRange("an equal answer with records")
	}
	if err := validThrough(through); err != nil {
		return dst, err
	}
	result := byte(RangeRecords)
	if equal {
		result = RangeEqual
	}
	format := byte(RangeFormat1)
	for i := range records {
		r := &records[i]
		if !r.Token.IsZero() {
			format = max(format, RangeFormat2)
			if why := checkToken(r.Token); why != "" {
				return dst, badRange(why)
			}
		}
		if !r.Via.IsZero() {
			format = RangeFormat3
			if why := checkVia(r.Origin, r.HLC, r.Token, r.Via, r.ViaHLC); why != "" {
				return dst, badRange(why)
			}
		}
	}
	dst = append(dst, format, result)
	dst = appendBytes(dst, through.Table)
	if !through.IsZero() {
		dst = appendBytes(dst, through.Key)
	}
	dst = binary.AppendUvarint(dst, uint64(len(records)))
	for i := range records {
		r := &records[i]
		if err := checkRangeRecord(r, records, i, through); err != nil {
			return dst, err
		}
		dst = AppendRangeRecord(dst, r)
	}
	return dst, nil
}

func validThrough(p RangePoint) error {
	switch {
	case p.IsZero() && len(p.Key) > 0:
		return badRange("a through key without a table")
	case !p.IsZero() && !validNameBytes(p.Table):
		return badRange("through table " + strconv.Quote(string(p.Table)) + " is not a valid name")
	case !p.IsZero() && (len(p.Key) == 0 || len(p.Key) > MaxCopyKey):
		return badRange("a through key of " + strconv.Itoa(len(p.Key)) + " bytes; it is 1 to " + strconv.Itoa(MaxCopyKey))
	}
	return nil
}

func checkRangeRecord(r *RangeRecord, all []RangeRecord, i int, through RangePoint) error {
	at := RangePoint{Table: r.Table, Key: r.Key}
	switch {
	case !validNameBytes(r.Table):
		return badRange("record table " + strconv.Quote(string(r.Table)) + " is not a valid name")
	case len(r.Key) == 0 || r.Origin.IsZero():
		return badRange("a record needs a key and a non-zero origin")
	case i > 0 && (RangePoint{Table: all[i-1].Table, Key: all[i-1].Key}).Compare(at) >= 0:
		return badRange("records are not strictly ascending")
	case !through.IsZero() && at.Compare(through) > 0:
		return badRange("a record above the answer's through")
	}
	return nil
}

// RangeView is a checked RANGERECORDS body; its slices alias the body.
type RangeView struct {
	Format  byte // RangeFormat1, RangeFormat2 (its records may carry tokens) or RangeFormat3 (and via blocks)
	Equal   bool
	Through RangePoint
	Records []RangeRecord
	raw     []byte
}

// Raw returns the body the view reads.
func (v *RangeView) Raw() []byte { return v.raw }

// ParseRangeRecords checks a RANGERECORDS body completely: format, result, through, every
// record well formed, ascending and not above the through, nothing after the last. Its
// errors have the code bad-range.
func ParseRangeRecords(b []byte) (RangeView, error) {
	if len(b) < 2 {
		return RangeView{}, badRange("a RANGERECORDS body of " + strconv.Itoa(len(b)) + " bytes")
	}
	if b[0] < RangeFormat1 || b[0] > RangeFormat3 {
		return RangeView{}, badRange("range format 0x" + strconv.FormatUint(uint64(b[0]), 16) + "; this build knows formats 1 to 3")
	}
	if b[1] != RangeEqual && b[1] != RangeRecords {
		return RangeView{}, badRange("range result 0x" + strconv.FormatUint(uint64(b[1]), 16) + " is neither equal nor records")
	}
	v := RangeView{Format: b[0], Equal: b[1] == RangeEqual, raw: b}
	off := 2
	var err error
	if v.Through.Table, err = readRangeBytes(b, &off, "through table"); err != nil {
		return RangeView{}, err
	}
	if v.Through.IsZero() {
		v.Through.Table = nil
	} else {
		if v.Through.Key, err = readRangeBytes(b, &off, "through key"); err != nil {
			return RangeView{}, err
		}
	}
	if err := validThrough(v.Through); err != nil {
		return RangeView{}, err
	}
	n, err := readUvarint(b, &off, "record count", "")
	if err != nil {
		return RangeView{}, badRange(err.Error())
	}
	// Every record takes at least its kind, table, key, HLC and origin.
	const minRecord = 1 + 2 + 2 + 8 + 16
	if n > uint64(len(b)-off)/minRecord || v.Equal && n > 0 {
		return RangeView{}, badRange("record count " + strconv.FormatUint(n, 10) + " does not fit the answer")
	}
	v.Records = make([]RangeRecord, 0, n)
	for range n {
		if off >= len(b) {
			return RangeView{}, badRange("a record is missing")
		}
		var r RangeRecord
		kind := b[off]
		off++
		tokened := b[0] >= RangeFormat2 && kind&ChunkTokened != 0
		if tokened {
			kind &^= ChunkTokened
		}
		via := b[0] == RangeFormat3 && kind&ChunkVia != 0
		if via {
			kind &^= ChunkVia
		}
		if kind != ChunkPut && kind != ChunkTombstone {
			return RangeView{}, badRange("record kind 0x" + strconv.FormatUint(uint64(b[off-1]), 16) + " is neither put nor tombstone")
		}
		r.Deleted = kind == ChunkTombstone
		if r.Table, err = readRangeBytes(b, &off, "table"); err != nil {
			return RangeView{}, err
		}
		if r.Key, err = readRangeBytes(b, &off, "key"); err != nil {
			return RangeView{}, err
		}
		if len(b)-off < 24 {
			return RangeView{}, badRange("a record's version runs past the end")
		}
		r.HLC = HLC(binary.BigEndian.Uint64(b[off:]))
		copy(r.Origin[:], b[off+8:off+24])
		off += 24
		if tokened {
			if len(b)-off < TokenSize {
				return RangeView{}, badRange("a record's token runs past the end")
			}
			r.Token = readToken(b[off:])
			off += TokenSize
			if why := checkToken(r.Token); why != "" {
				return RangeView{}, badRange(why)
			}
		}
		if via {
			if len(b)-off < ViaBlockSize {
				return RangeView{}, badRange("a record's via block runs past the end")
			}
			r.Via, r.ViaHLC = readVia(b[off:])
			off += ViaBlockSize
			if why := checkVia(r.Origin, r.HLC, r.Token, r.Via, r.ViaHLC); why != "" {
				return RangeView{}, badRange(why)
			}
		}
		if !r.Deleted {
			if r.Value, err = readRangeBytes(b, &off, "value"); err != nil {
				return RangeView{}, err
			}
		}
		v.Records = append(v.Records, r)
		if err := checkRangeRecord(&v.Records[len(v.Records)-1], v.Records, len(v.Records)-1, v.Through); err != nil {
			return RangeView{}, err
		}
	}
	if off != len(b) {
		return RangeView{}, badRange(strconv.Itoa(len(b)-off) + " bytes follow the last record")
	}
	switch {
	case v.Format == RangeFormat2 && !anyRangeToken(v.Records):
		// One answer has one encoding: format 2 is for an answer with a tokened record,
		// as AppendRangeRecords writes it.
		return RangeView{}, badRange("range format 2 with no tokened record")
	case v.Format == RangeFormat3 && !anyRangeVia(v.Records):
		// And format 3 for an answer with a record that has a via block.
		return RangeView{}, badRange("range format 3 with no via record")
	}
	return v, nil
}

func anyRangeVia(rs []RangeRecord) bool {
	for i := range rs {
		if !rs[i].Via.IsZero() {
			return true
		}
	}
	return false
}

func anyRangeToken(rs []RangeRecord) bool {
	for i := range rs {
		if !rs[i].Token.IsZero() {
			return true
		}
	}
	return false
}

func readRangeBytes(b []byte, off *int, what string) ([]byte, error) {
	if *off >= len(b) {
		return nil, badRange("the " + what + " is missing")
	}
	s, err := readBytes(b, off, what)
	if err != nil {
		return nil, badRange(err.Error())
	}
	return s, nil
}

// RangeAnswer is a decoded RANGERECORDS body (for tools and tests; the session reads it in
// place).
type RangeAnswer struct {
	Equal   bool
	Through RangePoint
	Records []RangeRecord
}

func (*RangeAnswer) FrameType() Type { return TypeRangeRecords }

func (a *RangeAnswer) AppendBody(dst []byte) ([]byte, error) {
	return AppendRangeRecords(dst, a.Equal, a.Through, a.Records)
}

func init() {
	register(TypeRangeDigest, typeInfo{name: "RANGEDIGEST", maxBody: MaxControlBody, version: 3,
		decode: decodeControl[RangeDigest](6, (*RangeDigest).Validate, 6)})
	register(TypeRangeRecords, typeInfo{name: "RANGERECORDS", version: 3,
		decode: func(b []byte) (Body, error) {
			v, err := ParseRangeRecords(b)
			if err != nil {
				return nil, err
			}
			a := &RangeAnswer{Equal: v.Equal, Through: RangePoint{Table: bytes.Clone(v.Through.Table), Key: bytes.Clone(v.Through.Key)}}
			for _, r := range v.Records {
				r.Table, r.Key, r.Value = bytes.Clone(r.Table), bytes.Clone(r.Key), bytes.Clone(r.Value)
				a.Records = append(a.Records, r)
			}
			return a, nil
		}})
}

// DecodeRangeDigest decodes and checks a RANGEDIGEST body.
func DecodeRangeDigest(body []byte) (*RangeDigest, error) {
	b, err := registry[TypeRangeDigest].decode(body)
	if err != nil {
		return nil, err
	}
	return b.(*RangeDigest), nil
}
