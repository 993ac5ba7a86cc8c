package feed

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"plait/protocol/wire"
)

// MaxPositionOrigins bounds the origins one position names: a position text holds at most
// 54 bytes per origin (32 hex digits, a colon, 20 digits, a comma), so it stays near
// 220 KB, which an HTTP header or a query can still carry, and a malformed one is refused
// before the parse allocates past it.
const MaxPositionOrigins = 4096

// PositionEntry is one origin's part of a position: the highest seq of the origin the
// consumer has been given (never 0: an origin at 0 is left out).
type PositionEntry struct {
	Origin wire.OriginID
	Seq    uint64
}

// Position is a feed's position: per origin, the highest seq the consumer has been given,
// sorted by origin id, no origin twice and no seq 0. The zero Position is empty: every
// origin at 0. A Position is a value: the functions here never change one passed in.
type Position []PositionEntry

// Seq is the position's seq of origin o (0 when it names o not).
func (p Position) Seq(o wire.OriginID) uint64 {
	i, ok := slices.BinarySearchFunc(p, o, func(e PositionEntry, o wire.OriginID) int { return bytes.Compare(e.Origin[:], o[:]) })
	if !ok {
		return 0
	}
	return p[i].Seq
}

// With is p with origin o at seq (left out when seq is 0), p itself unchanged.
func (p Position) With(o wire.OriginID, seq uint64) Position {
	i, ok := slices.BinarySearchFunc(p, o, func(e PositionEntry, o wire.OriginID) int { return bytes.Compare(e.Origin[:], o[:]) })
	q := slices.Clone(p)
	switch {
	case ok && seq == 0:
		return slices.Delete(q, i, i+1)
	case ok:
		q[i].Seq = seq
		return q
	case seq == 0:
		return q
	}
	return slices.Insert(q, i, PositionEntry{Origin: o, Seq: seq})
}

// Equal reports whether p and q name the same seqs.
func (p Position) Equal(q Position) bool { return slices.Equal(p, q) }

// String is Format(p).
func (p Position) String() string { return Format(p) }

// Format is the position's text (docs/contract.md §24.2): ORIGINHEX:SEQ per origin, in
// p's order (by origin id), joined by commas; "" for the empty position. An entry at seq 0
// is left out, so a Position built by hand formats as Parse would have it.
func Format(p Position) string {
	var b strings.Builder
	for _, e := range p {
		if e.Seq == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		var h [32]byte
		hex.Encode(h[:], e.Origin[:])
		b.Write(h[:])
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(e.Seq, 10))
	}
	return b.String()
}

// Error is a value refused, naming what is wrong with it: a position text Parse refuses.
type Error struct {
	Message string
}

func (e *Error) Error() string { return "feed: " + e.Message }

func errorf(format string, args ...any) *Error { return &Error{Message: fmt.Sprintf(format, args...)} }

// Parse reads a position text, refusing (*Error) anything Format does not write: an empty
// item, an origin that is not 32 lowercase hex digits or is all zeros, origins not in
// strictly ascending order, a seq that is not decimal digits, has a leading zero, is 0 or
// does not fit 64 bits, and more than MaxPositionOrigins entries. "" is the empty position.
func Parse(s string) (Position, error) {
	if s == "" {
		return nil, nil
	}
	if n := strings.Count(s, ",") + 1; n > MaxPositionOrigins {
		return nil, errorf("position names %d origins, more than the %d allowed", n, MaxPositionOrigins)
	}
	var p Position
	for i, item := range strings.Split(s, ",") {
		if item == "" {
			return nil, errorf("position item %d is empty", i+1)
		}
		hx, num, ok := strings.Cut(item, ":")
		if !ok {
			return nil, errorf("position item %d has no colon between origin and seq", i+1)
		}
		if len(hx) != 32 {
			return nil, errorf("position item %d: origin is %d characters, not 32 hex digits", i+1, len(hx))
		}
		var e PositionEntry
		for j := 0; j < len(hx); j++ {
			if c := hx[j]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return nil, errorf("position item %d: origin has %q, not a lowercase hex digit", i+1, c)
			}
		}
		if _, err := hex.Decode(e.Origin[:], []byte(hx)); err != nil {
			return nil, errorf("position item %d: origin: %v", i+1, err)
		}
		if e.Origin.IsZero() {
			return nil, errorf("position item %d: the all-zero origin id, which no origin has", i+1)
		}
		if num == "" {
			return nil, errorf("position item %d: seq is empty", i+1)
		}
		for j := 0; j < len(num); j++ {
			if c := num[j]; c < '0' || c > '9' {
				return nil, errorf("position item %d: seq has %q, not a decimal digit", i+1, c)
			}
		}
		if num[0] == '0' {
			if len(num) == 1 {
				return nil, errorf("position item %d: seq 0 (an origin at 0 is left out)", i+1)
			}
			return nil, errorf("position item %d: seq %q has a leading zero", i+1, num)
		}
		seq, err := strconv.ParseUint(num, 10, 64)
		if err != nil {
			return nil, errorf("position item %d: seq %q does not fit 64 bits", i+1, num)
		}
		e.Seq = seq
		if len(p) > 0 {
			if c := bytes.Compare(p[len(p)-1].Origin[:], e.Origin[:]); c == 0 {
				return nil, errorf("position item %d: origin %s named twice", i+1, e.Origin)
			} else if c > 0 {
				return nil, errorf("position item %d: origin %s after %s, not sorted by origin id", i+1, e.Origin, p[len(p)-1].Origin)
			}
		}
		p = append(p, e)
	}
	return p, nil
}

// SinceKind is where a feed starts.
type SinceKind uint8

const (
	// SinceNow starts at the node's applied positions: only changes applied after.
	SinceNow SinceKind = iota
	// SinceOldest starts at every origin's floor: every change the logs still hold.
	SinceOldest
	// SincePosition starts after Since.Position (an origin it names not: after seq 0).
	SincePosition
)

// Since is where a feed starts: the query's since=now, since=oldest or since=POSITION.
type Since struct {
	Kind     SinceKind
	Position Position // SincePosition only
}

// ParseSince reads since's text: "now", "oldest", or a position text (Parse), "" being the
// empty position (every origin from seq 1). A request that gives no since at all starts
// at SinceNow; that is the caller's to decide, not this text's.
func ParseSince(s string) (Since, error) {
	switch s {
	case "now":
		return Since{Kind: SinceNow}, nil
	case "oldest":
		return Since{Kind: SinceOldest}, nil
	}
	p, err := Parse(s)
	if err != nil {
		return Since{}, err
	}
	return Since{Kind: SincePosition, Position: p}, nil
}
