package wire_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"plait/protocol/wire"
)

// v4Body is a version-4 body with its rules.
type v4Body interface {
	wire.Body
	Validate() error
}

// decodeV4 decodes a body as a received frame of its type.
func decodeV4(b wire.Body) (wire.Body, *wire.Error) {
	enc := body(b)
	return wire.DecodeBody(wire.Frame{Header: wire.Header{Type: b.FrameType(), Length: uint32(len(enc))}, Body: enc})
}

// TestV4FieldRules: each field rule of MAP, MEMBERS, REQUEST and RESPONSE (SPEC.md,
// "Version 4") rejects a well-typed value with bad-field, from the decoder and from
// Validate alike; the rules' bounds are accepted.
func TestV4FieldRules(t *testing.T) {
	doc := func(g string, rest string) []byte { return []byte(`{"generation":` + g + rest + `}`) }
	mp := func(mod func(m *wire.Map)) *wire.Map {
		m := sampleMap()
		mod(m)
		return m
	}
	mem := func(es ...wire.Member) *wire.Members { return &wire.Members{Entries: es} }
	m := func(name string) wire.Member { return wire.Member{Name: name, MaxVersion: 4, Stamp: 1} }
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "n" + strconv.Itoa(i)
		}
		return out
	}
	req := func(mod func(r *wire.Request)) *wire.Request {
		r := &wire.Request{ID: 1, Target: "c", Path: []string{"a", "b"}, TimeoutMS: 100, Scope: wire.ScopeRead, Kind: "map"}
		mod(r)
		return r
	}
	resp := func(mod func(r *wire.Response)) *wire.Response {
		r := &wire.Response{ID: 1}
		mod(r)
		return r
	}
	many := make([]wire.Member, wire.MaxMembers+1)
	for i := range many {
		many[i] = wire.Member{Name: "n" + strconv.Itoa(10000+i), MaxVersion: 4, Stamp: 1}
	}
	// The largest document: a canonical object padded by a string to exactly the bound.
	big := func(n int) []byte {
		pad := n - len(`{"generation":3,"x":""}`)
		return []byte(`{"generation":3,"x":"` + strings.Repeat("p", pad) + `"}`)
	}
	for _, c := range []struct {
		name string
		v    v4Body
		ok   bool
	}{
		{"MAP valid", sampleMap(), true},
		{"MAP of generation 0", mp(func(m *wire.Map) { m.Generation, m.Document = 0, doc("0", "") }), false},
		{"MAP of generation 2^63-1", mp(func(m *wire.Map) { m.Generation, m.Document = wire.MaxGeneration, doc("9223372036854775807", "") }), true},
		{"MAP of generation 2^63", mp(func(m *wire.Map) { m.Generation, m.Document = 1<<63, doc("9223372036854775808", "") }), false},
		{"MAP with an empty document", mp(func(m *wire.Map) { m.Document = nil }), false},
		{"MAP with a document of 64 KiB", mp(func(m *wire.Map) { m.Document = big(wire.MaxMapDocument) }), true},
		{"MAP with a document of 64 KiB + 1", mp(func(m *wire.Map) { m.Document = big(wire.MaxMapDocument + 1) }), false},
		{"MAP with an empty publisher", mp(func(m *wire.Map) { m.Publisher = "" }), false},
		{"MAP with a publisher outside the name rule", mp(func(m *wire.Map) { m.Publisher = "a b" }), false},
		{"MAP with a publisher of 64 bytes", mp(func(m *wire.Map) { m.Publisher = strings.Repeat("p", 64) }), true},
		{"MAP with a publisher of 65 bytes", mp(func(m *wire.Map) { m.Publisher = strings.Repeat("p", 65) }), false},

		{"MEMBERS valid", mem(m("a"), m("b")), true},
		{"MEMBERS of 1024 entries", mem(many[:wire.MaxMembers]...), true},
		{"MEMBERS of 1025 entries", mem(many...), false},
		{"MEMBERS of no entry", mem(), false},
		{"MEMBERS out of order", mem(m("b"), m("a")), false},
		{"MEMBERS with a name twice", mem(m("a"), m("a")), false},
		{"MEMBERS with a name outside the rule", mem(m("a/b")), false},
		{"MEMBERS with max version 0", mem(wire.Member{Name: "a", Stamp: 1}), false},
		{"MEMBERS with stamp 0", mem(wire.Member{Name: "a", MaxVersion: 4}), false},

		{"REQUEST valid", req(func(*wire.Request) {}), true},
		{"REQUEST id 0", req(func(r *wire.Request) { r.ID = 0 }), false},
		{"REQUEST to a target outside the name rule", req(func(r *wire.Request) { r.Target = "" }), false},
		{"REQUEST with an empty path", req(func(r *wire.Request) { r.Path = nil }), false},
		{"REQUEST with a path of 16 names", req(func(r *wire.Request) { r.Path = names(16) }), true},
		{"REQUEST with a path of 17 names", req(func(r *wire.Request) { r.Path = names(17) }), false},
		{"REQUEST with a name twice in its path", req(func(r *wire.Request) { r.Path = []string{"a", "b", "a"} }), false},
		{"REQUEST with a path name outside the rule", req(func(r *wire.Request) { r.Path = []string{"a", "b c"} }), false},
		{"REQUEST of timeout 0", req(func(r *wire.Request) { r.TimeoutMS = 0 }), false},
		{"REQUEST of timeout 1", req(func(r *wire.Request) { r.TimeoutMS = 1 }), true},
		{"REQUEST of timeout 60000", req(func(r *wire.Request) { r.TimeoutMS = 60000 }), true},
		{"REQUEST of timeout 60001", req(func(r *wire.Request) { r.TimeoutMS = 60001 }), false},
		{"REQUEST of scope write", req(func(r *wire.Request) { r.Scope = wire.ScopeWrite }), true},
		{"REQUEST of scope admin", req(func(r *wire.Request) { r.Scope = wire.ScopeAdmin }), true},
		{"REQUEST of scope Read", req(func(r *wire.Request) { r.Scope = "Read" }), false},
		{"REQUEST of an empty scope", req(func(r *wire.Request) { r.Scope = "" }), false},
		{"REQUEST of an empty kind", req(func(r *wire.Request) { r.Kind = "" }), false},
		{"REQUEST of a kind of 32 bytes", req(func(r *wire.Request) { r.Kind = strings.Repeat("k", 32) }), true},
		{"REQUEST of a kind of 33 bytes", req(func(r *wire.Request) { r.Kind = strings.Repeat("k", 33) }), false},
		{"REQUEST of a kind outside [a-z0-9-]", req(func(r *wire.Request) { r.Kind = "Map" }), false},

		{"RESPONSE valid", resp(func(*wire.Response) {}), true},
		{"RESPONSE id 0", resp(func(r *wire.Response) { r.ID = 0 }), false},
		{"RESPONSE code of 64 bytes", resp(func(r *wire.Response) { r.Code = wire.Code(strings.Repeat("c", 64)) }), true},
		{"RESPONSE code of 65 bytes", resp(func(r *wire.Response) { r.Code = wire.Code(strings.Repeat("c", 65)) }), false},
		{"RESPONSE code outside [a-z0-9-]", resp(func(r *wire.Response) { r.Code = "No-route" }), false},
		{"RESPONSE message of 1024 bytes", resp(func(r *wire.Response) { r.Message = strings.Repeat("m", 1024) }), true},
		{"RESPONSE message of 1025 bytes", resp(func(r *wire.Response) { r.Message = strings.Repeat("m", 1025) }), false},
	} {
		verr := c.v.Validate()
		_, derr := decodeV4(c.v)
		if c.ok {
			if verr != nil || derr != nil {
				t.Errorf("%s: Validate %v, decode %v", c.name, verr, derr)
			}
			continue
		}
		if verr == nil || derr == nil || derr.Code != wire.CodeBadField || derr.Class != wire.ClassProtocol {
			t.Errorf("%s: Validate %v, decode %v; want bad-field from both", c.name, verr, derr)
		}
	}
}

// TestV4RequiredKeys: a MAP without one of its keys, a MEMBERS or REQUEST without one of
// theirs, a RESPONSE without its id and a MEMBERS entry without one of its keys are
// bad-cbor (SPEC M16); REQUEST's body and RESPONSE's code, message and body are optional.
func TestV4RequiredKeys(t *testing.T) {
	mapBody := map[uint64]any{1: 3, 2: []byte(`{"generation":3}`), 3: "a", 4: 7}
	reqBody := map[uint64]any{1: 1, 2: "c", 3: []any{"a"}, 4: 100, 5: "read", 6: "map"}
	without := func(m map[uint64]any, k uint64) map[uint64]any {
		out := map[uint64]any{}
		for key, v := range m {
			if key != k {
				out[key] = v
			}
		}
		return out
	}
	type bad struct {
		name string
		typ  wire.Type
		body []byte
	}
	var cases []bad
	for k := uint64(1); k <= 4; k++ {
		cases = append(cases, bad{"MAP without key " + strconv.FormatUint(k, 10), wire.TypeMap, cb(without(mapBody, k))})
	}
	for k := uint64(1); k <= 6; k++ {
		cases = append(cases, bad{"REQUEST without key " + strconv.FormatUint(k, 10), wire.TypeRequest, cb(without(reqBody, k))})
	}
	cases = append(cases,
		bad{"MEMBERS without its entries", wire.TypeMembers, cb(map[uint64]any{})},
		bad{"a MEMBERS entry without its stamp", wire.TypeMembers, cb(map[uint64]any{1: []any{map[uint64]any{1: "a", 2: 4}}})},
		bad{"a MEMBERS entry with a key of a later build", wire.TypeMembers, cb(map[uint64]any{1: []any{map[uint64]any{1: "a", 2: 4, 3: 1, 4: 0}}})},
		bad{"a MEMBERS entry as an array", wire.TypeMembers, cb(map[uint64]any{1: []any{[]any{"a", 4, 1}}})},
		bad{"RESPONSE without its id", wire.TypeResponse, cb(map[uint64]any{2: "no-route"})},
		bad{"RESPONSE with an empty body", wire.TypeResponse, cb(map[uint64]any{1: 1, 4: []byte{}})},
		bad{"REQUEST with an empty body", wire.TypeRequest, cb(map[uint64]any{1: 1, 2: "c", 3: []any{"a"}, 4: 100, 5: "read", 6: "map", 7: []byte{}})},
	)
	for _, c := range cases {
		_, err := wire.DecodeBody(wire.Frame{Header: wire.Header{Type: c.typ, Length: uint32(len(c.body))}, Body: c.body})
		if err == nil || err.Code != wire.CodeBadCBOR {
			t.Errorf("%s: %v, want bad-cbor", c.name, err)
		}
	}
	// Keys of a later build are kept, in every version-4 body.
	for _, c := range []struct {
		typ  wire.Type
		body map[uint64]any
	}{
		{wire.TypeMap, mapBody},
		{wire.TypeMembers, map[uint64]any{1: []any{map[uint64]any{1: "a", 2: 4, 3: 1}}}},
		{wire.TypeRequest, reqBody},
		{wire.TypeResponse, map[uint64]any{1: 1}},
	} {
		c.body[30] = "later"
		enc := cb(c.body)
		frames, err := decode(raw(c.typ, 0, 0, enc))
		if err != nil {
			t.Errorf("%s with key 30: %v", c.typ, err)
			continue
		}
		if re, _ := wire.EncodeMessage(frames); !bytes.Equal(re[wire.HeaderSize:], enc) {
			t.Errorf("%s with key 30 does not re-encode byte for byte", c.typ)
		}
	}
}

// TestMapAnswer: the answer to a request of kind map is a MAP body, or {1: 0} when the
// target holds no map; both decode back, and anything else is refused as a MAP body is.
func TestMapAnswer(t *testing.T) {
	none, err := wire.AppendMapAnswer(nil, nil)
	if err != nil || !bytes.Equal(none, hx("a1 01 00")) {
		t.Fatalf("the answer of no map: %x, %v", none, err)
	}
	if m, err := wire.DecodeMapAnswer(none); m != nil || err != nil {
		t.Fatalf("decoding the answer of no map: %+v, %v", m, err)
	}
	some, err := wire.AppendMapAnswer(nil, sampleMap())
	if err != nil || !bytes.Equal(some, body(sampleMap())) {
		t.Fatalf("the answer of a map: %x, %v", some, err)
	}
	if m, err := wire.DecodeMapAnswer(some); err != nil || m == nil || m.Generation != 3 || !bytes.Equal(m.Document, sampleMap().Document) {
		t.Fatalf("decoding the answer of a map: %+v, %v", m, err)
	}
	bad := sampleMap()
	bad.Generation = 0
	if _, err := wire.AppendMapAnswer(nil, bad); err == nil {
		t.Fatal("an answer of a map that breaks its rules was encoded")
	}
	for _, b := range [][]byte{hx("a1 01 01"), hx("a2 01 00 03 61 61"), hx("a0"), nil} {
		if m, err := wire.DecodeMapAnswer(b); err == nil {
			t.Errorf("answer %x: %+v accepted", b, m)
		}
	}
}

// TestRequestCodes: the request codes have their classes, are known to ClassOf, and are
// neither among the codes a CLOSE carries nor transport codes.
func TestRequestCodes(t *testing.T) {
	want := map[wire.Code]wire.Class{
		wire.CodeNoRoute: wire.ClassTransient, wire.CodeUnreachable: wire.ClassTransient, wire.CodeRequestTimeout: wire.ClassTransient,
		wire.CodeTooManyRequests: wire.ClassResourceLimit, wire.CodeForbidden: wire.ClassRefused, wire.CodeUnknownKind: wire.ClassUnsupported,
	}
	if got := wire.RequestCodes(); len(got) != len(want) {
		t.Fatalf("request codes %v", got)
	}
	closeCodes := map[wire.Code]bool{}
	for _, c := range append(wire.Codes(), wire.TransportCodes()...) {
		closeCodes[c] = true
	}
	for c, cl := range want {
		if got, ok := wire.ClassOf(c); !ok || got != cl || !wire.IsRequestCode(c) || closeCodes[c] {
			t.Errorf("%s: class %s (%v), request code %v, among the others %v", c, got, ok, wire.IsRequestCode(c), closeCodes[c])
		}
		if e := wire.NewError(c, "x"); e.Class != cl {
			t.Errorf("NewError(%s) has class %s", c, e.Class)
		}
	}
	if wire.IsRequestCode(wire.CodeGoingAway) {
		t.Error("going-away is a request code")
	}
}

// TestSkipFieldRules: each rule of SKIP (SPEC.md, "Version 4", "SKIP") rejects a
// well-typed value with bad-field, from the decoder and from Validate alike, and accepts
// the value at its bound: MaxSkipTables tables and one more, from > to, prev all zero iff
// the run starts at seq 1, tables not strictly ascending or outside the name rule.
func TestSkipFieldRules(t *testing.T) {
	skip := func(mod func(k *wire.Skip)) *wire.Skip {
		k := &wire.Skip{Channel: 1, From: 3, To: 5, Prev: hash9, Hash: hash9, HLC: 7, Tables: [][]byte{[]byte("t")}, Generation: 2}
		mod(k)
		return k
	}
	for _, c := range []struct {
		name string
		v    *wire.Skip
		ok   bool
	}{
		{"valid", skip(func(*wire.Skip) {}), true},
		{"a run of one entry", skip(func(k *wire.Skip) { k.To = k.From }), true},
		{"from above to", skip(func(k *wire.Skip) { k.To = k.From - 1 }), false},
		{"from 0", skip(func(k *wire.Skip) { k.From, k.Prev = 0, wire.Hash{} }), false},
		{"from 1 with a zero prev", skip(func(k *wire.Skip) { k.From, k.Prev = 1, wire.Hash{} }), true},
		{"from 1 with a prev", skip(func(k *wire.Skip) { k.From = 1 }), false},
		{"from 2 with a zero prev", skip(func(k *wire.Skip) { k.From, k.Prev = 2, wire.Hash{} }), false},
		{"channel 0", skip(func(k *wire.Skip) { k.Channel = 0 }), false},
		{"a zero hash", skip(func(k *wire.Skip) { k.Hash = wire.Hash{} }), false},
		{"HLC 0", skip(func(k *wire.Skip) { k.HLC = 0 }), false},
		{"no table", skip(func(k *wire.Skip) { k.Tables = nil }), true},
		{"64 tables", skip(func(k *wire.Skip) { k.Tables = tableNames(wire.MaxSkipTables) }), true},
		{"65 tables", skip(func(k *wire.Skip) { k.Tables = tableNames(wire.MaxSkipTables + 1) }), false},
		{"tables out of order", skip(func(k *wire.Skip) { k.Tables = [][]byte{[]byte("b"), []byte("a")} }), false},
		{"a table twice", skip(func(k *wire.Skip) { k.Tables = [][]byte{[]byte("a"), []byte("a")} }), false},
		{"a table outside the name rule", skip(func(k *wire.Skip) { k.Tables = [][]byte{[]byte("a/b")} }), false},
		{"an empty table name", skip(func(k *wire.Skip) { k.Tables = [][]byte{{}} }), false},
		{"a table of 64 bytes", skip(func(k *wire.Skip) { k.Tables = [][]byte{bytes.Repeat([]byte("t"), 64)} }), true},
		{"a table of 65 bytes", skip(func(k *wire.Skip) { k.Tables = [][]byte{bytes.Repeat([]byte("t"), 65)} }), false},
		{"generation 0", skip(func(k *wire.Skip) { k.Generation = 0 }), true},
	} {
		verr := c.v.Validate()
		_, derr := decodeV4(c.v)
		if c.ok {
			if verr != nil || derr != nil {
				t.Errorf("SKIP %s: Validate %v, decode %v", c.name, verr, derr)
			}
			continue
		}
		if verr == nil || derr == nil || derr.Code != wire.CodeBadField || derr.Class != wire.ClassProtocol {
			t.Errorf("SKIP %s: Validate %v, decode %v; want bad-field from both", c.name, verr, derr)
		}
	}
	// The largest SKIP (64 tables of 64 bytes, every number at its widest) is well within
	// the control body bound.
	big := skip(func(k *wire.Skip) {
		k.Channel, k.From, k.To, k.HLC, k.Generation = 1<<32-1, 1<<64-2, 1<<64-1, 1<<64-1, wire.MaxGeneration
		k.Tables = make([][]byte, wire.MaxSkipTables)
		for i := range k.Tables {
			k.Tables[i] = append(bytes.Repeat([]byte("t"), 62), byte('A'+i/26), byte('a'+i%26))
		}
	})
	if enc := body(big); len(enc) > 8<<10 {
		t.Errorf("the largest SKIP body takes %d bytes", len(enc))
	} else if _, err := decodeV4(big); err != nil {
		t.Errorf("the largest SKIP: %v", err)
	}
}

// TestSkipRequiredKeys: a SKIP without one of keys 1 to 6 or 8 is bad-cbor; key 7 (tables)
// is optional, and present empty is bad-cbor (an empty optional value is omitted); a key of
// a later build is kept.
func TestSkipRequiredKeys(t *testing.T) {
	full := func() map[uint64]any {
		return map[uint64]any{1: 1, 2: 2, 3: 4, 4: hash9[:], 5: hash9[:], 6: 9, 7: []any{[]byte("t")}, 8: 0}
	}
	for _, k := range []uint64{1, 2, 3, 4, 5, 6, 8} {
		m := full()
		delete(m, k)
		enc := cb(m)
		if _, err := wire.DecodeBody(wire.Frame{Header: wire.Header{Type: wire.TypeSkip, Length: uint32(len(enc))}, Body: enc}); err == nil || err.Code != wire.CodeBadCBOR {
			t.Errorf("SKIP without key %d: %v, want bad-cbor", k, err)
		}
	}
	m := full()
	delete(m, 7)
	if _, err := decode(raw(wire.TypeSkip, 0, 0, cb(m))); err != nil {
		t.Errorf("SKIP without tables: %v", err)
	}
	m[7] = []any{}
	if _, err := decode(raw(wire.TypeSkip, 0, 0, cb(m))); err == nil || err.Code != wire.CodeBadCBOR {
		t.Errorf("SKIP with an empty table list: %v, want bad-cbor", err)
	}
	m = full()
	m[30] = "later"
	enc := cb(m)
	frames, err := decode(raw(wire.TypeSkip, 0, 0, enc))
	if err != nil {
		t.Fatalf("SKIP with key 30: %v", err)
	}
	if re, _ := wire.EncodeMessage(frames); !bytes.Equal(re[wire.HeaderSize:], enc) {
		t.Errorf("SKIP with key 30 does not re-encode byte for byte")
	}
	// SKIP is connection-level: a header channel other than 0 is bad-channel.
	if _, err := decode(raw(wire.TypeSkip, 0, 1, cb(full()))); err == nil || err.Code != wire.CodeBadChannel {
		t.Errorf("SKIP with header channel 1: %v, want bad-channel", err)
	}
}

// TestLinkFieldRules: LINK's mode is 0, 1 or 2; its tables at most MaxLinkTables (64), under
// the name rule, strictly ascending; key 1 is required and key 2 optional.
func TestLinkFieldRules(t *testing.T) {
	for _, c := range []struct {
		name string
		v    *wire.Link
		ok   bool
	}{
		{"both, no table", &wire.Link{}, true},
		{"receive", &wire.Link{Mode: wire.LinkReceive}, true},
		{"send", &wire.Link{Mode: wire.LinkSend, Tables: [][]byte{[]byte("t")}}, true},
		{"mode 3", &wire.Link{Mode: 3}, false},
		{"64 tables", &wire.Link{Tables: tableNames(wire.MaxLinkTables)}, true},
		{"65 tables", &wire.Link{Tables: tableNames(wire.MaxLinkTables + 1)}, false},
		{"tables out of order", &wire.Link{Tables: [][]byte{[]byte("b"), []byte("a")}}, false},
		{"a table twice", &wire.Link{Tables: [][]byte{[]byte("a"), []byte("a")}}, false},
		{"a table outside the name rule", &wire.Link{Tables: [][]byte{[]byte("a/b")}}, false},
	} {
		verr := c.v.Validate()
		_, derr := decodeV4(c.v)
		if c.ok {
			if verr != nil || derr != nil {
				t.Errorf("LINK %s: Validate %v, decode %v", c.name, verr, derr)
			}
			continue
		}
		if verr == nil || derr == nil || derr.Code != wire.CodeBadField {
			t.Errorf("LINK %s: Validate %v, decode %v; want bad-field from both", c.name, verr, derr)
		}
	}
	enc := cb(map[uint64]any{2: []any{[]byte("t")}})
	if _, err := wire.DecodeBody(wire.Frame{Header: wire.Header{Type: wire.TypeLink, Length: uint32(len(enc))}, Body: enc}); err == nil || err.Code != wire.CodeBadCBOR {
		t.Errorf("LINK without key 1: %v, want bad-cbor", err)
	}
	for _, m := range []string{"both", "receive", "send"} {
		if got, ok := wire.ParseLinkMode(m); !ok || got.String() != m {
			t.Errorf("ParseLinkMode(%q) = %v, %v", m, got, ok)
		}
	}
	if _, ok := wire.ParseLinkMode("sideways"); ok {
		t.Error("ParseLinkMode took sideways")
	}
}

// tableNames is n distinct table names in ascending order: t1000, t1001, ...
func tableNames(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte("t" + strconv.Itoa(1000+i))
	}
	return out
}

// TestHoldsFieldRules: HOLDS's channel is above 0, its table under the name rule, its
// origins at most MaxHoldsSeqs (512), each non-zero at a seq of at least 1, strictly
// ascending; its since is any seq (0 is its absence); from the decoder and from Validate
// alike. The largest HOLDS (512 origins of the widest seq, a table of 64 bytes, the widest
// since) is well within the control body bound.
func TestHoldsFieldRules(t *testing.T) {
	seqs := func(n int, seq uint64) []wire.OriginSeq {
		out := make([]wire.OriginSeq, n)
		for i := range out {
			out[i] = wire.OriginSeq{Origin: wire.OriginID{1, byte(i >> 8), byte(i)}, Seq: seq}
		}
		return out
	}
	holds := func(mod func(h *wire.Holds)) *wire.Holds {
		h := &wire.Holds{Channel: 1, Table: []byte("users"), Seqs: []wire.OriginSeq{{Origin: originA, Seq: 3}, {Origin: originB, Seq: 1}}}
		mod(h)
		return h
	}
	for _, c := range []struct {
		name string
		v    *wire.Holds
		ok   bool
	}{
		{"two origins", holds(func(*wire.Holds) {}), true},
		{"no origin (held not at all)", holds(func(h *wire.Holds) { h.Seqs = nil }), true},
		{"channel 0", holds(func(h *wire.Holds) { h.Channel = 0 }), false},
		{"an empty table name", holds(func(h *wire.Holds) { h.Table = nil }), false},
		{"a table outside the name rule", holds(func(h *wire.Holds) { h.Table = []byte("a/b") }), false},
		{"a table of 64 bytes", holds(func(h *wire.Holds) { h.Table = bytes.Repeat([]byte("t"), 64) }), true},
		{"a table of 65 bytes", holds(func(h *wire.Holds) { h.Table = bytes.Repeat([]byte("t"), 65) }), false},
		{"512 origins", holds(func(h *wire.Holds) { h.Seqs = seqs(wire.MaxHoldsSeqs, 1) }), true},
		{"513 origins", holds(func(h *wire.Holds) { h.Seqs = seqs(wire.MaxHoldsSeqs+1, 1) }), false},
		{"a zero origin", holds(func(h *wire.Holds) { h.Seqs = []wire.OriginSeq{{Seq: 1}, {Origin: originB, Seq: 1}} }), false},
		{"seq 0", holds(func(h *wire.Holds) { h.Seqs[1].Seq = 0 }), false},
		{"origins out of order", holds(func(h *wire.Holds) { h.Seqs[0], h.Seqs[1] = h.Seqs[1], h.Seqs[0] }), false},
		{"an origin twice", holds(func(h *wire.Holds) { h.Seqs[1].Origin = originA }), false},
		{"since seq 1", holds(func(h *wire.Holds) { h.Since = 1 }), true},
		{"since the widest seq, no origin", holds(func(h *wire.Holds) { h.Seqs, h.Since = nil, 1<<64-1 }), true},
	} {
		verr := c.v.Validate()
		_, derr := decodeV4(c.v)
		if c.ok {
			if verr != nil || derr != nil {
				t.Errorf("HOLDS %s: Validate %v, decode %v", c.name, verr, derr)
			}
			continue
		}
		if verr == nil || derr == nil || derr.Code != wire.CodeBadField || derr.Class != wire.ClassProtocol {
			t.Errorf("HOLDS %s: Validate %v, decode %v; want bad-field from both", c.name, verr, derr)
		}
	}
	big := holds(func(h *wire.Holds) {
		h.Channel, h.Table, h.Seqs, h.Since = 1<<32-1, bytes.Repeat([]byte("t"), 64), seqs(wire.MaxHoldsSeqs, 1<<64-1), 1<<64-1
	})
	if enc := body(big); len(enc) > 16<<10 {
		t.Errorf("the largest HOLDS body takes %d bytes", len(enc))
	} else if _, err := decodeV4(big); err != nil {
		t.Errorf("the largest HOLDS: %v", err)
	}
}

// TestHoldsRequiredKeys: a HOLDS without key 1 or 2 is bad-cbor; keys 3 (the origins) and
// 4 (since) are optional, and present empty (an empty list, since 0) is bad-cbor (an empty
// optional value is omitted); key 4 is this build's, decoded into Since, not kept as a
// later build's; a key of a later build is kept; a header channel other than 0 is
// bad-channel (the copy channel is key 1).
func TestHoldsRequiredKeys(t *testing.T) {
	full := func() map[uint64]any {
		return map[uint64]any{1: 1, 2: []byte("t"), 3: []any{[]any{originA[:], 4}}, 4: 9}
	}
	for _, k := range []uint64{1, 2} {
		m := full()
		delete(m, k)
		if _, err := decode(raw(wire.TypeHolds, 0, 0, cb(m))); err == nil || err.Code != wire.CodeBadCBOR {
			t.Errorf("HOLDS without key %d: %v, want bad-cbor", k, err)
		}
	}
	m := full()
	delete(m, 3)
	if _, err := decode(raw(wire.TypeHolds, 0, 0, cb(m))); err != nil {
		t.Errorf("HOLDS without origins: %v", err)
	}
	m[3] = []any{}
	if _, err := decode(raw(wire.TypeHolds, 0, 0, cb(m))); err == nil || err.Code != wire.CodeBadCBOR {
		t.Errorf("HOLDS with an empty origin list: %v, want bad-cbor", err)
	}
	m = full()
	delete(m, 4)
	if h, err := wire.DecodeHolds(cb(m)); err != nil || h.Since != 0 {
		t.Errorf("HOLDS without since: %+v, %v", h, err)
	}
	m[4] = 0
	if _, err := decode(raw(wire.TypeHolds, 0, 0, cb(m))); err == nil || err.Code != wire.CodeBadCBOR {
		t.Errorf("HOLDS with since 0 present: %v, want bad-cbor", err)
	}
	if h, err := wire.DecodeHolds(cb(full())); err != nil || h.Since != 9 || h.Extra != nil {
		t.Errorf("HOLDS since 9: %+v, %v; want Since 9 and no key of a later build", h, err)
	}
	m = full()
	m[3] = []any{[]any{originA[:], 4, 5}}
	if _, err := decode(raw(wire.TypeHolds, 0, 0, cb(m))); err == nil || err.Code != wire.CodeBadCBOR {
		t.Errorf("HOLDS with an origin of three fields: %v, want bad-cbor", err)
	}
	m = full()
	m[30] = "later"
	enc := cb(m)
	frames, err := decode(raw(wire.TypeHolds, 0, 0, enc))
	if err != nil {
		t.Fatalf("HOLDS with key 30: %v", err)
	}
	if re, _ := wire.EncodeMessage(frames); !bytes.Equal(re[wire.HeaderSize:], enc) {
		t.Errorf("HOLDS with key 30 does not re-encode byte for byte")
	}
	if _, err := decode(raw(wire.TypeHolds, 0, 1, cb(full()))); err == nil || err.Code != wire.CodeBadChannel {
		t.Errorf("HOLDS with header channel 1: %v, want bad-channel", err)
	}
}
