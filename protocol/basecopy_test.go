package protocol_test

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// The base copy on a session: the dialer (r) asks, the listener (s) serves.

// copyPair is an established version-3 pair whose listener names origin o and has been
// asked for a copy after (table, key).
func copyPair(t *testing.T, o wire.OriginID, dl, ll protocol.Limits, table, key []byte) *prototest.Pair {
	t.Helper()
	dc, lc := prototest.Config(wire.RoleDialer, "r", 1), prototest.Config(wire.RoleListener, "s", 2)
	dc.Limits, lc.Limits = dl, ll
	p := established(t, dc, lc)
	must(t, p.L.S.SetOriginName(o, "seven"))
	must(t, p.D.S.V3().RequestCopy(table, key))
	p.Pump(10)
	if ev := p.L.Last(protocol.EventCopyRequested); ev == nil || !bytes.Equal(ev.Copy.Table, table) || !bytes.Equal(ev.Copy.Key, key) {
		t.Fatalf("copy request: %+v", ev)
	}
	return p
}

func chunkOf(t *testing.T, table string, o wire.OriginID, hlc wire.HLC, keys ...string) []byte {
	t.Helper()
	var recs []wire.CopyRecord
	for _, k := range keys {
		recs = append(recs, wire.CopyRecord{Key: []byte(k), Value: []byte("v" + k), HLC: hlc, Origin: o})
	}
	b, err := wire.AppendChunk(nil, []byte(table), recs)
	must(t, err)
	return b
}

// TestCopyStreams: a copy from begin to end: the vector (in several COPYBEGIN frames when
// long), chunks in order with their records, the count at the end; each chunk's bytes are
// held until AckChunk and granted again after it; both sides close the copy at the end and
// a second one may follow.
func TestCopyStreams(t *testing.T) {
	o := prototest.Origin(7)
	chain := prototest.Chain(o, 3, 1, 4)
	small := protocol.Limits{MaxFrameBody: 1 << 19, MaxChannelBuffer: 1 << 20}
	p := copyPair(t, o, small, small, nil, nil)
	if err := p.L.S.V3().SendChunk(chunkOf(t, "t", o, 5, "a")); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("SendChunk before BeginCopy: %v, want invalid-state", err)
	}
	pos := []wire.CopyPosition{{Origin: o, Seq: 3, Hash: chain[2].Hash, HLC: 9}}
	must(t, p.L.S.V3().BeginCopy(pos, 2, 3, 30))
	credit := p.L.S.V3().CopyCredit()
	if credit != 1<<20 {
		t.Errorf("copy credit %d, want the channel window", credit)
	}
	big := func(table string, keys ...string) []byte {
		var recs []wire.CopyRecord
		for _, k := range keys {
			recs = append(recs, wire.CopyRecord{Key: []byte(k), Value: make([]byte, 150<<10), HLC: 9, Origin: o})
		}
		b, err := wire.AppendChunk(nil, []byte(table), recs)
		must(t, err)
		return b
	}
	c1, c2 := big("t", "a", "b", "c"), big("u", "a")
	if err := p.L.S.V3().SendChunk(big("t", "a", "b", "c", "d")); !isCode(err, wire.CodeFrameTooLarge) {
		t.Errorf("a chunk over the peer's frame limit: %v, want frame-too-large", err)
	}
	must(t, p.L.S.V3().SendChunk(c1))
	if err := p.L.S.V3().SendChunk(chunkOf(t, "t", o, 9, "b")); !isCode(err, wire.CodeBadArgument) {
		t.Errorf("a chunk not above the last one sent: %v, want bad-argument", err)
	}
	must(t, p.L.S.V3().SendChunk(c2))
	if got := p.L.S.V3().CopyCredit(); got != credit-protocol.ChunkFrameSize(len(c1))-protocol.ChunkFrameSize(len(c2)) {
		t.Errorf("credit after two chunks %d", got)
	}
	p.Pump(10)
	begin := p.D.Last(protocol.EventCopyBegin)
	if begin == nil || len(begin.CopyBegin.Positions) != 1 || begin.CopyBegin.Positions[0] != pos[0] ||
		begin.CopyBegin.Tables != 2 || begin.CopyBegin.Records != 3 || begin.CopyBegin.Bytes != 30 {
		t.Fatalf("copy-begin %+v", begin)
	}
	if n := p.D.Count(protocol.EventChunk); n != 2 {
		t.Fatalf("%d chunks received", n)
	}
	first := p.D.Events[len(p.D.Events)-2].Chunk
	if string(first.Table) != "t" || first.Count != 3 || string(first.First) != "a" || string(first.Last) != "c" {
		t.Fatalf("first chunk %+v", first)
	}
	// Nothing acknowledged: the sender's credit stays used up.
	if got := p.L.S.V3().CopyCredit(); got >= credit {
		t.Errorf("credit came back before AckChunk: %d", got)
	}
	must(t, p.D.S.V3().AckChunk())
	must(t, p.D.S.V3().AckChunk())
	if err := p.D.S.V3().AckChunk(); !isCode(err, wire.CodeBadArgument) {
		t.Errorf("a third AckChunk: %v, want bad-argument", err)
	}
	p.Pump(10)
	if got := p.L.S.V3().CopyCredit(); got != credit {
		t.Errorf("credit %d after both chunks were acknowledged, want back at %d", got, credit)
	}
	must(t, p.L.S.V3().EndCopy())
	p.Pump(10)
	if ev := p.D.Last(protocol.EventCopyEnd); ev == nil || ev.Count != 4 {
		t.Fatalf("copy-end %+v", ev)
	}
	if err := p.D.S.V3().AckChunk(); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("AckChunk after the end: %v, want invalid-state", err)
	}
	if err := p.L.S.V3().EndCopy(); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("EndCopy twice: %v, want invalid-state", err)
	}
	// Another copy, after a point, on a new channel.
	must(t, p.D.S.V3().RequestCopy([]byte("t"), []byte("b")))
	if err := p.D.S.V3().RequestCopy(nil, nil); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("a second copy while one is open: %v, want invalid-state", err)
	}
	p.Pump(10)
	if n := p.L.Count(protocol.EventCopyRequested); n != 2 {
		t.Fatalf("%d copy requests", n)
	}
	must(t, p.L.S.V3().BeginCopy(nil, 0, 0, 0))
	if err := p.L.S.V3().SendChunk(chunkOf(t, "t", o, 9, "b")); !isCode(err, wire.CodeBadArgument) {
		t.Errorf("a chunk at the resume point: %v, want bad-argument", err)
	}
	must(t, p.L.S.V3().EndCopy())
	p.Pump(10)
	if p.D.Count(protocol.EventCopyEnd) != 2 || p.D.S.Err() != nil || p.L.S.Err() != nil {
		t.Fatalf("the second copy: %v %v", p.D.S.Err(), p.L.S.Err())
	}
}

// TestCopyLongVector: a vector longer than one frame's list goes in several COPYBEGIN
// frames, ascending; the receiver sees every position.
func TestCopyLongVector(t *testing.T) {
	p := copyPair(t, prototest.Origin(7), protocol.Limits{}, protocol.Limits{}, nil, nil)
	var pos []wire.CopyPosition
	for i := 0; i < 1300; i++ {
		o := wire.OriginID{byte(i >> 8), byte(i), 1}
		must(t, p.L.S.SetOriginName(o, "o"))
		pos = append(pos, wire.CopyPosition{Origin: o, Seq: 1, Hash: wire.Hash{1}, HLC: 1})
	}
	must(t, p.L.S.V3().BeginCopy(pos, 0, 0, 0))
	must(t, p.L.S.V3().EndCopy())
	p.Pump(20)
	got := 0
	for _, e := range p.D.Events {
		if e.Kind == protocol.EventCopyBegin {
			got += len(e.CopyBegin.Positions)
		}
	}
	if got != 1300 || p.D.Count(protocol.EventCopyBegin) != 3 || p.D.Count(protocol.EventCopyEnd) != 1 {
		t.Fatalf("%d positions in %d frames", got, p.D.Count(protocol.EventCopyBegin))
	}
}

// TestCopyBadChunk: a chunk that breaks the copy's rules closes the copy, not the session:
// the receiver reports bad-chunk (COPYABORT side subscriber), the sender sees it aborted,
// the connection goes on, and the channel's bytes are released.
func TestCopyBadChunk(t *testing.T) {
	o := prototest.Origin(7)
	other := prototest.Origin(8)
	chain := prototest.Chain(o, 3, 1, 4)
	pos := []wire.CopyPosition{{Origin: o, Seq: 3, Hash: chain[2].Hash, HLC: 9}}
	for _, c := range []struct {
		name  string
		after []byte // resume after ("t", after)
		prev  []byte // a chunk sent first
		body  []byte
	}{
		{"a malformed body", nil, nil, []byte{2, 1, 't', 1}},
		{"a record of an origin outside the vector", nil, nil, chunkOf(t, "t", other, 1, "a")},
		{"a version newer than the vector", nil, nil, chunkOf(t, "t", o, 10, "a")},
		{"a chunk not above the previous one", nil, chunkOf(t, "t", o, 9, "a", "c"), chunkOf(t, "t", o, 9, "b")},
		{"a table before the previous one", nil, chunkOf(t, "u", o, 9, "a"), chunkOf(t, "t", o, 9, "z")},
		{"a chunk at the resume point", []byte("k"), nil, chunkOf(t, "t", o, 9, "k")},
	} {
		t.Run(c.name, func(t *testing.T) {
			var p *prototest.Pair
			if c.after != nil {
				p = copyPair(t, o, protocol.Limits{}, protocol.Limits{}, []byte("t"), c.after)
			} else {
				p = copyPair(t, o, protocol.Limits{}, protocol.Limits{}, nil, nil)
			}
			must(t, p.L.S.SetOriginName(other, "eight"))
			must(t, p.L.S.V3().BeginCopy(pos, 0, 0, 0))
			if c.prev != nil {
				must(t, p.L.S.V3().SendChunk(c.prev))
			}
			p.Pump(10)
			// The sender's own check would refuse the bad chunk: bypass it.
			must(t, p.D.S.Receive(p.Now, prototest.RawFrame(wire.TypeChunk, 0, 1, c.body)))
			p.Pump(10)
			ev := p.D.Last(protocol.EventCopyAborted)
			if ev == nil || ev.Err.Code != wire.CodeBadChunk || ev.ByPeer || ev.Outgoing {
				t.Fatalf("receiver: %+v", ev)
			}
			if sev := p.L.Last(protocol.EventCopyAborted); sev == nil || sev.Err.Code != wire.CodeBadChunk || !sev.ByPeer || !sev.Outgoing {
				t.Fatalf("sender: %+v", sev)
			}
			if p.D.S.State() != protocol.StateEstablished || p.L.S.State() != protocol.StateEstablished {
				t.Fatalf("the session closed: %v %v", p.D.S.Err(), p.L.S.Err())
			}
			if err := p.L.S.V3().SendChunk(chunkOf(t, "z", o, 9, "a")); !isCode(err, wire.CodeInvalidState) {
				t.Errorf("SendChunk after the abort: %v, want invalid-state", err)
			}
			// The aborted copy's chunks in flight are stale; a new copy may start.
			must(t, p.D.S.V3().RequestCopy(nil, nil))
			p.Pump(10)
			if p.L.Count(protocol.EventCopyRequested) != 2 {
				t.Fatal("no second copy")
			}
		})
	}
}

// TestCopyRefused: what closes the session instead (SPEC.md, "CHUNK": the checks before
// the content), and the copy's frames on other versions.
func TestCopyRefused(t *testing.T) {
	o := prototest.Origin(7)
	chain := prototest.Chain(o, 3, 1, 4)
	pos := []wire.CopyPosition{{Origin: o, Seq: 3, Hash: chain[2].Hash, HLC: 9}}
	good := chunkOf(t, "t", o, 9, "a")
	for _, c := range []struct {
		name  string
		setup func(p *prototest.Pair) // after the copy was requested
		to    func(p *prototest.Pair) *prototest.Side
		msg   []byte
		code  wire.Code
		frame wire.Type
	}{
		{"CHUNK before COPYBEGIN", nil, receiver, prototest.RawFrame(wire.TypeChunk, 0, 1, good), wire.CodeUnexpectedFrame, wire.TypeChunk},
		{"COPYEND before COPYBEGIN", nil, receiver, prototest.Frame(&wire.CopyEnd{Channel: 1}), wire.CodeUnexpectedFrame, wire.TypeCopyEnd},
		{"CHUNK on a channel never opened", begin(pos), receiver, prototest.RawFrame(wire.TypeChunk, 0, 9, good), wire.CodeBadChannel, wire.TypeChunk},
		{"COPYBEGIN on a channel never opened", nil, receiver, prototest.Frame(&wire.CopyBegin{Channel: 9}), wire.CodeBadChannel, wire.TypeCopyBegin},
		{"COPYBEGIN after a CHUNK", func(p *prototest.Pair) {
			begin(pos)(p)
			must(t, p.L.S.V3().SendChunk(good))
			p.Pump(10)
		}, receiver, prototest.Frame(&wire.CopyBegin{Channel: 1}), wire.CodeUnexpectedFrame, wire.TypeCopyBegin},
		{"COPYBEGIN of an origin never named", nil, receiver, prototest.Frame(&wire.CopyBegin{Channel: 1,
			Positions: []wire.CopyPosition{{Origin: prototest.Origin(9), Seq: 1, Hash: wire.Hash{1}}}}), wire.CodeUnexpectedFrame, wire.TypeCopyBegin},
		{"COPYBEGIN going back across frames", begin(pos), receiver, prototest.Frame(&wire.CopyBegin{Channel: 1,
			Positions: []wire.CopyPosition{{Origin: o, Seq: 1, Hash: wire.Hash{1}}}}), wire.CodeOutOfOrder, wire.TypeCopyBegin},
		{"DATA on the copy channel", begin(pos), receiver, prototest.RawFrame(wire.TypeData, 0, 1, append(chain[0].Hash[:], chain[0].Raw...)),
			wire.CodeUnexpectedFrame, wire.TypeData},
		{"CHUNK past the copy's credit", begin(pos), receiver, func() []byte {
			// Three chunks that pass the channel's window of 1 MiB (the connection's is larger).
			var msg []byte
			for _, k := range []string{"a", "b", "c"} {
				recs := []wire.CopyRecord{{Key: []byte(k), Value: make([]byte, 400<<10), HLC: 9, Origin: o}}
				b, _ := wire.AppendChunk(nil, []byte("t"), recs)
				msg = append(msg, prototest.RawFrame(wire.TypeChunk, 0, 1, b)...)
			}
			return msg
		}(), wire.CodeCreditOverrun, wire.TypeChunk},
		{"a second COPY while one is open", nil, sender, prototest.Frame(&wire.Copy{Channel: 2}), wire.CodeBadField, wire.TypeCopy},
		{"COPY on a channel not above the last", nil, sender, prototest.Frame(&wire.Copy{Channel: 1}), wire.CodeBadChannel, wire.TypeCopy},
		{"COPYABORT of a copy channel never opened", nil, sender, prototest.Frame(&wire.CopyAbort{Channel: 5, Code: "going-away", Class: "transient"}),
			wire.CodeBadChannel, wire.TypeCopyAbort},
	} {
		t.Run(c.name, func(t *testing.T) {
			small := protocol.Limits{MaxFrameBody: 1 << 19, MaxChannelBuffer: 1 << 20}
			p := copyPair(t, o, small, small, nil, nil)
			if c.setup != nil {
				c.setup(p)
			}
			to := c.to(p)
			must(t, to.S.Receive(p.Now, c.msg))
			if e := to.S.Err(); e == nil || e.Code != c.code || e.Frame != c.frame {
				t.Fatalf("%v, want %s at %s", e, c.code, c.frame)
			}
		})
	}

	// Version 2 knows none of it.
	p := established(t, prototest.ConfigV2(wire.RoleDialer, "r", 1), prototest.ConfigV2(wire.RoleListener, "s", 2))
	if err := p.D.S.V3().RequestCopy(nil, nil); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("RequestCopy on version 2: %v", err)
	}
	must(t, p.L.S.Receive(p.Now, prototest.Frame(&wire.Copy{Channel: 1})))
	if e := p.L.S.Err(); e == nil || e.Code != wire.CodeUnexpectedFrame {
		t.Errorf("COPY on version 2: %v", e)
	}
	p = established(t, prototest.ConfigV2(wire.RoleDialer, "r", 1), prototest.ConfigV2(wire.RoleListener, "s", 2))
	must(t, p.D.S.Receive(p.Now, prototest.RawFrame(wire.TypeChunk, 0, 1, good)))
	if e := p.D.S.Err(); e == nil || e.Code != wire.CodeUnexpectedFrame {
		t.Errorf("CHUNK on version 2: %v", e)
	}
}

func receiver(p *prototest.Pair) *prototest.Side { return p.D }
func sender(p *prototest.Pair) *prototest.Side   { return p.L }

func begin(pos []wire.CopyPosition) func(p *prototest.Pair) {
	return func(p *prototest.Pair) {
		if err := p.L.S.V3().BeginCopy(pos, 0, 0, 0); err != nil {
			panic(err)
		}
		p.Pump(10)
	}
}

// TestCopyAbort: either side stops a copy with COPYABORT: the sender at its bound
// (copy-busy), the receiver going away; chunks in flight are then stale; an abort of a copy
// closed since is ignored; a vector over the receiver's origin bound closes the session
// (too-many-origins, at the ORIGIN frames it needs); a count at COPYEND that is not what
// arrived is bad-chunk.
func TestCopyAbort(t *testing.T) {
	o := prototest.Origin(7)
	chain := prototest.Chain(o, 3, 1, 4)
	pos := []wire.CopyPosition{{Origin: o, Seq: 3, Hash: chain[2].Hash, HLC: 9}}

	p := copyPair(t, o, protocol.Limits{}, protocol.Limits{}, nil, nil)
	must(t, p.L.S.V3().AbortCopy(true, wire.CodeCopyBusy, "2 copies run"))
	p.Pump(10)
	if ev := p.D.Last(protocol.EventCopyAborted); ev == nil || ev.Err.Code != wire.CodeCopyBusy || ev.Err.Class != wire.ClassTransient ||
		!ev.ByPeer || ev.Outgoing || ev.Err.Message != "2 copies run" {
		t.Fatalf("copy-busy at the receiver: %+v", ev)
	}
	if err := p.L.S.V3().AbortCopy(true, wire.CodeInvalidState, ""); !isCode(err, wire.CodeBadArgument) {
		t.Errorf("AbortCopy with a local code: %v, want bad-argument", err)
	}

	p = copyPair(t, o, protocol.Limits{}, protocol.Limits{}, nil, nil)
	begin(pos)(p)
	must(t, p.L.S.V3().SendChunk(chunkOf(t, "t", o, 9, "a")))
	must(t, p.D.S.V3().AbortCopy(false, wire.CodeGoingAway, "no longer needed"))
	p.Pump(10) // the chunk crosses the abort
	if ev := p.L.Last(protocol.EventCopyAborted); ev == nil || ev.Err.Code != wire.CodeGoingAway || !ev.ByPeer || !ev.Outgoing {
		t.Fatalf("going-away at the sender: %+v", ev)
	}
	if st := p.D.S.Stats(); st.Stale != 1 || p.D.Count(protocol.EventChunk) != 0 {
		t.Errorf("the chunk in flight: stale %d, chunks %d", st.Stale, p.D.Count(protocol.EventChunk))
	}
	must(t, p.D.S.Receive(p.Now, prototest.Frame(&wire.CopyAbort{Channel: 1, Side: wire.SideSender, Code: "going-away", Class: "transient"})))
	if p.D.S.Err() != nil {
		t.Errorf("an abort of a copy closed since: %v", p.D.S.Err())
	}

	// The vector is bounded by the origins the peer may name: one more closes the session.
	p = copyPair(t, o, protocol.Limits{MaxOrigins: 2}, protocol.Limits{}, nil, nil)
	must(t, p.L.S.SetOriginName(prototest.Origin(8), "eight"))
	must(t, p.L.S.SetOriginName(prototest.Origin(9), "nine"))
	many := []wire.CopyPosition{pos[0], {Origin: prototest.Origin(8), Seq: 1, Hash: wire.Hash{1}}, {Origin: prototest.Origin(9), Seq: 1, Hash: wire.Hash{1}}}
	slices.SortFunc(many, func(a, b wire.CopyPosition) int { return bytes.Compare(a.Origin[:], b.Origin[:]) })
	must(t, p.L.S.V3().BeginCopy(many, 0, 0, 0))
	p.Pump(10)
	if e := p.D.S.Err(); e == nil || e.Code != wire.CodeTooManyOrigins {
		t.Fatalf("a vector over the bound: %v", e)
	}

	p = copyPair(t, o, protocol.Limits{}, protocol.Limits{}, nil, nil)
	begin(pos)(p)
	must(t, p.L.S.V3().SendChunk(chunkOf(t, "t", o, 9, "a", "b")))
	p.Pump(10)
	must(t, p.D.S.Receive(p.Now, prototest.Frame(&wire.CopyEnd{Channel: 1, Records: 3})))
	p.Pump(10)
	if ev := p.D.Last(protocol.EventCopyAborted); p.D.S.Err() != nil || ev == nil || ev.Err.Code != wire.CodeBadChunk {
		t.Fatalf("a count at COPYEND that is not what arrived: %v %+v", p.D.S.Err(), ev)
	}
}

// TestMalformedM25CopyChunks: class M25 of SPEC's "Malformed input" table, each of its
// examples: a chunk that breaks its rules closes the copy with bad-chunk (COPYABORT, side
// subscriber, sent to the peer), counts a protocol error, and leaves the session up.
func TestMalformedM25CopyChunks(t *testing.T) {
	o := prototest.Origin(7)
	chain := prototest.Chain(o, 3, 1, 4)
	pos := []wire.CopyPosition{{Origin: o, Seq: 3, Hash: chain[2].Hash, HLC: 9}}
	rec := func(kind byte, key string, hlc uint64, origin wire.OriginID) []byte {
		b := []byte{kind, byte(len(key))}
		b = append(b, key...)
		b = binary.BigEndian.AppendUint64(b, hlc)
		b = append(b, origin[:]...)
		if kind == wire.ChunkPut {
			b = append(b, 0)
		}
		return b
	}
	body := func(format byte, recs ...[]byte) []byte {
		b := []byte{format, 1, 't', byte(len(recs))}
		for _, r := range recs {
			b = append(b, r...)
		}
		return b
	}
	examples := spec(t).examples["M25"]
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"a CHUNK of format 4", body(4, rec(wire.ChunkPut, "a", 9, o))},
		{"format 3 with no via record", body(3, rec(wire.ChunkPut, "a", 9, o))},
		{"keys out of order", body(1, rec(wire.ChunkPut, "b", 9, o), rec(wire.ChunkPut, "a", 9, o))},
		{"a record kind 3", body(1, rec(3, "a", 9, o))},
		{"a record of an origin outside the vector", body(1, rec(wire.ChunkPut, "a", 9, prototest.Origin(8)))},
		{"a version newer than the vector", body(1, rec(wire.ChunkTombstone, "a", 10, o))},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(examples, c.name) {
				t.Fatalf("SPEC's M25 row %q does not name %q", examples, c.name)
			}
			p := copyPair(t, o, protocol.Limits{}, protocol.Limits{}, nil, nil)
			begin(pos)(p)
			must(t, p.D.S.Receive(p.Now, pingThen(prototest.RawFrame(wire.TypeChunk, 0, 1, c.body))))
			ev := p.D.Drain()
			var abort *wire.CopyAbort
			for _, f := range frames(t, ev) {
				if a, ok := f.Value.(*wire.CopyAbort); ok {
					abort = a
				}
			}
			if abort == nil || abort.Code != wire.CodeBadChunk || abort.Side != wire.SideSubscriber || abort.Channel != 1 {
				t.Fatalf("sent %+v, want COPYABORT bad-chunk side 0 on channel 1", abort)
			}
			if e := p.D.Last(protocol.EventCopyAborted); e == nil || e.Err.Code != wire.CodeBadChunk || e.Err.Frame != wire.TypeChunk || e.Err.Offset != len(ping7) {
				t.Fatalf("event %+v", e)
			}
			if p.D.S.State() != protocol.StateEstablished || p.D.S.Stats().ProtocolErrors != 1 {
				t.Fatalf("state %v, protocol errors %d", p.D.S.State(), p.D.S.Stats().ProtocolErrors)
			}
		})
	}
}
