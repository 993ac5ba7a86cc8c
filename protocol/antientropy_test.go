package protocol_test

import (
	"slices"
	"strings"
	"testing"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// Anti-entropy on a session (SPEC.md, "Anti-entropy"): the dialer asks, the listener
// answers.

func aePair(t *testing.T, dl, ll protocol.Limits) *prototest.Pair {
	t.Helper()
	dc, lc := prototest.Config(wire.RoleDialer, "r", 1), prototest.Config(wire.RoleListener, "s", 2)
	dc.Limits, lc.Limits = dl, ll
	return established(t, dc, lc)
}

var (
	aeAfter   = wire.RangePoint{Table: []byte("t"), Key: []byte("b")}
	aeThrough = wire.RangePoint{Table: []byte("u"), Key: []byte("m")}
)

func aeAsk() *wire.RangeDigest {
	return &wire.RangeDigest{AfterTable: aeAfter.Table, AfterKey: aeAfter.Key, ThroughTable: aeThrough.Table,
		ThroughKey: aeThrough.Key, Count: 2, Digest: wire.Hash{1}}
}

func aeRec(table, key string) wire.RangeRecord {
	return wire.RangeRecord{Table: []byte(table), Key: []byte(key), Value: []byte("v"), HLC: 9, Origin: prototest.Origin(7)}
}

func aeBody(t *testing.T, equal bool, through wire.RangePoint, recs ...wire.RangeRecord) []byte {
	t.Helper()
	b, err := wire.AppendRangeRecords(nil, equal, through, recs)
	must(t, err)
	return b
}

// TestRangeExchange: an ask reaches the peer as an event, its answer comes back as one;
// one ask at a time on each side; an answer must fit the ask; both negotiated the
// capability.
func TestRangeExchange(t *testing.T) {
	p := aePair(t, protocol.Limits{MaxFrameBody: 1 << 16}, protocol.Limits{})
	for _, s := range []*prototest.Side{p.D, p.L} {
		if caps := s.S.Handshake().Caps; !slices.Contains(caps, wire.CapAntiEntropy) {
			t.Fatalf("capabilities %v, want anti-entropy", caps)
		}
	}
	if err := p.L.S.V3().AnswerRange(aeBody(t, true, aeThrough)); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("an answer with no ask: %v, want invalid-state", err)
	}
	must(t, p.D.S.V3().AskRange(aeAsk()))
	if !p.D.S.V3().RangeAsked() {
		t.Error("RangeAsked false after AskRange")
	}
	if err := p.D.S.V3().AskRange(aeAsk()); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("a second ask: %v, want invalid-state", err)
	}
	p.Pump(10)
	ev := p.L.Last(protocol.EventRangeAsked)
	if ev == nil || ev.RangeDigest.Count != 2 || !ev.RangeDigest.After().Equal(aeAfter) || !ev.RangeDigest.Through().Equal(aeThrough) {
		t.Fatalf("range asked: %+v", ev)
	}
	for name, body := range map[string][]byte{
		"a record at the after":           aeBody(t, false, aeThrough, aeRec("t", "b")),
		"a record above the through":      aeBody(t, false, wire.RangePoint{}, aeRec("u", "n")),
		"an equal answer ending early":    aeBody(t, true, wire.RangePoint{Table: []byte("t"), Key: []byte("c")}),
		"a through beyond the ask's":      aeBody(t, false, wire.RangePoint{Table: []byte("v"), Key: []byte("a")}),
		"a through at or below the after": aeBody(t, false, aeAfter),
	} {
		if err := p.L.S.V3().AnswerRange(body); !isCode(err, wire.CodeBadArgument) {
			t.Errorf("%s: %v, want bad-argument", name, err)
		}
	}
	big := aeRec("t", "c")
	big.Value = make([]byte, 1<<16)
	if err := p.L.S.V3().AnswerRange(aeBody(t, false, aeThrough, big)); !isCode(err, wire.CodeFrameTooLarge) {
		t.Errorf("an answer over the peer's frame limit: %v, want frame-too-large", err)
	}
	recs := []wire.RangeRecord{aeRec("t", "c"), aeRec("u", "a")}
	must(t, p.L.S.V3().AnswerRange(aeBody(t, false, wire.RangePoint{Table: []byte("u"), Key: []byte("a")}, recs...)))
	p.Pump(10)
	got := p.D.Last(protocol.EventRangeAnswered)
	if got == nil || got.Range.Equal || len(got.Range.Records) != 2 || string(got.Range.Records[1].Table) != "u" ||
		!got.Range.Through.Equal(wire.RangePoint{Table: []byte("u"), Key: []byte("a")}) {
		t.Fatalf("range answered: %+v", got)
	}
	if p.D.S.V3().RangeAsked() {
		t.Error("RangeAsked true after the answer")
	}
	st := p.D.S.Stats()
	if st.RangeBytesOut == 0 || st.RangeBytesIn == 0 || st.RangeBytesIn != p.L.S.Stats().RangeBytesOut {
		t.Errorf("range bytes: dialer in %d out %d, listener out %d", st.RangeBytesIn, st.RangeBytesOut, p.L.S.Stats().RangeBytesOut)
	}
	// Another range: the answer to the end of the tables.
	must(t, p.D.S.V3().AskRange(&wire.RangeDigest{AfterTable: []byte("u"), AfterKey: []byte("a")}))
	p.Pump(10)
	must(t, p.L.S.V3().AnswerRange(aeBody(t, true, wire.RangePoint{})))
	p.Pump(10)
	if got := p.D.Last(protocol.EventRangeAnswered); got == nil || !got.Range.Equal || !got.Range.Through.IsZero() {
		t.Fatalf("second answer: %+v", got)
	}
}

// TestRangeNeedsVersion3: on a version-2 connection the commands are refused and the
// frames are unexpected.
func TestRangeNeedsVersion3(t *testing.T) {
	dc, lc := prototest.Config(wire.RoleDialer, "r", 1), prototest.Config(wire.RoleListener, "s", 2)
	dc.MaxVersion = 2
	p := established(t, dc, lc)
	if err := p.D.S.V3().AskRange(aeAsk()); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("AskRange on version 2: %v, want invalid-state", err)
	}
	if caps := p.D.S.Handshake().Caps; len(caps) != 0 {
		t.Errorf("version 2 negotiated capabilities %v", caps)
	}
	must(t, p.L.S.Receive(p.Now, pingThen(prototest.Frame(aeAsk()))))
	if e := p.L.S.Err(); e == nil || e.Code != wire.CodeUnexpectedFrame {
		t.Fatalf("RANGEDIGEST on version 2: %v, want unexpected-frame", e)
	}
}

// TestMalformedM26AntiEntropy: SPEC's M26 examples each close the session with bad-range
// and count a protocol error.
func TestMalformedM26AntiEntropy(t *testing.T) {
	examples := spec(t).examples["M26"]
	raw := func(b []byte) []byte { return prototest.RawFrame(wire.TypeRangeRecords, 0, 0, b) }
	rec := aeBody(t, false, aeThrough, aeRec("t", "c"), aeRec("t", "d"))
	format3 := append([]byte{3}, rec[1:]...)
	format4 := append([]byte{4}, rec[1:]...)
	result3 := append([]byte{rec[0], 3}, rec[2:]...)
	for _, c := range []struct {
		name   string
		ask    bool // the dialer asked (aeAsk) first
		listen bool // the frame goes to the listener
		msg    []byte
	}{
		{"a RANGERECORDS of format 4", true, false, raw(format4)},
		{"format 3 with no via record", true, false, raw(format3)},
		{"result 3", true, false, raw(result3)},
		{"records out of order", true, false, raw(swapRecords(t, rec))},
		{"outside the range asked", true, false, raw(aeBody(t, false, aeThrough, aeRec("a", "z")))},
		{"an equal answer ending elsewhere", true, false, raw(aeBody(t, true, wire.RangePoint{Table: []byte("t"), Key: []byte("x")}))},
		{"an answer with no ask", false, false, raw(aeBody(t, true, aeThrough))},
		{"a second RANGEDIGEST before an answer", false, true, cat(prototest.Frame(aeAsk()), prototest.Frame(aeAsk()))},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(examples, c.name) {
				t.Fatalf("SPEC's M26 row %q does not name %q", examples, c.name)
			}
			p := aePair(t, protocol.Limits{}, protocol.Limits{})
			if c.ask {
				must(t, p.D.S.V3().AskRange(aeAsk()))
				p.Pump(10)
			}
			s := p.D.S
			if c.listen {
				s = p.L.S
			}
			must(t, s.Receive(p.Now, pingThen(c.msg)))
			if e := s.Err(); e == nil || e.Code != wire.CodeBadRange || s.Stats().ProtocolErrors != 1 || s.State() != protocol.StateClosed {
				t.Fatalf("error %v, protocol errors %d, state %v; want bad-range", e, s.Stats().ProtocolErrors, s.State())
			}
		})
	}
}

// swapRecords returns a two-record RANGERECORDS body with its records in the other order.
func swapRecords(t *testing.T, body []byte) []byte {
	t.Helper()
	one := len(wire.AppendRangeRecord(nil, &wire.RangeRecord{Table: []byte("t"), Key: []byte("c"), Value: []byte("v"), HLC: 9, Origin: prototest.Origin(7)}))
	head := len(body) - 2*one
	out := append([]byte(nil), body[:head]...)
	out = append(out, body[head+one:]...)
	return append(out, body[head:head+one]...)
}
