package vector

import (
	"bytes"
	"slices"
	"strconv"

	"plait/protocol/wire"
)

// Entry is one origin's position: the highest seq applied and its chain hash (zero for seq 0).
type Entry struct {
	Origin wire.OriginID
	Seq    uint64
	Hash   wire.Hash
}

// Check reports whether the entry is well formed: a non-zero origin, and a hash exactly when
// the seq is above 0.
func (e Entry) Check() error {
	switch {
	case e.Origin.IsZero():
		return errf("an all-zero origin id")
	case e.Seq == 0 && e.Hash != wire.Hash{}:
		return errf("seq 0 of origin " + e.Origin.String() + " with a hash")
	case e.Seq > 0 && e.Hash == wire.Hash{}:
		return errf("seq " + strconv.FormatUint(e.Seq, 10) + " of origin " + e.Origin.String() + " without its chain hash")
	}
	return nil
}

// After reports whether e is ahead of f in the total order merge uses: a higher seq, or the
// same seq with a greater hash (two different hashes at one seq are a divergence; ordering
// them keeps merge commutative while the divergence is reported elsewhere).
func (e Entry) After(f Entry) bool {
	if e.Seq != f.Seq {
		return e.Seq > f.Seq
	}
	return bytes.Compare(e.Hash[:], f.Hash[:]) > 0
}

// Vector maps origins to entries. The zero Vector is empty and ready to use.
type Vector struct {
	m map[wire.OriginID]Entry
}

// Of builds a vector from entries; a later entry of an origin merges with an earlier one.
func Of(entries ...Entry) Vector {
	var v Vector
	for _, e := range entries {
		v.Advance(e)
	}
	return v
}

// Len is the number of origins.
func (v Vector) Len() int { return len(v.m) }

// Get returns an origin's entry; the zero position (seq 0) when absent.
func (v Vector) Get(o wire.OriginID) Entry {
	if e, ok := v.m[o]; ok {
		return e
	}
	return Entry{Origin: o}
}

// Has reports whether the vector holds the origin.
func (v Vector) Has(o wire.OriginID) bool {
	_, ok := v.m[o]
	return ok
}

// Advance merges one entry: it replaces the origin's entry when it is after it. It reports
// whether the vector changed.
func (v *Vector) Advance(e Entry) bool {
	old, ok := v.m[e.Origin]
	if ok && !e.After(old) {
		return false
	}
	if v.m == nil {
		v.m = map[wire.OriginID]Entry{}
	}
	v.m[e.Origin] = e
	return true
}

// Entries returns the entries sorted by origin id: the canonical order on the wire.
func (v Vector) Entries() []Entry {
	out := make([]Entry, 0, len(v.m))
	for _, e := range v.m {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return bytes.Compare(a.Origin[:], b.Origin[:]) })
	return out
}

// Clone returns an independent copy.
func (v Vector) Clone() Vector {
	var c Vector
	for _, e := range v.m {
		c.Advance(e)
	}
	return c
}

// Merge returns the per-origin maximum of a and b.
func Merge(a, b Vector) Vector {
	c := a.Clone()
	c.Apply(b.Entries())
	return c
}

// Delta returns the entries of to that are after from's, sorted by origin: what a side that
// last sent from must send so that the peer holds to.
func Delta(from, to Vector) []Entry {
	var out []Entry
	for _, e := range to.Entries() {
		if old, ok := from.m[e.Origin]; !ok || e.After(old) {
			out = append(out, e)
		}
	}
	return out
}

// Apply merges a delta (or any list of entries).
func (v *Vector) Apply(delta []Entry) {
	for _, e := range delta {
		v.Advance(e)
	}
}

// Equal reports whether two vectors hold the same entries.
func Equal(a, b Vector) bool {
	if len(a.m) != len(b.m) {
		return false
	}
	for o, e := range a.m {
		if f, ok := b.m[o]; !ok || f != e {
			return false
		}
	}
	return true
}

type vectorError struct{ msg string }

func (e *vectorError) Error() string { return "cursor vector: " + e.msg }

func errf(msg string) error { return &vectorError{msg} }

// wireEntry is an entry as Encode writes it: {1: origin, 2: seq, 3: hash}.
type wireEntry struct {
	Origin wire.OriginID `cbor:"1,keyasint"`
	Seq    uint64        `cbor:"2,keyasint"`
	Hash   wire.Hash     `cbor:"3,keyasint"`
}

// Encode writes a vector as a CBOR array of entries sorted by origin, in Core Deterministic
// Encoding: the form a node persists its vector in.
func Encode(v Vector) ([]byte, error) {
	es := v.Entries()
	out := make([]wireEntry, len(es))
	for i, e := range es {
		out[i] = wireEntry(e)
	}
	return wire.Marshal(out)
}

// Decode reads what Encode wrote, checking every entry and the canonical order.
func Decode(b []byte) (Vector, error) {
	var in []wireEntry
	if err := wire.Unmarshal(b, &in); err != nil {
		return Vector{}, errf(err.Error())
	}
	var v Vector
	for i, w := range in {
		e := Entry(w)
		if err := e.Check(); err != nil {
			return Vector{}, err
		}
		if i > 0 && bytes.Compare(in[i-1].Origin[:], e.Origin[:]) >= 0 {
			return Vector{}, errf("entries are not in strictly ascending origin order")
		}
		v.Advance(e)
	}
	return v, nil
}
