package lock_test

import (
	"errors"
	"strings"
	"testing"

	"plait/protocol/lock"
	"plait/protocol/wire"
)

var (
	homeA = wire.OriginID{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	homeB = wire.OriginID{0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff}
)

func TestTokenText(t *testing.T) {
	tok := lock.Token{Generation: 0x0102030405060708, Incarnation: 9, Counter: 0xfffffffffffffffe, Home: homeA}
	const want = "0102030405060708" + "0000000000000009" + "fffffffffffffffe" + "00112233445566778899aabbccddeeff"
	if got := tok.String(); got != want {
		t.Fatalf("String() = %s, want %s", got, want)
	}
	if len(want) != lock.TokenTextLen || lock.TokenBytes != 40 {
		t.Fatalf("TokenTextLen %d, TokenBytes %d: want 80 and 40", lock.TokenTextLen, lock.TokenBytes)
	}
	back, err := lock.ParseToken(want)
	if err != nil || back != tok {
		t.Fatalf("ParseToken(String()) = %+v, %v; want %+v", back, err, tok)
	}
}

func TestParseTokenRefuses(t *testing.T) {
	good := lock.Token{Generation: 1, Incarnation: 2, Counter: 3, Home: homeB}.String()
	for _, tc := range []struct {
		name, text string
	}{
		{"empty", ""},
		{"one character short", good[:len(good)-1]},
		{"one character long", good + "0"},
		{"the 56 bytes of a longer encoding", good + strings.Repeat("0", 32)},
		{"upper case", strings.ToUpper(good)},
		{"one upper-case digit", good[:79] + "F"},
		{"a non-hex letter", "g" + good[1:]},
		{"a space", good[:40] + " " + good[41:]},
		{"a 0x prefix", "0x" + good[2:]},
		{"a multi-byte character", good[:78] + "é"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := lock.ParseToken(tc.text)
			var le *lock.Error
			if !errors.As(err, &le) || le.Code != lock.CodeBadToken {
				t.Fatalf("ParseToken(%q) = %+v, %v; want a bad-token error", tc.text, tok, err)
			}
			if !tok.IsZero() {
				t.Fatalf("a refused text gave %+v, want the zero token", tok)
			}
		})
	}
}

func TestTokenCompare(t *testing.T) {
	base := lock.Token{Generation: 5, Incarnation: 5, Counter: 5, Home: homeA}
	with := func(f func(*lock.Token)) lock.Token { x := base; f(&x); return x }
	for _, tc := range []struct {
		name string
		a, b lock.Token
		want int
	}{
		{"equal", base, base, 0},
		{"generation first", with(func(x *lock.Token) { x.Generation = 6; x.Incarnation = 0; x.Counter = 0 }), base, 1},
		{"then incarnation", with(func(x *lock.Token) { x.Incarnation = 6; x.Counter = 0 }), base, 1},
		{"then counter", with(func(x *lock.Token) { x.Counter = 6; x.Home = wire.OriginID{} }), base, 1},
		{"then home, bytewise", with(func(x *lock.Token) { x.Home = homeB }), base, 1},
		{"a lower generation loses to any counter", with(func(x *lock.Token) { x.Generation = 4; x.Counter = ^uint64(0) }), base, -1},
		{"the zero token is below every grant", lock.Token{}, lock.Token{Generation: 0, Incarnation: 1, Counter: 1, Home: homeA}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lock.Compare(tc.a, tc.b); got != tc.want {
				t.Fatalf("Compare(a, b) = %d, want %d", got, tc.want)
			}
			if got := lock.Compare(tc.b, tc.a); got != -tc.want {
				t.Fatalf("Compare(b, a) = %d, want %d", got, -tc.want)
			}
			// The texts order as the tokens do (big-endian, fixed width).
			if got := strings.Compare(tc.a.String(), tc.b.String()); got != tc.want {
				t.Fatalf("the texts compare %d, the tokens %d", got, tc.want)
			}
		})
	}
}
