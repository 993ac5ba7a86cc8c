package protocol_test

import (
	"reflect"
	"testing"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// HOLDS on a session (SPEC.md, "HOLDS"): the listener (L) serves a copy the dialer (D)
// asked for, copyPair's version-4 pair, and says how far its snapshot holds placed tables
// before its COPYBEGIN.

// holdsSeqs is n origins in ascending order, each at seq first+i.
func holdsSeqs(n int, first uint64) []wire.OriginSeq {
	out := make([]wire.OriginSeq, n)
	for i := range out {
		out[i] = wire.OriginSeq{Origin: wire.OriginID{1, byte(i >> 8), byte(i)}, Seq: first + uint64(i)}
	}
	return out
}

// TestCopyHolds: each CopyHolds reaches the taker as EventCopyHolds, in the order sent and
// before EventCopyBegin; a table of more than wire.MaxHoldsSeqs origins goes as two frames,
// origins ascending across them, each with the table's since; a table listed with no
// origin arrives with none; the taker's view of the whole list and of each table's since
// equals what was sent. After BeginCopy, CopyHolds is refused with invalid-state and sends
// nothing.
func TestCopyHolds(t *testing.T) {
	o := prototest.Origin(7)
	p := copyPair(t, o, protocol.Limits{}, protocol.Limits{}, nil, nil)
	if v := p.L.S.Handshake().Version; v != 4 {
		t.Fatalf("version %d", v)
	}
	long := holdsSeqs(wire.MaxHoldsSeqs+1, 1)
	sent := len(p.L.Sent)
	must(t, p.L.S.V4().CopyHolds([]byte("a"), []wire.OriginSeq{{Origin: o, Seq: 3}}, 0))
	must(t, p.L.S.V4().CopyHolds([]byte("b"), long, 1<<40))
	must(t, p.L.S.V4().CopyHolds([]byte("c"), nil, 4))
	must(t, p.L.S.V3().BeginCopy(nil, 0, 0, 0))
	if err := p.L.S.V4().CopyHolds([]byte("d"), nil, 0); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("CopyHolds after BeginCopy: %v, want invalid-state", err)
	}
	must(t, p.L.S.V3().EndCopy())
	p.Pump(10)
	if got, want := sentTypes(t, p.L, sent), []wire.Type{wire.TypeHolds, wire.TypeHolds, wire.TypeHolds, wire.TypeHolds,
		wire.TypeCopyBegin, wire.TypeCopyEnd}; !reflect.DeepEqual(got, want) {
		t.Fatalf("the sender sent %v, want %v", got, want)
	}
	var order []string
	var holds []*wire.Holds
	for _, e := range p.D.Events {
		switch e.Kind {
		case protocol.EventCopyHolds:
			holds = append(holds, e.Holds)
			order = append(order, e.Kind.String()+" "+string(e.Holds.Table))
		case protocol.EventCopyBegin, protocol.EventCopyEnd:
			order = append(order, e.Kind.String())
		}
	}
	if want := []string{"copy-holds a", "copy-holds b", "copy-holds b", "copy-holds c", "copy-begin", "copy-end"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("the taker saw %v, want %v", order, want)
	}
	for i, h := range holds {
		if h.Channel != 1 {
			t.Errorf("HOLDS of %q on channel %d, the copy's is 1", h.Table, h.Channel)
		}
		if want := []uint64{0, 1 << 40, 1 << 40, 4}[i]; h.Since != want {
			t.Errorf("HOLDS %d, of %q, since %d, want %d", i, h.Table, h.Since, want)
		}
	}
	if !reflect.DeepEqual(holds[0].Seqs, []wire.OriginSeq{{Origin: o, Seq: 3}}) {
		t.Errorf("table a: %+v", holds[0].Seqs)
	}
	if len(holds[1].Seqs) != wire.MaxHoldsSeqs || len(holds[2].Seqs) != 1 ||
		!reflect.DeepEqual(append(append([]wire.OriginSeq(nil), holds[1].Seqs...), holds[2].Seqs...), long) {
		t.Errorf("table b in frames of %d and %d origins, not the %d sent in order", len(holds[1].Seqs), len(holds[2].Seqs), len(long))
	}
	if holds[3].Seqs != nil {
		t.Errorf("table c, held not at all: %+v", holds[3].Seqs)
	}
	if p.D.S.Err() != nil || p.L.S.Err() != nil {
		t.Fatalf("the session closed: %v / %v", p.D.S.Err(), p.L.S.Err())
	}
}

// TestCopyHoldsFitsThePeersFrame: at the smallest frame limit a peer may have, a list
// that does not fit one frame is split further; every origin arrives, in order, and the
// taker takes every frame (each goes on above the last).
func TestCopyHoldsFitsThePeersFrame(t *testing.T) {
	p := copyPair(t, prototest.Origin(7), protocol.Limits{MaxFrameBody: wire.MinMaxFrame}, protocol.Limits{}, nil, nil)
	seqs := holdsSeqs(300, 1<<40)
	must(t, p.L.S.V4().CopyHolds([]byte("t"), seqs, 0))
	p.Pump(10)
	var got []wire.OriginSeq
	for _, e := range eventsAfter(p.D, 0, protocol.EventCopyHolds) {
		got = append(got, e.Holds.Seqs...)
	}
	if n := p.D.Count(protocol.EventCopyHolds); n < 2 || !reflect.DeepEqual(got, seqs) || p.D.S.Err() != nil {
		t.Fatalf("%d origins in %d frames, err %v", len(got), n, p.D.S.Err())
	}
}

// TestCopyHoldsRefusals: what CopyHolds refuses, and that a refused call sends nothing and
// leaves the order where it was: invalid-state without a copy served or on a version-3
// connection; bad-argument for a list or a table that breaks HOLDS's rules or does not go
// forward from the last call, or a table's list going on with another since.
func TestCopyHoldsRefusals(t *testing.T) {
	p := v4pair(t, protocol.Limits{}, protocol.Limits{})
	if err := p.L.S.V4().CopyHolds([]byte("t"), nil, 0); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("CopyHolds with no copy asked: %v, want invalid-state", err)
	}
	v3 := established(t, prototest.ConfigV3(wire.RoleDialer, "r", 1), prototest.ConfigV3(wire.RoleListener, "s", 2))
	must(t, v3.D.S.V3().RequestCopy(nil, nil))
	v3.Pump(10)
	if v3.L.Count(protocol.EventCopyRequested) != 1 {
		t.Fatal("no copy asked on version 3")
	}
	if err := v3.L.S.V4().CopyHolds([]byte("t"), nil, 0); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("CopyHolds on a version-3 connection: %v, want invalid-state", err)
	}

	o := prototest.Origin(7)
	p = copyPair(t, o, protocol.Limits{}, protocol.Limits{}, nil, nil)
	long := holdsSeqs(wire.MaxHoldsSeqs+1, 1)
	unordered := holdsSeqs(wire.MaxHoldsSeqs+1, 1)
	unordered[wire.MaxHoldsSeqs] = unordered[wire.MaxHoldsSeqs-1] // twice, across the frames' split
	a, b := wire.OriginID{5}, wire.OriginID{6}
	must(t, p.L.S.V4().CopyHolds([]byte("m"), []wire.OriginSeq{{Origin: b, Seq: 1}}, 0))
	must(t, p.L.S.V4().CopyHolds([]byte("n"), nil, 0))
	p.Pump(10)
	for _, c := range []struct {
		name  string
		table string
		seqs  []wire.OriginSeq
	}{
		{"a table outside the name rule", "a/b", nil},
		{"an empty table", "", nil},
		{"a zero origin", "x", []wire.OriginSeq{{Seq: 1}}},
		{"seq 0", "x", []wire.OriginSeq{{Origin: a, Seq: 0}}},
		{"origins out of order", "x", []wire.OriginSeq{{Origin: b, Seq: 1}, {Origin: a, Seq: 1}}},
		{"an origin twice across the split", "x", unordered},
		{"a table below the last", "m", []wire.OriginSeq{{Origin: wire.OriginID{9}, Seq: 1}}},
		{"the last table again, after none", "n", []wire.OriginSeq{{Origin: a, Seq: 1}}},
	} {
		if err := p.L.S.V4().CopyHolds([]byte(c.table), c.seqs, 0); !isCode(err, wire.CodeBadArgument) {
			t.Errorf("CopyHolds %s: %v, want bad-argument", c.name, err)
		}
	}
	before := len(p.L.Sent)
	must(t, p.L.S.V4().CopyHolds([]byte("o"), long[:2], 9))
	for _, c := range []struct {
		name  string
		seqs  []wire.OriginSeq
		since uint64
	}{
		{"going on at the last origin", long[1:3], 9},
		{"going on below the last origin", long[0:1], 9},
		{"going on with none", nil, 9},
		{"going on with another since", long[2:3], 10},
		{"going on without since", long[3:4], 0},
	} {
		if err := p.L.S.V4().CopyHolds([]byte("o"), c.seqs, c.since); !isCode(err, wire.CodeBadArgument) {
			t.Errorf("CopyHolds of table o %s: %v, want bad-argument", c.name, err)
		}
	}
	p.Pump(10)
	if got := sentTypes(t, p.L, before); !reflect.DeepEqual(got, []wire.Type{wire.TypeHolds}) {
		t.Fatalf("sent %v; only the one HOLDS of table o taken", got)
	}
	must(t, p.L.S.V4().CopyHolds([]byte("o"), long[2:], 9))
	must(t, p.L.S.V3().BeginCopy(nil, 0, 0, 0))
	p.Pump(10)
	var got []wire.OriginSeq
	for _, e := range p.D.Events {
		if e.Kind == protocol.EventCopyHolds && string(e.Holds.Table) == "o" {
			got = append(got, e.Holds.Seqs...)
			if e.Holds.Since != 9 {
				t.Errorf("a HOLDS of table o since %d, the caller's 9", e.Holds.Since)
			}
		}
	}
	if !reflect.DeepEqual(got, long) || p.D.Count(protocol.EventCopyBegin) != 1 || p.D.S.Err() != nil {
		t.Fatalf("table o arrived as %d origins, %d copy-begin, err %v", len(got), p.D.Count(protocol.EventCopyBegin), p.D.S.Err())
	}
}

// TestCopyHoldsReceiveChecks: what closes the taker's session (SPEC.md, "HOLDS": receive
// checks), with the code and frame of each, and no EventCopyHolds for the frame; a HOLDS of
// a copy closed since is dropped; HOLDS on a version-3 connection is a frame of another
// version.
func TestCopyHoldsReceiveChecks(t *testing.T) {
	o := prototest.Origin(7)
	pos := []wire.CopyPosition{{Origin: o, Seq: 3, Hash: prototest.Chain(o, 3, 1, 4)[2].Hash, HLC: 9}}
	x, y := wire.OriginID{5}, wire.OriginID{6}
	holds := func(table string, seqs ...wire.OriginSeq) []byte {
		return prototest.Frame(&wire.Holds{Channel: 1, Table: []byte(table), Seqs: seqs})
	}
	sent := func(table string, seqs ...wire.OriginSeq) func(p *prototest.Pair) {
		return func(p *prototest.Pair) {
			must(t, p.L.S.V4().CopyHolds([]byte(table), seqs, 0))
			p.Pump(10)
		}
	}
	for _, c := range []struct {
		name  string
		setup func(p *prototest.Pair) // after the copy was asked
		msg   []byte
		code  wire.Code
	}{
		{"HOLDS on a channel never opened", nil, prototest.Frame(&wire.Holds{Channel: 9, Table: []byte("t")}), wire.CodeBadChannel},
		{"HOLDS after the copy's COPYBEGIN", begin(pos), holds("t"), wire.CodeUnexpectedFrame},
		{"HOLDS of a table below the last", sent("u", wire.OriginSeq{Origin: x, Seq: 1}), holds("t", wire.OriginSeq{Origin: y, Seq: 1}), wire.CodeOutOfOrder},
		{"HOLDS of the last table at its last origin", sent("t", wire.OriginSeq{Origin: x, Seq: 1}),
			holds("t", wire.OriginSeq{Origin: x, Seq: 2}), wire.CodeOutOfOrder},
		{"HOLDS of the last table below its last origin", sent("t", wire.OriginSeq{Origin: y, Seq: 1}),
			holds("t", wire.OriginSeq{Origin: x, Seq: 2}), wire.CodeOutOfOrder},
		{"HOLDS of the last table after one listing none", sent("t"), holds("t", wire.OriginSeq{Origin: x, Seq: 1}), wire.CodeOutOfOrder},
		{"HOLDS of the last table listing none", sent("t", wire.OriginSeq{Origin: x, Seq: 1}), holds("t"), wire.CodeOutOfOrder},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := copyPair(t, o, protocol.Limits{}, protocol.Limits{}, nil, nil)
			if c.setup != nil {
				c.setup(p)
			}
			n := p.D.Count(protocol.EventCopyHolds)
			must(t, p.D.S.Receive(p.Now, pingThen(c.msg)))
			p.D.Drain()
			if e := p.D.S.Err(); e == nil || e.Code != c.code || e.Frame != wire.TypeHolds || e.Offset != len(ping7) {
				t.Fatalf("%v, want %s at HOLDS, offset %d", e, c.code, len(ping7))
			}
			if got := p.D.Count(protocol.EventCopyHolds); got != n {
				t.Fatalf("%d copy-holds events for a refused HOLDS", got-n)
			}
		})
	}

	// Going on above the last origin, and to a later table, is taken.
	p := copyPair(t, o, protocol.Limits{}, protocol.Limits{}, nil, nil)
	sent("t", wire.OriginSeq{Origin: x, Seq: 1})(p)
	must(t, p.D.S.Receive(p.Now, cat(holds("t", wire.OriginSeq{Origin: y, Seq: 1}), holds("u"), holds("v", wire.OriginSeq{Origin: x, Seq: 4}))))
	p.D.Drain()
	if n := p.D.Count(protocol.EventCopyHolds); n != 4 || p.D.S.Err() != nil {
		t.Fatalf("%d copy-holds events, err %v", n, p.D.S.Err())
	}

	// A HOLDS of a copy closed since raced the close: dropped, the session up.
	must(t, p.D.S.V3().AbortCopy(false, wire.CodeGoingAway, "no longer needed"))
	must(t, p.D.S.Receive(p.Now, holds("w")))
	p.D.Drain()
	if n := p.D.Count(protocol.EventCopyHolds); n != 4 || p.D.S.Err() != nil {
		t.Fatalf("a HOLDS of a closed copy: %d copy-holds events, err %v", n, p.D.S.Err())
	}

	// Version 3 has no HOLDS: unexpected-frame, even on the copy's channel.
	v3 := established(t, prototest.ConfigV3(wire.RoleDialer, "r", 1), prototest.ConfigV3(wire.RoleListener, "s", 2))
	must(t, v3.D.S.V3().RequestCopy(nil, nil))
	v3.Pump(10)
	must(t, v3.D.S.Receive(v3.Now, holds("t")))
	if e := v3.D.S.Err(); e == nil || e.Code != wire.CodeUnexpectedFrame || e.Frame != wire.TypeHolds || v3.D.Count(protocol.EventCopyHolds) != 0 {
		t.Fatalf("HOLDS on a version-3 connection: %v", e)
	}
}

// TestCopyHoldsClone: where a copy's HOLDS end is the session's own state, which a clone
// (Clone) copies rather than shares, on both sides: HOLDS a clone sends or receives do not
// move its original's order.
func TestCopyHoldsClone(t *testing.T) {
	p := copyPair(t, prototest.Origin(7), protocol.Limits{}, protocol.Limits{}, nil, nil)
	must(t, p.L.S.V4().CopyHolds([]byte("m"), nil, 0))
	p.Pump(10)
	sender, taker := p.L.S.Clone(), p.D.S.Clone()
	must(t, sender.V4().CopyHolds([]byte("z"), nil, 0))
	must(t, taker.Receive(p.Now, prototest.Frame(&wire.Holds{Channel: 1, Table: []byte("z")})))
	if taker.Err() != nil {
		t.Fatalf("the taker's clone: %v", taker.Err())
	}
	// The originals are still at table m: n goes on from it.
	must(t, p.L.S.V4().CopyHolds([]byte("n"), nil, 0))
	p.Pump(10)
	if n := p.D.Count(protocol.EventCopyHolds); n != 2 || p.D.S.Err() != nil {
		t.Fatalf("the original taker: %d copy-holds, err %v", n, p.D.S.Err())
	}
}
