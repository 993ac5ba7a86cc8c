package store_test

import (
	"testing"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// TestNewerVersion: the conflict order (docs/design.md §25.4) is (carries a token, token,
// HLC, origin): a tokened version beats an untokened one whatever their clocks, a higher
// token a lower one whatever their clocks, equal tokens (or none) go by HLC and then origin;
// and the order is strict and total.
func TestNewerVersion(t *testing.T) {
	lo, hi := wire.OriginID{1}, wire.OriginID{2}
	tok := func(gen, inc, n uint64, home byte) wire.Token {
		return wire.Token{Generation: gen, Incarnation: inc, Counter: n, Home: wire.OriginID{home}}
	}
	v := func(tk wire.Token, h wire.HLC, o wire.OriginID) store.Version {
		return store.Version{Token: tk, HLC: h, Origin: o}
	}
	for _, c := range []struct {
		name         string
		newer, older store.Version
	}{
		{"untokened: by HLC", v(wire.Token{}, 20, lo), v(wire.Token{}, 10, hi)},
		{"untokened: equal HLC, by origin", v(wire.Token{}, 10, hi), v(wire.Token{}, 10, lo)},
		{"tokened beats untokened of a higher HLC", v(tok(1, 0, 0, 1), 1, lo), v(wire.Token{}, 1<<60, hi)},
		{"a higher token beats a lower one of a higher HLC", v(tok(1, 0, 2, 1), 5, lo), v(tok(1, 0, 1, 1), 50, hi)},
		{"a higher generation beats a higher counter", v(tok(2, 0, 0, 1), 5, lo), v(tok(1, 9, 9, 9), 50, hi)},
		{"a higher incarnation beats a higher counter", v(tok(1, 2, 0, 1), 5, lo), v(tok(1, 1, 9, 9), 50, hi)},
		{"tokens equal but the home: by home", v(tok(1, 1, 1, 2), 5, lo), v(tok(1, 1, 1, 1), 50, hi)},
		{"equal tokens: by HLC", v(tok(1, 1, 1, 1), 50, lo), v(tok(1, 1, 1, 1), 5, hi)},
		{"equal tokens and HLC: by origin", v(tok(1, 1, 1, 1), 5, hi), v(tok(1, 1, 1, 1), 5, lo)},
	} {
		if !store.NewerVersion(c.newer, c.older) {
			t.Errorf("%s: %+v is not newer than %+v", c.name, c.newer, c.older)
		}
		if store.NewerVersion(c.older, c.newer) {
			t.Errorf("%s: %+v is newer than %+v too", c.name, c.older, c.newer)
		}
		if store.NewerVersion(c.newer, c.newer) {
			t.Errorf("%s: a version is newer than itself", c.name)
		}
	}
	r := store.Record{HLC: 7, Origin: hi, Token: tok(3, 2, 1, 4)}
	if r.Version() != v(tok(3, 2, 1, 4), 7, hi) {
		t.Errorf("Record.Version = %+v", r.Version())
	}
}
