package wire

import (
	"bytes"
	"encoding/binary"
	"strconv"
)

// TxnFormat1 is the first byte of a transaction encoding of the first format. A later
// encoding gets a new format byte; a receiver rejects formats it does not know.
const TxnFormat1 = 0x01

// TxnFormat2 is the first byte of a transaction written under a lock: format 1 with the
// fencing token (TokenSize bytes) after prev, inside the hashed encoding (docs/design.md
// §25.4). It writes one key, and only a version-4 connection carries it.
const TxnFormat2 = 0x02

// TxnFormat3 is the first byte of a transaction a hub re-originated from one of its leaves
// (docs/design.md §27): format 1 with a leaf block (LeafBlockSize bytes) after prev, inside
// the hashed encoding. It carries no token (a leaf takes no locks), and only a version-4
// connection carries it.
const TxnFormat3 = 0x03

// LeafBlockSize is the size of a format-3 transaction's leaf block: leaf origin, leaf seq,
// leaf HLC, the leaf entry's chain hash.
const LeafBlockSize = 16 + 8 + 8 + 32

// LeafBlock is the leaf transaction a hub's format-3 entry re-originates: the leaf's origin,
// the entry's seq in the leaf's log, its HLC (the conflict timestamp of every operation) and
// its chain hash. The hub's entry has its own origin, seq, HLC and chain (the delivering
// identity); the leaf block is the conflict identity, and the entry's HLC is always above
// the leaf's.
type LeafBlock struct {
	Origin OriginID
	Seq    uint64
	HLC    HLC
	Hash   Hash
}

// txnFixed is the size of the fixed part of a transaction encoding: format, origin, seq,
// HLC timestamp, previous hash.
const txnFixed = 1 + 16 + 8 + 8 + 32

// OpKind is the kind of one operation of a transaction.
type OpKind uint8

const (
	OpPut    OpKind = 1 // set the record to the value
	OpDelete OpKind = 2 // replace the record by a tombstone
)

// Op is one operation: a put carries a value, a delete does not.
type Op struct {
	Kind  OpKind
	Table []byte
	Key   []byte
	Value []byte
}

// Txn is one transaction of an origin: its position in the origin's log (Seq, from 1,
// contiguous), its hybrid-logical-clock timestamp, the chain hash of the origin's previous
// transaction (zero for Seq 1) and its operations, applied atomically. A transaction with
// a Token is encoded in format 2 (and writes one key); one without, in format 1.
type Txn struct {
	Origin OriginID
	Seq    uint64
	HLC    HLC
	Prev   Hash
	Token  Token
	Leaf   *LeafBlock // set for format 3 only
	Ops    []Op
}

// txnError is a transaction encoding this build rejects: malformed (bad-txn), or of a
// format or operation kind it does not know (unsupported-txn).
type txnError struct {
	msg         string
	unsupported bool
}

func (e *txnError) Error() string { return e.msg }

// Code is the error code a receiver closes with.
func (e *txnError) Code() Code {
	if e.unsupported {
		return CodeUnsupportedTxn
	}
	return CodeBadTxn
}

func badTxn(msg string) error { return &txnError{msg: msg} }

func unsupportedTxn(msg string) error { return &txnError{msg: msg, unsupported: true} }

// TxnErrorCode is the code for an error of ParseTxn or ParseTxn1: unsupported-txn for a
// format or operation kind this build does not know, bad-txn otherwise.
func TxnErrorCode(err error) Code {
	if te, ok := err.(*txnError); ok {
		return te.Code()
	}
	return CodeBadTxn
}

// AppendEncoding appends the transaction encoding (SPEC.md, "Transaction encoding") to dst,
// after checking the rules a receiver checks.
// On error dst is returned unchanged.
func (t *Txn) AppendEncoding(dst []byte) ([]byte, error) {
	if t.Origin.IsZero() {
		return dst, badTxn("origin id is all zero")
	}
	if err := checkTxnHeader(t.Seq, t.Prev); err != nil {
		return dst, err
	}
	if len(t.Ops) == 0 {
		return dst, badTxn("a transaction has at least one operation")
	}
	tokened := !t.Token.IsZero()
	if tokened {
		if why := checkToken(t.Token); why != "" {
			return dst, badTxn(why)
		}
	}
	if t.Leaf != nil {
		if tokened {
			return dst, badTxn("a format-3 transaction carries no token")
		}
		if err := checkLeafBlock(t.Origin, t.HLC, t.Leaf); err != nil {
			return dst, err
		}
	}
	for i := range t.Ops {
		op := &t.Ops[i]
		if err := checkOp(op.Kind, op.Table, op.Key); err != nil {
			return dst, err
		}
		if op.Kind == OpDelete && len(op.Value) != 0 {
			return dst, badTxn("a delete carries no value")
		}
		if tokened && i > 0 && !sameKey(op, &t.Ops[0]) {
			return dst, badTxn(oneKeyMessage)
		}
	}
	format := byte(TxnFormat1)
	if tokened {
		format = TxnFormat2
	}
	if t.Leaf != nil {
		format = TxnFormat3
	}
	dst = append(dst, format)
	dst = append(dst, t.Origin[:]...)
	dst = binary.BigEndian.AppendUint64(dst, t.Seq)
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.HLC))
	dst = append(dst, t.Prev[:]...)
	if tokened {
		dst = AppendToken(dst, t.Token)
	}
	if t.Leaf != nil {
		dst = appendLeafBlock(dst, t.Leaf)
	}
	dst = binary.AppendUvarint(dst, uint64(len(t.Ops)))
	for i := range t.Ops {
		op := &t.Ops[i]
		dst = append(dst, byte(op.Kind))
		dst = appendBytes(dst, op.Table)
		dst = appendBytes(dst, op.Key)
		if op.Kind == OpPut {
			dst = appendBytes(dst, op.Value)
		}
	}
	return dst, nil
}

// Encode returns the transaction encoding.
func (t *Txn) Encode() ([]byte, error) { return t.AppendEncoding(nil) }

// oneKeyMessage is the bad-txn of a format-2 transaction that writes more than one key: a
// token orders the versions of the key it was granted for (docs/design.md §25.4).
const oneKeyMessage = "a format-2 transaction writes one (table, key)"

func appendLeafBlock(dst []byte, l *LeafBlock) []byte {
	dst = append(dst, l.Origin[:]...)
	dst = binary.BigEndian.AppendUint64(dst, l.Seq)
	dst = binary.BigEndian.AppendUint64(dst, uint64(l.HLC))
	return append(dst, l.Hash[:]...)
}

func readLeafBlock(b []byte) LeafBlock {
	var l LeafBlock
	copy(l.Origin[:], b[0:16])
	l.Seq = binary.BigEndian.Uint64(b[16:24])
	l.HLC = HLC(binary.BigEndian.Uint64(b[24:32]))
	copy(l.Hash[:], b[32:64])
	return l
}

// checkLeafBlock holds a leaf block to its rules: a leaf that is not the entry's origin, a
// leaf seq from 1, a leaf HLC that is not zero and below the entry's (a hub merges the leaf's
// timestamp into its clock before it stamps the entry, so the rules that bound future
// conflict timestamps by an origin's applied HLC hold for leaf writes too: docs/design.md
// §27.2), and a leaf hash that is not zero.
func checkLeafBlock(origin OriginID, hlc HLC, l *LeafBlock) error {
	switch {
	case l.Origin.IsZero():
		return badTxn("leaf origin id is all zero")
	case l.Origin == origin:
		return badTxn("a format-3 entry's leaf is its own origin")
	case l.Seq == 0:
		return badTxn("leaf seq 0: a leaf's sequence starts at 1")
	case l.HLC == 0:
		return badTxn("leaf HLC 0")
	case l.HLC >= hlc:
		return badTxn("leaf HLC is not below the entry's")
	case l.Hash == (Hash{}):
		return badTxn("leaf hash is all zero")
	}
	return nil
}

func sameKey(a, b *Op) bool { return bytes.Equal(a.Table, b.Table) && bytes.Equal(a.Key, b.Key) }

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func checkTxnHeader(seq uint64, prev Hash) error {
	if seq == 0 {
		return badTxn("seq 0: an origin's sequence starts at 1")
	}
	if seq == 1 && prev != (Hash{}) {
		return badTxn("seq 1 must have the zero previous hash")
	}
	if seq > 1 && prev == (Hash{}) {
		return badTxn("seq " + strconv.FormatUint(seq, 10) + " has the zero previous hash")
	}
	return nil
}

func checkKind(kind OpKind) error {
	switch kind {
	case OpPut, OpDelete:
		return nil
	case 0:
		return badTxn("operation kind 0")
	}
	return unsupportedTxn("operation kind " + strconv.Itoa(int(kind)) + " is not put (1) or delete (2), the kinds of format 1")
}

func checkOp(kind OpKind, table, key []byte) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	if !validNameBytes(table) {
		return badTxn("table name " + strconv.Quote(string(table)) + " is not 1-64 bytes of [A-Za-z0-9_.-]")
	}
	if len(key) == 0 {
		return badTxn("empty key")
	}
	return nil
}

// TxnView is a checked transaction encoding, read in place: its byte slices alias the
// encoding it was parsed from. Parsing and reading allocate nothing. Token is the zero
// Token for format 1, and never zero for format 2.
type TxnView struct {
	raw    []byte
	Origin OriginID
	Seq    uint64
	HLC    HLC
	Prev   Hash
	Token  Token
	Leaf   LeafBlock // format 3 only (Format() == TxnFormat3); zero otherwise
	NumOps int
	opsOff int
}

// ParseTxn checks a transaction encoding completely and returns a view of it.
func ParseTxn(b []byte) (TxnView, error) { return ParseTxnUpTo(b, TxnFormat3) }

// ParseTxnUpTo is ParseTxn for a receiver that takes transaction formats up to max only: a
// later one is unsupported-txn, whatever follows its shared prefix, exactly as for a build
// that knows no later format. A connection below version 4 takes format 1 only (a
// format-2 entry carries a fencing token, which only version 4 carries).
func ParseTxnUpTo(b []byte, max byte) (TxnView, error) {
	if len(b) < txnFixed {
		return TxnView{}, badTxn("encoding of " + strconv.Itoa(len(b)) + " bytes is shorter than the prefix every format shares")
	}
	v := TxnView{raw: b}
	copy(v.Origin[:], b[1:17])
	v.Seq = binary.BigEndian.Uint64(b[17:25])
	switch {
	case b[0] == 0:
		return TxnView{}, badTxn("transaction format 0")
	case b[0] > TxnFormat3:
		return TxnView{}, unsupportedTxn("origin " + v.Origin.String() + " seq " + strconv.FormatUint(v.Seq, 10) +
			" has transaction format 0x" + strconv.FormatUint(uint64(b[0]), 16) + "; this build knows formats 1 to 3")
	case b[0] > max:
		return TxnView{}, unsupportedTxn("origin " + v.Origin.String() + " seq " + strconv.FormatUint(v.Seq, 10) +
			" has transaction format 0x" + strconv.FormatUint(uint64(b[0]), 16) + "; the connection carries formats up to " +
			strconv.Itoa(int(max)))
	}
	v.HLC = HLC(binary.BigEndian.Uint64(b[25:33]))
	copy(v.Prev[:], b[33:65])
	if v.Origin.IsZero() {
		return TxnView{}, badTxn("origin id is all zero")
	}
	off := txnFixed
	if b[0] == TxnFormat2 {
		if len(b) < txnFixed+TokenSize {
			return TxnView{}, badTxn("a format-2 encoding of " + strconv.Itoa(len(b)) + " bytes has no room for its token")
		}
		v.Token = readToken(b[off:])
		if why := checkToken(v.Token); why != "" {
			return TxnView{}, badTxn(why)
		}
		off += TokenSize
	}
	if b[0] == TxnFormat3 {
		if len(b) < txnFixed+LeafBlockSize {
			return TxnView{}, badTxn("a format-3 encoding of " + strconv.Itoa(len(b)) + " bytes has no room for its leaf block")
		}
		v.Leaf = readLeafBlock(b[off:])
		if err := checkLeafBlock(v.Origin, v.HLC, &v.Leaf); err != nil {
			return TxnView{}, err
		}
		off += LeafBlockSize
	}
	if len(b) == off {
		return TxnView{}, badTxn("no operation count")
	}
	if err := checkTxnHeader(v.Seq, v.Prev); err != nil {
		return TxnView{}, err
	}
	n, err := readUvarint(b, &off, "operation count", "")
	if err != nil {
		return TxnView{}, err
	}
	// Every operation takes at least its kind byte, so a count beyond that is a lie.
	if n == 0 || n > uint64(len(b)-off) {
		return TxnView{}, badTxn("operation count " + strconv.FormatUint(n, 10) + " does not fit the encoding")
	}
	v.NumOps = int(n)
	v.opsOff = off
	var firstTable, firstKey []byte // a format-2 transaction's one key
	for i := 0; i < v.NumOps; i++ {
		if off >= len(b) {
			return TxnView{}, badTxn("operation " + strconv.Itoa(i) + " is missing")
		}
		kind := OpKind(b[off])
		off++
		if err := checkKind(kind); err != nil { // what follows an unknown kind is unknown
			if te := err.(*txnError); te.unsupported {
				te.msg = "origin " + v.Origin.String() + " seq " + strconv.FormatUint(v.Seq, 10) + ": " + te.msg
			}
			return TxnView{}, err
		}
		table, err := readBytes(b, &off, "table")
		if err != nil {
			return TxnView{}, err
		}
		key, err := readBytes(b, &off, "key")
		if err != nil {
			return TxnView{}, err
		}
		if err := checkOp(kind, table, key); err != nil {
			return TxnView{}, err
		}
		if !v.Token.IsZero() {
			if i == 0 {
				firstTable, firstKey = table, key
			} else if !bytes.Equal(table, firstTable) || !bytes.Equal(key, firstKey) {
				return TxnView{}, badTxn(oneKeyMessage)
			}
		}
		if kind == OpPut {
			if _, err := readBytes(b, &off, "value"); err != nil {
				return TxnView{}, err
			}
		}
	}
	if off != len(b) {
		return TxnView{}, badTxn(strconv.Itoa(len(b)-off) + " bytes follow the last operation")
	}
	return v, nil
}

// readUvarint reads a minimal varint; what and suffix name it in an error (they are joined
// only then: this is the hot path).
func readUvarint(b []byte, off *int, what, suffix string) (uint64, error) {
	x, n := binary.Uvarint(b[*off:])
	if n <= 0 {
		return 0, badTxn(what + suffix + " is not a valid varint at byte " + strconv.Itoa(*off))
	}
	if n != uvarintLen(x) {
		return 0, badTxn(what + suffix + " is not a minimal varint at byte " + strconv.Itoa(*off))
	}
	*off += n
	return x, nil
}

func readBytes(b []byte, off *int, what string) ([]byte, error) {
	n, err := readUvarint(b, off, what, " length")
	if err != nil {
		return nil, err
	}
	if n > uint64(len(b)-*off) {
		return nil, badTxn(what + " of " + strconv.FormatUint(n, 10) + " bytes runs past the end")
	}
	s := b[*off : *off+int(n) : *off+int(n)]
	*off += int(n)
	return s, nil
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// Raw returns the encoding the view reads.
func (v *TxnView) Raw() []byte { return v.raw }

// Conflict is the conflict identity of the versions the transaction writes (docs/design.md
// §27.1): the leaf block's HLC and origin for format 3 (a hub's re-originated leaf write),
// the entry's own HLC and origin otherwise. Its token is the entry's (zero in format 3).
func (v *TxnView) Conflict() (HLC, OriginID) {
	if v.Format() == TxnFormat3 {
		return v.Leaf.HLC, v.Leaf.Origin
	}
	return v.HLC, v.Origin
}

// Format is the encoding's format: TxnFormat1, TxnFormat2 (a token) or TxnFormat3 (a leaf
// block).
func (v *TxnView) Format() byte { return v.raw[0] }

// Hash returns the chain hash of this transaction: SHA-256 of its encoding.
func (v *TxnView) Hash() Hash { return Sum256(v.raw) }

// Ops returns an iterator over the operations.
func (v *TxnView) Ops() OpIter { return OpIter{b: v.raw, off: v.opsOff, left: v.NumOps} }

// OpIter walks the operations of a checked transaction.
type OpIter struct {
	b    []byte
	off  int
	left int
}

// Next returns the next operation, or false after the last one.
func (it *OpIter) Next() (Op, bool) {
	if it.left == 0 {
		return Op{}, false
	}
	it.left--
	op := Op{Kind: OpKind(it.b[it.off])}
	it.off++
	// The encoding was checked by ParseTxn, so these reads cannot fail.
	op.Table, _ = readBytes(it.b, &it.off, "table")
	op.Key, _ = readBytes(it.b, &it.off, "key")
	if op.Kind == OpPut {
		op.Value, _ = readBytes(it.b, &it.off, "value")
	}
	return op, true
}

// Txn returns an owned copy of the transaction.
func (v *TxnView) Txn() Txn {
	t := Txn{Origin: v.Origin, Seq: v.Seq, HLC: v.HLC, Prev: v.Prev, Token: v.Token, Ops: make([]Op, 0, v.NumOps)}
	if v.Format() == TxnFormat3 {
		l := v.Leaf
		t.Leaf = &l
	}
	it := v.Ops()
	for op, ok := it.Next(); ok; op, ok = it.Next() {
		op.Table = append([]byte(nil), op.Table...)
		op.Key = append([]byte(nil), op.Key...)
		if op.Kind == OpPut {
			op.Value = append([]byte{}, op.Value...)
		}
		t.Ops = append(t.Ops, op)
	}
	return t
}

// HLC is a hybrid-logical-clock timestamp: milliseconds since the Unix epoch in the high 48
// bits, a logical counter in the low 16 bits. Timestamps compare as integers.
type HLC uint64

// MakeHLC builds a timestamp from wall milliseconds and a logical counter.
func MakeHLC(wallMillis uint64, logical uint16) HLC { return HLC(wallMillis<<16 | uint64(logical)) }

// WallMillis is the physical part, in milliseconds since the Unix epoch.
func (h HLC) WallMillis() uint64 { return uint64(h) >> 16 }

// Logical is the logical counter.
func (h HLC) Logical() uint16 { return uint16(h) }
