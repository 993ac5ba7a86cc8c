package lock

import (
	"encoding/binary"
	"fmt"

	"plait/protocol/wire"
)

// TokenBytes is a token's size: generation, incarnation and counter as big-endian u64, then
// the home's 16-byte origin id (docs/design.md §25.3, and the token section of transaction
// format 2, §25.4). Its text is these bytes in lowercase hex, TokenTextLen characters.
const (
	TokenBytes   = wire.TokenSize
	TokenTextLen = 2 * TokenBytes
)

// Token is a fencing token (docs/design.md §25.3). It is the record's own type, so the
// token a home grants is the one a version carries and orders by, with one comparison and
// one text: the map generation its home granted under, the home's incarnation (raised each
// time its lease table is made, so a restarted home never reissues a token), the home's
// grant counter (raised at every grant, over all its keys) and the home's origin id, which
// only breaks a tie between two homes of one generation. The zero Token is no token: no home
// grants it (incarnations and counters start at 1).
type Token = wire.Token

// Compare orders tokens as wire.Token.Compare does: -1 when a is below b, 0 when equal, +1
// when above. Successive grants on one key compare upward; a key's versions order by it
// (docs/design.md §25.4).
func Compare(a, b Token) int { return a.Compare(b) }

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
