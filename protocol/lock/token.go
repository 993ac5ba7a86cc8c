package lock

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"

	"plait/protocol/wire"
)

// TokenBytes is a token's size: generation, incarnation and counter as big-endian u64, then
// the home's 16-byte origin id (docs/design.md §25.3, and the token section of transaction
// format 2, §25.4). Its text is these bytes in lowercase hex, TokenTextLen characters.
const (
	TokenBytes   = 8 + 8 + 8 + len(wire.OriginID{})
	TokenTextLen = 2 * TokenBytes
)

// Token is a fencing token (docs/design.md §25.3): the map generation its home granted under,
// the home's incarnation (raised at every start, so a restarted home never reissues a
// token), the home's grant counter (raised at every grant, over all its keys) and the home's
// origin id, which only breaks a tie between two homes of one generation. The zero Token is
// no token: no home grants it (incarnations and counters start at 1).
type Token struct {
	Generation  uint64
	Incarnation uint64
	Counter     uint64
	Home        wire.OriginID
}

// IsZero reports whether t is the zero Token, which no home grants.
func (t Token) IsZero() bool { return t == Token{} }

// Compare orders tokens lexicographically by generation, incarnation, counter and home
// (bytewise): -1 when a is below b, 0 when equal, +1 when above. Successive grants on one key
// compare upward; a key's versions order by it (docs/design.md §25.4).
func Compare(a, b Token) int {
	if c := cmp.Compare(a.Generation, b.Generation); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Incarnation, b.Incarnation); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Counter, b.Counter); c != 0 {
		return c
	}
	return bytes.Compare(a.Home[:], b.Home[:])
}

// Bytes is the token's TokenBytes bytes. Since every field is big-endian and fixed-size, the
// bytes of two tokens compare as Compare does.
func (t Token) Bytes() [TokenBytes]byte {
	var b [TokenBytes]byte
	binary.BigEndian.PutUint64(b[0:], t.Generation)
	binary.BigEndian.PutUint64(b[8:], t.Incarnation)
	binary.BigEndian.PutUint64(b[16:], t.Counter)
	copy(b[24:], t.Home[:])
	return b
}

const hexDigits = "0123456789abcdef"

// String is the token's text (the API's `token`, the header `Plait-Lock`): its bytes in
// lowercase hex, TokenTextLen characters. Texts of two tokens compare as Compare does.
func (t Token) String() string {
	b := t.Bytes()
	out := make([]byte, TokenTextLen)
	for i, c := range b {
		out[2*i] = hexDigits[c>>4]
		out[2*i+1] = hexDigits[c&0x0f]
	}
	return string(out)
}

// ParseToken reads a token's text, as String writes it and nothing else: exactly
// TokenTextLen characters of 0-9 and a-f. Upper case is refused, so that a token has one text
// and texts compare as tokens do. The error is an *Error with CodeBadToken.
func ParseToken(s string) (Token, error) {
	if len(s) != TokenTextLen {
		return Token{}, &Error{Code: CodeBadToken, Message: fmt.Sprintf("a token is %d lowercase hex characters, not %d", TokenTextLen, len(s))}
	}
	var b [TokenBytes]byte
	for i := range b {
		hi, ok1 := nibble(s[2*i])
		lo, ok2 := nibble(s[2*i+1])
		if !ok1 || !ok2 {
			at := 2 * i
			if ok1 {
				at++
			}
			return Token{}, &Error{Code: CodeBadToken, Message: fmt.Sprintf("character %d of the token is %q, not 0-9 or a-f", at, s[at])}
		}
		b[i] = hi<<4 | lo
	}
	var t Token
	t.Generation = binary.BigEndian.Uint64(b[0:])
	t.Incarnation = binary.BigEndian.Uint64(b[8:])
	t.Counter = binary.BigEndian.Uint64(b[16:])
	copy(t.Home[:], b[24:])
	return t, nil
}

func nibble(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
