package abi

import (
	"encoding/binary"
	"errors"
	"strconv"

	"plait/protocol/wire"
)

//go:generate go run ../../tools/abigen

// The compact records of ABI 4 (shells/wasm/ABI.md, "Compact records"). A session
// configured with ConfigMsg.Compact answers RESULT, EVENT and STATUS in these kinds instead
// of CBOR: under WASM, encoding CBOR records by reflection costs more than the session's
// own work on a received frame (docs/design.md §12). The fields and their
// keys are those of the CBOR messages; only the layout differs: a payload is a sequence of
// fields, each
//
//	key (uvarint) | length (uvarint) | value (length bytes)
//
// in ascending key order, a zero value left out, a list one field per element. A value is an
// unsigned integer as a uvarint, a signed one as a zigzag varint, a bool as an empty value
// (present: true), bytes and strings as they are, an origin or a hash as its 16 or 32 bytes,
// a nested message as its own fields, and the rarely sent nested messages (HEADS, COPY,
// COPYBEGIN content) as their CBOR encoding. A reader skips a key it does not know, so a
// later ABI can add keys as it adds them to the CBOR messages.
//
// This file holds the layout's primitives. Each message's writer and reader, and
// AppendResultCompact, AppendEventCompact and AppendStatusCompact, are generated into
// compact_gen.go by tools/abigen from the message structs of abi.go, which are the one
// table of the records' fields: a field added there, and go generate run, is in both
// encodings. Generated rather than driven by a table at run time because the guest encodes
// an EVENT per received frame under WASM, where the straight-line code costs what the
// hand-written code did and a table walked per field would add an indirect call to each.
const (
	KindResultCompact Kind = 0x06 // compact ResultMsg
	KindEventCompact  Kind = 0x07 // compact EventMsg
	KindStatusCompact Kind = 0x08 // compact StatusMsg; always the last record of a batch
)

// Base is the CBOR kind a compact kind stands for (other kinds are their own base), so
// that a host switches on one set of kinds whatever the encoding.
func (k Kind) Base() Kind {
	switch k {
	case KindResultCompact:
		return KindResult
	case KindEventCompact:
		return KindEvent
	case KindStatusCompact:
		return KindStatus
	}
	return k
}

// ---- writing ----

// cw appends compact fields to b.
type cw struct{ b []byte }

func (w *cw) head(k uint8, n int) {
	w.b = append(w.b, k)
	w.b = binary.AppendUvarint(w.b, uint64(n))
}

func (w *cw) uint(k uint8, v uint64) {
	if v == 0 {
		return
	}
	var tmp [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(tmp[:], v)
	w.head(k, n)
	w.b = append(w.b, tmp[:n]...)
}

func (w *cw) int(k uint8, v int64) {
	if v != 0 {
		w.signed(k, v)
	}
}

// signed writes v even when it is zero (a present pointer).
func (w *cw) signed(k uint8, v int64) {
	var tmp [binary.MaxVarintLen64]byte
	n := binary.PutVarint(tmp[:], v)
	w.head(k, n)
	w.b = append(w.b, tmp[:n]...)
}

func (w *cw) bool(k uint8, v bool) {
	if v {
		w.head(k, 0)
	}
}

func (w *cw) bytes(k uint8, v []byte) {
	if len(v) > 0 {
		w.head(k, len(v))
		w.b = append(w.b, v...)
	}
}

func (w *cw) string(k uint8, v string) {
	if len(v) > 0 {
		w.head(k, len(v))
		w.b = append(w.b, v...)
	}
}

// open starts a nested message as key k's value; close(at) ends it. The length is one
// byte until close knows it; a longer length moves the message up.
func (w *cw) open(k uint8) int {
	w.b = append(w.b, k, 0)
	return len(w.b)
}

func (w *cw) close(start int) {
	n := len(w.b) - start
	if n < 0x80 {
		w.b[start-1] = byte(n)
		return
	}
	var tmp [binary.MaxVarintLen64]byte
	l := binary.PutUvarint(tmp[:], uint64(n))
	w.b = append(w.b, tmp[1:l]...) // room for the longer length
	copy(w.b[start+l-1:], w.b[start:start+n])
	copy(w.b[start-1:], tmp[:l])
}

// cbor writes v's CBOR encoding as key k's value (the rare nested messages).
func (w *cw) cbor(k uint8, v any) {
	p, err := encMode.Marshal(v)
	if err != nil { // every record type encodes by construction (Driver.record)
		panic(err)
	}
	w.bytes(k, p)
}

// ---- reading ----

var errCompact = errors.New("abi: malformed compact record")

// cr reads compact fields; the first error sticks.
type cr struct {
	b   []byte
	err error
}

// next returns the next field; false at the end or on an error.
func (r *cr) next() (uint64, []byte, bool) {
	if r.err != nil || len(r.b) == 0 {
		return 0, nil, false
	}
	k, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCompact
		return 0, nil, false
	}
	l, m := binary.Uvarint(r.b[n:])
	if m <= 0 || l > uint64(len(r.b)-n-m) {
		r.err = errCompact
		return 0, nil, false
	}
	v := r.b[n+m : n+m+int(l)]
	r.b = r.b[n+m+int(l):]
	return k, v, true
}

func (r *cr) fail(k uint64) {
	if r.err == nil {
		r.err = errors.New("abi: compact record: bad value of key " + strconv.FormatUint(k, 10))
	}
}

func (r *cr) uint(k uint64, v []byte) uint64 {
	x, n := binary.Uvarint(v)
	if n != len(v) || n <= 0 {
		r.fail(k)
	}
	return x
}

func (r *cr) u8(k uint64, v []byte) uint8 {
	x := r.uint(k, v)
	if x > 0xff {
		r.fail(k)
	}
	return uint8(x)
}

func (r *cr) int(k uint64, v []byte) int64 {
	x, n := binary.Varint(v)
	if n != len(v) || n <= 0 {
		r.fail(k)
	}
	return x
}

func (r *cr) bool(k uint64, v []byte) bool {
	if len(v) != 0 {
		r.fail(k)
	}
	return true
}

func (r *cr) origin(k uint64, v []byte) (o wire.OriginID) {
	if len(v) != len(o) {
		r.fail(k)
	}
	copy(o[:], v)
	return o
}

func (r *cr) hash(k uint64, v []byte) (h wire.Hash) {
	if len(v) != len(h) {
		r.fail(k)
	}
	copy(h[:], v)
	return h
}

func (r *cr) cbor(k uint64, v []byte, into any) {
	if err := decMode.Unmarshal(v, into); err != nil && r.err == nil {
		r.err = errors.New("abi: compact record, key " + strconv.FormatUint(k, 10) + ": " + err.Error())
	}
}

// keep takes the first error of s, the reader of a nested message.
func (r *cr) keep(s *cr) {
	if s.err != nil && r.err == nil {
		r.err = s.err
	}
}

// ParseResult decodes a RESULT record of either encoding.
func ParseResult(rec Record) (ResultMsg, error) {
	var m ResultMsg
	switch rec.Kind {
	case KindResult:
		err := Unmarshal(rec.Payload, &m)
		return m, err
	case KindResultCompact:
		r := cr{b: rec.Payload}
		r.resultMsg(&m)
		return m, r.err
	}
	return m, errors.New("abi: record kind " + strconv.Itoa(int(rec.Kind)) + " is not a RESULT")
}

// ParseEvent decodes an EVENT record of either encoding. Byte fields alias the payload.
func ParseEvent(rec Record) (EventMsg, error) {
	var m EventMsg
	switch rec.Kind {
	case KindEvent:
		err := Unmarshal(rec.Payload, &m)
		return m, err
	case KindEventCompact:
		r := cr{b: rec.Payload}
		r.eventMsg(&m)
		return m, r.err
	}
	return m, errors.New("abi: record kind " + strconv.Itoa(int(rec.Kind)) + " is not an EVENT")
}

// ParseStatus decodes a STATUS record of either encoding.
func ParseStatus(rec Record) (StatusMsg, error) {
	var m StatusMsg
	switch rec.Kind {
	case KindStatus:
		err := Unmarshal(rec.Payload, &m)
		return m, err
	case KindStatusCompact:
		r := cr{b: rec.Payload}
		r.statusMsg(&m)
		return m, r.err
	}
	return m, errors.New("abi: record kind " + strconv.Itoa(int(rec.Kind)) + " is not a STATUS")
}
