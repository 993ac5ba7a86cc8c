package feed_test

import (
	"strings"
	"testing"

	"plait/protocol/feed"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

func TestPositionRoundTrip(t *testing.T) {
	a, b, c := prototest.Origin(1), prototest.Origin(2), prototest.Origin(3)
	sorted := func(es ...feed.PositionEntry) feed.Position {
		var p feed.Position
		for _, e := range es {
			p = p.With(e.Origin, e.Seq)
		}
		return p
	}
	many := feed.Position(nil)
	for i := 0; i < feed.MaxPositionOrigins; i++ {
		var o wire.OriginID
		o[0], o[1], o[15] = byte(i>>8), byte(i), 1
		many = append(many, feed.PositionEntry{Origin: o, Seq: uint64(i + 1)})
	}
	for _, p := range []feed.Position{
		nil,
		sorted(feed.PositionEntry{Origin: a, Seq: 1}),
		sorted(feed.PositionEntry{Origin: c, Seq: 18446744073709551615}, feed.PositionEntry{Origin: a, Seq: 7}, feed.PositionEntry{Origin: b, Seq: 10}),
		many,
	} {
		s := feed.Format(p)
		if len(s) > 54*len(p) {
			t.Fatalf("%d origins format as %d bytes, more than 54 each", len(p), len(s))
		}
		q, err := feed.Parse(s)
		if err != nil {
			t.Fatalf("Parse(Format(%v)): %v", p, err)
		}
		if !q.Equal(p) {
			t.Fatalf("Parse(Format(p)) = %v, want %v", q, p)
		}
		if s2 := feed.Format(q); s2 != s {
			t.Fatalf("Format(Parse(%q)) = %q", s, s2)
		}
	}
	if s := feed.Format(feed.Position{{Origin: a, Seq: 0}, {Origin: b, Seq: 3}}); s != b.String()+":3" {
		t.Fatalf("an origin at 0 is formatted: %q", s)
	}
	p := sorted(feed.PositionEntry{Origin: b, Seq: 5})
	if q := p.With(b, 0); len(q) != 0 || p.Seq(b) != 5 {
		t.Fatalf("With(b, 0) = %v, p after = %v", q, p)
	}
}

// parseRefusals is every refusal of Parse, with what its message must name; FuzzParse
// seeds from it.
var parseRefusals = []struct{ in, want string }{
	{",", "item 1 is empty"},
	{"a", "no colon"},
	{origin(1) + ":1,", "item 2 is empty"},
	{"," + origin(1) + ":1", "item 1 is empty"},
	{origin(1) + ":1,," + origin(2) + ":1", "item 2 is empty"},
	{origin(1)[:31] + ":1", "31 characters"},
	{origin(1) + "0:1", "33 characters"},
	{strings.ToUpper(origin(1)) + ":1", "not a lowercase hex digit"},
	{"g" + origin(1)[1:] + ":1", "not a lowercase hex digit"},
	{strings.Repeat("0", 32) + ":1", "all-zero origin"},
	{origin(1) + ":", "seq is empty"},
	{origin(1) + ":0", "seq 0"},
	{origin(1) + ":01", "leading zero"},
	{origin(1) + ":+1", "not a decimal digit"},
	{origin(1) + ":-1", "not a decimal digit"},
	{origin(1) + ": 1", "not a decimal digit"},
	{origin(1) + ":1 ", "not a decimal digit"},
	{origin(1) + ":1:2", "not a decimal digit"},
	{origin(1) + ":18446744073709551616", "does not fit 64 bits"},
	{origin(2) + ":1," + origin(1) + ":1", "not sorted"},
	{origin(1) + ":1," + origin(1) + ":2", "named twice"},
	{strings.Repeat(origin(1)+":1,", feed.MaxPositionOrigins) + origin(2) + ":1", "more than the 4096 allowed"},
	{" " + origin(1) + ":1", "33 characters"},
}

// origin is test origin n's hex; prototest.Origin(1) < Origin(2) < Origin(3) by bytes.
func origin(n byte) string { return prototest.Origin(n).String() }

func TestParseRefuses(t *testing.T) {
	if prototest.Origin(1).String() >= prototest.Origin(2).String() {
		t.Fatal("the table's order assumes Origin(1) sorts before Origin(2)")
	}
	for _, c := range parseRefusals {
		p, err := feed.Parse(c.in)
		var fe *feed.Error
		if err == nil {
			t.Errorf("Parse(%.80q) = %v, want a refusal naming %q", c.in, p, c.want)
			continue
		}
		if !asFeedError(err, &fe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%.80q): %v, want a *feed.Error naming %q", c.in, err, c.want)
		}
		if _, err := feed.ParseSince(c.in); err == nil {
			t.Errorf("ParseSince(%.80q) takes it", c.in)
		}
	}
	for in, want := range map[string]feed.SinceKind{"now": feed.SinceNow, "oldest": feed.SinceOldest, "": feed.SincePosition, origin(1) + ":4": feed.SincePosition} {
		s, err := feed.ParseSince(in)
		if err != nil || s.Kind != want {
			t.Errorf("ParseSince(%q) = %v, %v; want kind %d", in, s, err, want)
		}
	}
}

func asFeedError(err error, fe **feed.Error) bool {
	e, ok := err.(*feed.Error)
	*fe = e
	return ok
}

// FuzzParse: Parse never panics, and what it takes formats back byte for byte.
func FuzzParse(f *testing.F) {
	for _, c := range parseRefusals {
		f.Add(c.in)
	}
	f.Add("")
	f.Add(origin(1) + ":1," + origin(2) + ":18446744073709551615")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := feed.Parse(s)
		if err != nil {
			return
		}
		if got := feed.Format(p); got != s {
			t.Fatalf("Format(Parse(%q)) = %q", s, got)
		}
	})
}
