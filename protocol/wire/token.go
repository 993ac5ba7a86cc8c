package wire

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
)

// Token is a fencing token (docs/design.md §25.3): the map generation a key's home granted
// a lock under, the home's incarnation, the home's grant counter, and the home's origin id,
// which only breaks a tie between two homes of one generation. Tokens compare
// lexicographically in that order. The zero Token is no token: an untokened version, which
// every tokened one orders above (§25.4). A version carries it inside its transaction
// (format 2), its chunk record and its range record, as TokenSize bytes: the three
// counters as big-endian u64, then the home.
type Token struct {
	Generation  uint64
	Incarnation uint64
	Counter     uint64
	Home        OriginID
}

// TokenSize is a token's size in an encoding.
const TokenSize = 8 + 8 + 8 + 16

// IsZero reports whether t is no token.
func (t Token) IsZero() bool { return t == Token{} }

// Compare orders two tokens lexicographically: generation, incarnation, counter, then the
// home's bytes. The zero Token is below every other.
func (t Token) Compare(u Token) int {
	if c := cmp.Compare(t.Generation, u.Generation); c != 0 {
		return c
	}
	if c := cmp.Compare(t.Incarnation, u.Incarnation); c != 0 {
		return c
	}
	if c := cmp.Compare(t.Counter, u.Counter); c != 0 {
		return c
	}
	return bytes.Compare(t.Home[:], u.Home[:])
}

// String is the token's one text (the API's `token`, the header `Plait-Lock`): its
// TokenSize bytes, as AppendToken writes them, in lowercase hex. Since every field is
// big-endian and fixed-size, texts of two tokens compare as Compare does. The zero Token's
// text is all zeros; no home grants it.
func (t Token) String() string {
	var b [TokenSize]byte
	return hex.EncodeToString(AppendToken(b[:0], t))
}

// AppendToken appends the token's TokenSize bytes.
func AppendToken(dst []byte, t Token) []byte {
	dst = binary.BigEndian.AppendUint64(dst, t.Generation)
	dst = binary.BigEndian.AppendUint64(dst, t.Incarnation)
	dst = binary.BigEndian.AppendUint64(dst, t.Counter)
	return append(dst, t.Home[:]...)
}

// readToken reads a token from b, which holds at least TokenSize bytes.
func readToken(b []byte) Token {
	t := Token{Generation: binary.BigEndian.Uint64(b), Incarnation: binary.BigEndian.Uint64(b[8:]),
		Counter: binary.BigEndian.Uint64(b[16:])}
	copy(t.Home[:], b[24:TokenSize])
	return t
}

// checkToken says why a token carried by a version is not one ("" when it is): a home
// grants under a map of generation 1 or more, and has an origin id.
func checkToken(t Token) string {
	switch {
	case t.Generation == 0:
		return "a token of generation 0"
	case t.Home.IsZero():
		return "a token with an all-zero home"
	}
	return ""
}
