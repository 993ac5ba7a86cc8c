package wire

import (
	"bytes"
	"encoding/binary"
	"strconv"
)

// The base copy (SPEC.md, "Version 3", "The base copy"): a subscriber that cannot be served
// from its position by any log asks a peer for a copy of its records. The copy is a channel
// in the subscriber's numbering: COPY opens it, COPYBEGIN gives the cursor vector the
// sender's snapshot covers, CHUNK frames carry the records in (table, key) order under the
// channel's credit, COPYEND closes it complete and COPYABORT closes it early, from either
// side.

// Frame types of the base copy.
const (
	TypeCopy      Type = 0x31 // subscriber: copy your records, after a point
	TypeCopyBegin Type = 0x32 // sender: the vector the copy's snapshot covers
	TypeChunk     Type = 0x33 // sender: records in (table, key) order, channel-scoped
	TypeCopyEnd   Type = 0x34 // sender: the snapshot was copied whole
	TypeCopyAbort Type = 0x35 // either side: the copy stops early, with a code
)

// MaxCopyKey bounds the key of a COPY's resume point, so that the body stays a control
// body. A subscriber whose last copied key is longer resumes after its first MaxCopyKey
// bytes: the records between are copied again, which a merge makes harmless.
const MaxCopyKey = 32 << 10

// Copy is the COPY body: open copy channel Channel with Credit as its first limit, and copy
// every record after (Table, Key) in (table, key) order; without a point, from the first.
type Copy struct {
	Channel uint32 `cbor:"1,keyasint"`
	Credit  uint64 `cbor:"2,keyasint,omitempty"`
	Table   []byte `cbor:"3,keyasint,omitempty"`
	Key     []byte `cbor:"4,keyasint,omitempty"`
	Unknown
}

func (*Copy) FrameType() Type { return TypeCopy }

func (c *Copy) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, c, c.Extra) }

// Validate: a channel above 0; a resume point is a table name and a key of 1 to MaxCopyKey
// bytes, both or neither.
func (c *Copy) Validate() error {
	switch {
	case c.Channel == 0:
		return badField("COPY on channel 0")
	case (len(c.Table) == 0) != (len(c.Key) == 0):
		return badField("a COPY resume point needs both a table and a key")
	case len(c.Table) > 0 && !validNameBytes(c.Table):
		return badField("COPY resume table " + strconv.Quote(string(c.Table)) + " is not a valid name")
	case len(c.Key) > MaxCopyKey:
		return badField("COPY resume key of " + strconv.Itoa(len(c.Key)) + " bytes exceeds " + strconv.Itoa(MaxCopyKey))
	}
	return nil
}

// CopyPosition is one origin of the vector a copy's snapshot covers: the sender had applied
// the origin up to Seq, whose chain hash is Hash and HLC timestamp HLC.
type CopyPosition struct {
	_      struct{} `cbor:",toarray"`
	Origin OriginID
	Seq    uint64
	Hash   Hash
	HLC    HLC
}

// CopyBegin is the COPYBEGIN body: part of the vector the copy's snapshot covers (a vector
// longer than one frame's list goes in several, ascending by origin across them); empty for
// a sender that holds nothing. The first frame may say how large the snapshot is, for
// progress: its tables, and estimates of its records and their bytes.
type CopyBegin struct {
	Channel   uint32         `cbor:"1,keyasint"`
	Positions []CopyPosition `cbor:"2,keyasint,omitempty"`
	Tables    uint64         `cbor:"3,keyasint,omitempty"`
	Records   uint64         `cbor:"4,keyasint,omitempty"`
	Bytes     uint64         `cbor:"5,keyasint,omitempty"`
	Unknown
}

func (*CopyBegin) FrameType() Type { return TypeCopyBegin }

func (b *CopyBegin) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, b, b.Extra) }

// Validate: a channel above 0; positions strictly ascending by origin, at seq >= 1 with a
// chain hash.
func (b *CopyBegin) Validate() error {
	if b.Channel == 0 {
		return badField("COPYBEGIN on channel 0")
	}
	for i, p := range b.Positions {
		if p.Origin.IsZero() || p.Seq == 0 || p.Hash == (Hash{}) {
			return badField("a copy position needs a non-zero origin, seq >= 1 and its chain hash")
		}
		if i > 0 && bytes.Compare(b.Positions[i-1].Origin[:], p.Origin[:]) >= 0 {
			return badField("copy positions are not strictly ascending by origin")
		}
	}
	return nil
}

// CopyEnd is the COPYEND body: the sender copied its snapshot whole, Records records in all
// on the channel, which is closed.
type CopyEnd struct {
	Channel uint32 `cbor:"1,keyasint"`
	Records uint64 `cbor:"2,keyasint,omitempty"`
	Unknown
}

func (*CopyEnd) FrameType() Type { return TypeCopyEnd }

func (e *CopyEnd) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, e, e.Extra) }

// Validate: a channel above 0.
func (e *CopyEnd) Validate() error {
	if e.Channel == 0 {
		return badField("COPYEND on channel 0")
	}
	return nil
}

// CopyAbort is the COPYABORT body: the copy channel stops before its end, for the reason
// Code (of class Class). Side says who reports, as in DIVERGENCE: SideSubscriber, the copy's
// receiver (the channel is one the peer sends on); SideSender, its sender.
type CopyAbort struct {
	Channel uint32 `cbor:"1,keyasint"`
	Side    uint8  `cbor:"2,keyasint,omitempty"`
	Code    Code   `cbor:"3,keyasint"`
	Class   Class  `cbor:"4,keyasint"`
	Message string `cbor:"5,keyasint,omitempty"`
	Unknown
}

func (*CopyAbort) FrameType() Type { return TypeCopyAbort }

func (a *CopyAbort) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, a, a.Extra) }

// Validate: a channel above 0, a known side, a code and class as CLOSE has them.
func (a *CopyAbort) Validate() error {
	switch {
	case a.Channel == 0:
		return badField("COPYABORT on channel 0")
	case a.Side > SideSender:
		return badField("COPYABORT side " + strconv.Itoa(int(a.Side)) + " is neither 0 (subscriber) nor 1 (sender)")
	case !token(string(a.Code)) || !token(string(a.Class)):
		return badField("COPYABORT code and class are 1-64 bytes of [a-z0-9-]")
	case len(a.Message) > MaxCloseText:
		return badField("COPYABORT message of " + strconv.Itoa(len(a.Message)) + " bytes exceeds 1024")
	}
	return nil
}

// The CHUNK body: one table's records in key order.
//
//	size  field
//	1     format   0x01
//	var   table    varint length (1..64) then the name
//	var   count    number of records, >= 1
//	      records  count times:
//	1       kind   0x01 put, 0x02 tombstone
//	var     key    varint length (>= 1) then the key
//	8       hlc    the version's HLC timestamp
//	16      origin the version's origin (the writer), not all zero
//	var     value  put only: varint length then the value
//
// Keys are strictly ascending; nothing follows the last record. Formats 2 and 3 add blocks
// after the origin: a token (ChunkTokened), a via block (ChunkVia).
const ChunkFormat1 = 0x01

// ChunkFormat2 is format 1 whose records may carry a fencing token (docs/design.md §25.4):
// a record's kind with the ChunkTokened bit is followed, after its origin, by the token's
// TokenSize bytes (generation and home not zero). A record without the bit is encoded as in
// format 1. Only a version-4 connection carries it, and a sender uses it only for a chunk
// that holds a tokened record.
const ChunkFormat2 = 0x02

// ChunkFormat3 is format 2 whose records may carry a via block (docs/design.md §27.1): a
// record's kind with the ChunkVia bit is followed, after its origin and its token if any,
// by the via origin (16 bytes) and the via HLC (8), the delivering identity of a leaf write
// a hub re-originated. A record without the bit is encoded as in format 2. Only a
// version-4 connection carries it, and a sender uses it only for a chunk that holds a
// record with a via block.
const ChunkFormat3 = 0x03

// Record kinds of a CHUNK.
const (
	ChunkPut       = 0x01
	ChunkTombstone = 0x02
	// ChunkTokened, or-ed into a record's kind in a CHUNK or RANGERECORDS of format 2 or 3:
	// the record carries a token.
	ChunkTokened = 0x80
	// ChunkVia, or-ed into a record's kind in a CHUNK or RANGERECORDS of format 3: a via
	// block (ViaBlockSize bytes) follows the record's version.
	ChunkVia = 0x40
)

// ViaBlockSize is the size of a chunk or range record's via block: via origin, via HLC.
const ViaBlockSize = 16 + 8

// checkVia holds a record's via block to its rules: a via origin that is not zero and not
// the record's origin, a via HLC above the record's (a hub's entry HLC is above the leaf's:
// docs/design.md §27.2), and no token (a leaf takes no locks).
func checkVia(origin OriginID, hlc HLC, tok Token, via OriginID, viaHLC HLC) string {
	switch {
	case via.IsZero():
		return "a via block with an all-zero origin"
	case via == origin:
		return "a via origin that is the record's origin"
	case viaHLC <= hlc:
		return "a via HLC that is not above the record's"
	case !tok.IsZero():
		return "a record with both a token and a via block"
	}
	return ""
}

func appendVia(dst []byte, via OriginID, viaHLC HLC) []byte {
	dst = append(dst, via[:]...)
	return binary.BigEndian.AppendUint64(dst, uint64(viaHLC))
}

// CopyRecord is one record version in a CHUNK: a put (Value) or a tombstone (Deleted),
// with the version (Token, HLC, Origin) that wrote it; Token is zero for an untokened one.
type CopyRecord struct {
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

// codedError is a binary body that breaks its rules, with its code: a CHUNK's bad-chunk,
// a RANGERECORDS's bad-range.
type codedError struct {
	code Code
	msg  string
}

func (e *codedError) Error() string { return e.msg }
func (e *codedError) Code() Code    { return e.code }

func badChunk(msg string) error { return &codedError{CodeBadChunk, msg} }

// ChunkSize is the encoded size of a record in a CHUNK body.
func ChunkSize(r *CopyRecord) int {
	n := 1 + uvarintLen(uint64(len(r.Key))) + len(r.Key) + 8 + 16
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

// ChunkHeaderSize is the size of a CHUNK body's header for a table of n bytes and count
// records.
func ChunkHeaderSize(table []byte, count int) int {
	return 1 + uvarintLen(uint64(len(table))) + len(table) + uvarintLen(uint64(count))
}

// AppendChunk appends the CHUNK body of table's records to dst: format 3 when a record
// carries a via block (Via set), else format 2 when a record carries a token, format 1
// otherwise. It checks what a receiver checks, so that this side never sends a chunk its
// peer must refuse.
func AppendChunk(dst []byte, table []byte, records []CopyRecord) ([]byte, error) {
	if !validNameBytes(table) {
		return dst, badChunk("table " + strconv.Quote(string(table)) + " is not a valid name")
	}
	if len(records) == 0 {
		return dst, badChunk("a chunk with no record")
	}
	format := byte(ChunkFormat1)
	for i := range records {
		r := &records[i]
		if !r.Token.IsZero() {
			format = max(format, ChunkFormat2)
			if why := checkToken(r.Token); why != "" {
				return dst, badChunk(why)
			}
		}
		if !r.Via.IsZero() {
			format = ChunkFormat3
			if why := checkVia(r.Origin, r.HLC, r.Token, r.Via, r.ViaHLC); why != "" {
				return dst, badChunk(why)
			}
		}
	}
	dst = append(dst, format)
	dst = appendBytes(dst, table)
	dst = binary.AppendUvarint(dst, uint64(len(records)))
	for i := range records {
		r := &records[i]
		if len(r.Key) == 0 || r.Origin.IsZero() {
			return dst, badChunk("a record needs a key and a non-zero origin")
		}
		if i > 0 && bytes.Compare(records[i-1].Key, r.Key) >= 0 {
			return dst, badChunk("keys are not strictly ascending")
		}
		dst = append(dst, recordKind(r.Deleted, r.Token, r.Via))
		dst = appendBytes(dst, r.Key)
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.HLC))
		dst = append(dst, r.Origin[:]...)
		if !r.Token.IsZero() {
			dst = AppendToken(dst, r.Token)
		}
		if !r.Via.IsZero() {
			dst = appendVia(dst, r.Via, r.ViaHLC)
		}
		if !r.Deleted {
			dst = appendBytes(dst, r.Value)
		}
	}
	return dst, nil
}

// recordKind is a chunk or range record's kind byte: put or tombstone, with the tokened bit
// when it carries a token and the via bit when it carries a via block.
func recordKind(deleted bool, tok Token, via OriginID) byte {
	kind := byte(ChunkPut)
	if deleted {
		kind = ChunkTombstone
	}
	if !tok.IsZero() {
		kind |= ChunkTokened
	}
	if !via.IsZero() {
		kind |= ChunkVia
	}
	return kind
}

// ChunkView is a checked CHUNK body, read without copying (its slices alias the body).
type ChunkView struct {
	Format byte // ChunkFormat1, ChunkFormat2 (its records may carry tokens) or ChunkFormat3 (and via blocks)
	Table  []byte
	Count  int
	First  []byte // the first record's key
	Last   []byte // the last record's key
	raw    []byte
	off    int // where the records begin
}

// ParseChunk checks a CHUNK body completely: the format, the table name, a count that fits,
// every record well formed with a known kind, keys strictly ascending, nothing after the
// last record. Its errors have the code bad-chunk.
func ParseChunk(b []byte) (ChunkView, error) {
	if len(b) == 0 {
		return ChunkView{}, badChunk("an empty chunk")
	}
	if b[0] < ChunkFormat1 || b[0] > ChunkFormat3 {
		return ChunkView{}, badChunk("chunk format 0x" + strconv.FormatUint(uint64(b[0]), 16) + "; this build knows formats 1 to 3")
	}
	off := 1
	table, err := readChunkBytes(b, &off, "table")
	if err != nil {
		return ChunkView{}, err
	}
	if !validNameBytes(table) {
		return ChunkView{}, badChunk("table " + strconv.Quote(string(table)) + " is not a valid name")
	}
	n, err := readChunkUvarint(b, &off, "record count")
	if err != nil {
		return ChunkView{}, err
	}
	// Every record takes at least its kind, key length, one key byte, HLC and origin.
	const minRecord = 1 + 1 + 1 + 8 + 16
	if n == 0 || n > uint64(len(b)-off)/minRecord {
		return ChunkView{}, badChunk("record count " + strconv.FormatUint(n, 10) + " does not fit the chunk")
	}
	v := ChunkView{Format: b[0], Table: table, Count: int(n), raw: b, off: off}
	it := v.Records()
	tokened, via := false, false
	for {
		r, ok, err := it.Next()
		if err != nil {
			return ChunkView{}, err
		}
		if !ok {
			break
		}
		if v.First == nil {
			v.First = r.Key
		}
		v.Last = r.Key
		tokened = tokened || !r.Token.IsZero()
		via = via || !r.Via.IsZero()
	}
	if it.off != len(b) {
		return ChunkView{}, badChunk(strconv.Itoa(len(b)-it.off) + " bytes follow the last record")
	}
	switch {
	case v.Format == ChunkFormat2 && !tokened:
		// One chunk has one encoding: format 2 is for a chunk with a tokened record, as
		// AppendChunk writes it.
		return ChunkView{}, badChunk("chunk format 2 with no tokened record")
	case v.Format == ChunkFormat3 && !via:
		// And format 3 for a chunk with a record that has a via block.
		return ChunkView{}, badChunk("chunk format 3 with no via record")
	}
	return v, nil
}

// Raw returns the chunk body the view reads.
func (v *ChunkView) Raw() []byte { return v.raw }

// Records iterates over the chunk's records.
func (v *ChunkView) Records() ChunkIter {
	return ChunkIter{b: v.raw, off: v.off, left: v.Count, format: v.raw[0]}
}

// ChunkIter walks the records of a chunk.
type ChunkIter struct {
	b      []byte
	off    int
	left   int
	last   []byte
	format byte // 2 and 3: a record may carry a token; 3: a via block
}

// Next returns the next record (its slices alias the chunk), false after the last, or the
// record's error (bad-chunk).
func (it *ChunkIter) Next() (CopyRecord, bool, error) {
	if it.left == 0 {
		return CopyRecord{}, false, nil
	}
	it.left--
	b := it.b
	if it.off >= len(b) {
		return CopyRecord{}, false, badChunk("a record is missing")
	}
	kind := b[it.off]
	it.off++
	tokened := it.format >= ChunkFormat2 && kind&ChunkTokened != 0
	if tokened {
		kind &^= ChunkTokened
	}
	via := it.format == ChunkFormat3 && kind&ChunkVia != 0
	if via {
		kind &^= ChunkVia
	}
	if kind != ChunkPut && kind != ChunkTombstone {
		return CopyRecord{}, false, badChunk("record kind 0x" + strconv.FormatUint(uint64(b[it.off-1]), 16) + " is neither put nor tombstone")
	}
	key, err := readChunkBytes(b, &it.off, "key")
	if err != nil {
		return CopyRecord{}, false, err
	}
	if len(key) == 0 {
		return CopyRecord{}, false, badChunk("a record with an empty key")
	}
	if it.last != nil && bytes.Compare(it.last, key) >= 0 {
		return CopyRecord{}, false, badChunk("keys are not strictly ascending")
	}
	it.last = key
	if len(b)-it.off < 24 {
		return CopyRecord{}, false, badChunk("a record's version runs past the end")
	}
	r := CopyRecord{Key: key, Deleted: kind == ChunkTombstone, HLC: HLC(binary.BigEndian.Uint64(b[it.off:]))}
	copy(r.Origin[:], b[it.off+8:it.off+24])
	it.off += 24
	if r.Origin.IsZero() {
		return CopyRecord{}, false, badChunk("a record version with an all-zero origin")
	}
	if tokened {
		if len(b)-it.off < TokenSize {
			return CopyRecord{}, false, badChunk("a record's token runs past the end")
		}
		r.Token = readToken(b[it.off:])
		it.off += TokenSize
		if why := checkToken(r.Token); why != "" {
			return CopyRecord{}, false, badChunk(why)
		}
	}
	if via {
		if len(b)-it.off < ViaBlockSize {
			return CopyRecord{}, false, badChunk("a record's via block runs past the end")
		}
		r.Via, r.ViaHLC = readVia(b[it.off:])
		it.off += ViaBlockSize
		if why := checkVia(r.Origin, r.HLC, r.Token, r.Via, r.ViaHLC); why != "" {
			return CopyRecord{}, false, badChunk(why)
		}
	}
	if !r.Deleted {
		if r.Value, err = readChunkBytes(b, &it.off, "value"); err != nil {
			return CopyRecord{}, false, err
		}
	}
	return r, true, nil
}

func readVia(b []byte) (OriginID, HLC) {
	var o OriginID
	copy(o[:], b[:16])
	return o, HLC(binary.BigEndian.Uint64(b[16:24]))
}

func readChunkUvarint(b []byte, off *int, what string) (uint64, error) {
	x, err := readUvarint(b, off, what, "")
	if err != nil {
		return 0, badChunk(err.Error())
	}
	return x, nil
}

func readChunkBytes(b []byte, off *int, what string) ([]byte, error) {
	s, err := readBytes(b, off, what)
	if err != nil {
		return nil, badChunk(err.Error())
	}
	return s, nil
}

// Chunk is a decoded CHUNK body (for tools and tests; the session reads chunks in place).
type Chunk struct {
	Table   []byte
	Records []CopyRecord
}

func (*Chunk) FrameType() Type { return TypeChunk }

func (c *Chunk) AppendBody(dst []byte) ([]byte, error) { return AppendChunk(dst, c.Table, c.Records) }

func init() {
	control := func(name string, decode func([]byte) (Body, error)) typeInfo {
		return typeInfo{name: name, maxBody: MaxControlBody, version: 3, decode: decode}
	}
	register(TypeCopy, control("COPY", decodeControl[Copy](4, (*Copy).Validate, 1)))
	register(TypeCopyBegin, control("COPYBEGIN", decodeControl[CopyBegin](5, (*CopyBegin).Validate, 1)))
	register(TypeCopyEnd, control("COPYEND", decodeControl[CopyEnd](2, (*CopyEnd).Validate, 1)))
	register(TypeCopyAbort, control("COPYABORT", decodeControl[CopyAbort](5, (*CopyAbort).Validate, 1, 3, 4)))
	register(TypeChunk, typeInfo{name: "CHUNK", channel: true, version: 3,
		decode: func(b []byte) (Body, error) {
			v, err := ParseChunk(b)
			if err != nil {
				return nil, err
			}
			c := &Chunk{Table: bytes.Clone(v.Table)}
			for it := v.Records(); ; {
				r, ok, _ := it.Next()
				if !ok {
					break
				}
				r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
				c.Records = append(c.Records, r)
			}
			return c, nil
		}})
}
