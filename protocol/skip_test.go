package protocol_test

import (
	"strconv"
	"strings"
	"testing"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Version 4's SKIP: a run of an origin's entries left out of a channel (SPEC.md, "SKIP").

// skipChain is the log the SKIP tests' sender holds of fxOrigin.
var skipChain = prototest.Chain(fxOrigin, 8, 1, 10)

// fxSkip returns a v4pair in which L named fxOrigin "nine", D subscribed to it at seq 0
// (channel 1) and received skipChain 1..3 as DATA, not acknowledged. Both sides' output
// has been taken.
func fxSkip(t *testing.T) *prototest.Pair {
	t.Helper()
	p := v4pair(t, protocol.Limits{}, protocol.Limits{})
	must(t, p.L.S.SetOriginName(fxOrigin, "nine"))
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: fxOrigin}}))
	p.Pump(10)
	for _, e := range skipChain[:3] {
		must(t, p.L.S.V2().Send(e.Raw))
	}
	p.Pump(10)
	if n := p.D.Count(protocol.EventTxn); n != 3 {
		t.Fatalf("fixture: %d txns received", n)
	}
	p.D.Drain()
	p.L.Drain()
	return p
}

// skipFrame is a SKIP on channel 1 of skipChain's run from..to, its prev and hash the
// chain's (prev overridden when given).
func skipFrame(from, to uint64, prev ...wire.Hash) []byte {
	k := &wire.Skip{Channel: 1, From: from, To: to, Hash: skipChain[to-1].Hash, HLC: 9, Tables: [][]byte{[]byte("t")}, Generation: 2}
	if from > 1 {
		k.Prev = skipChain[from-2].Hash
	}
	if len(prev) > 0 {
		k.Prev = prev[0]
	}
	return prototest.Frame(k)
}

// TestSkipSendAndReceive: a sender's entries and runs interleave on a channel; the
// subscriber receives each run as one EventSkip whose From, Prev, To and Hash the session
// filled and checked, its position moves to the run's end (the next entry extends it), and
// it acknowledges a run's end with CURSOR as an entry's.
func TestSkipSendAndReceive(t *testing.T) {
	p := v4pair(t, protocol.Limits{}, protocol.Limits{})
	must(t, p.L.S.SetOriginName(fxOrigin, "nine"))
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: fxOrigin}}))
	p.Pump(10)
	c := skipChain
	must(t, p.L.S.V4().Skip(fxOrigin, 1, c[0].Hash, 11, nil, 0)) // a run from seq 1: prev all zero
	must(t, p.L.S.V2().Send(c[1].Raw))
	must(t, p.L.S.V4().Skip(fxOrigin, 5, c[4].Hash, 15, [][]byte{[]byte("a"), []byte("b")}, 3))
	must(t, p.L.S.V2().Send(c[5].Raw))
	must(t, p.L.S.V4().Skip(fxOrigin, 7, c[6].Hash, 17, [][]byte{[]byte("b")}, 3))
	p.Pump(10)
	var got []string
	for _, e := range p.D.Events {
		switch e.Kind {
		case protocol.EventTxn:
			got = append(got, "txn "+itoa(e.Txn.Seq))
		case protocol.EventSkip:
			k := e.Skip
			if e.Origin != fxOrigin || (k.From > 1 && k.Prev != c[k.From-2].Hash) || (k.From == 1 && k.Prev != wire.Hash{}) ||
				k.Hash != c[k.To-1].Hash || k.Channel != 1 {
				t.Errorf("skip %+v of origin %v", k, e.Origin)
			}
			got = append(got, "skip "+itoa(k.From)+".."+itoa(k.To))
		case protocol.EventDuplicate, protocol.EventGap, protocol.EventDivergence:
			t.Errorf("event %v", e.Kind)
		}
	}
	if want := "[skip 1..1 txn 2 skip 3..5 txn 6 skip 7..7]"; sprint(got) != want {
		t.Fatalf("received %s, want %s", sprint(got), want)
	}
	if k := p.D.Last(protocol.EventSkip).Skip; k.HLC != 17 || len(k.Tables) != 1 || string(k.Tables[0]) != "b" || k.Generation != 3 {
		t.Errorf("last skip %+v", k)
	}
	// Acknowledge up to a run's end: CURSOR names it with the run's hash.
	must(t, p.D.S.V2().Ack(fxOrigin, 5))
	p.Pump(10)
	if ev := p.L.Last(protocol.EventCursor); ev == nil || ev.Seq != 5 || ev.Hash != c[4].Hash {
		t.Fatalf("cursor %+v", ev)
	}
	must(t, p.D.S.V2().Ack(fxOrigin, 7))
	p.Pump(10)
	if ev := p.L.Last(protocol.EventCursor); ev == nil || ev.Seq != 7 || ev.Hash != c[6].Hash {
		t.Fatalf("cursor %+v", ev)
	}
	// The entry after the last run extends it.
	must(t, p.L.S.V2().Send(c[7].Raw))
	p.Pump(10)
	if ev := p.D.Last(protocol.EventTxn); ev == nil || ev.Txn.Seq != 8 {
		t.Fatalf("txn after the run: %+v", ev)
	}
	st := p.D.S.Stats()
	if st.Duplicates != 0 || st.Gaps != 0 || st.Divergences != 0 || p.D.S.State() != protocol.StateEstablished {
		t.Fatalf("stats %+v state %v", st, p.D.S.State())
	}
}

// TestSkipSenderRefusals: Skip is refused, and nothing is queued, on a channel the peer has
// not opened, below the channel's next seq, for an origin without a name, with a run that
// breaks SKIP's rules, beyond the peer's frame limit, and on a connection below version 4.
func TestSkipSenderRefusals(t *testing.T) {
	p := v4pair(t, protocol.Limits{}, protocol.Limits{})
	c := skipChain
	// Not subscribed.
	if err := p.L.S.V4().Skip(fxOrigin, 2, c[1].Hash, 1, nil, 0); codeOf(err) != wire.CodeInvalidState {
		t.Errorf("skip before a subscription: %v", err)
	}
	// Subscribed at seq 3, not named yet.
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: fxOrigin, Seq: 3, Hash: c[2].Hash}}))
	p.Pump(10)
	p.L.Drain()
	if err := p.L.S.V4().Skip(fxOrigin, 5, c[4].Hash, 1, nil, 0); codeOf(err) != wire.CodeBadArgument {
		t.Errorf("skip of an unnamed origin: %v", err)
	}
	must(t, p.L.S.SetOriginName(fxOrigin, "nine"))
	for _, bad := range []struct {
		name   string
		to     uint64
		hash   wire.Hash
		hlc    wire.HLC
		tables [][]byte
		code   wire.Code
	}{
		{"to below the next seq", 3, c[2].Hash, 1, nil, wire.CodeBadArgument},
		{"a zero hash", 5, wire.Hash{}, 1, nil, wire.CodeBadArgument},
		{"HLC 0", 5, c[4].Hash, 0, nil, wire.CodeBadArgument},
		{"tables out of order", 5, c[4].Hash, 1, [][]byte{[]byte("b"), []byte("a")}, wire.CodeBadArgument},
		{"65 tables", 5, c[4].Hash, 1, make([][]byte, wire.MaxSkipTables+1), wire.CodeBadArgument},
	} {
		if err := p.L.S.V4().Skip(fxOrigin, bad.to, bad.hash, bad.hlc, bad.tables, 0); codeOf(err) != bad.code {
			t.Errorf("%s: %v, want %s", bad.name, err, bad.code)
		}
	}
	if msgs := p.L.Drain(); len(msgs) != 0 {
		t.Fatalf("refused skips queued %d messages", len(msgs))
	}
	// The session fills from (the subscriber's seq + 1) and prev (its hash); the run
	// moves the channel: the entry after it is next, and one at the run's first seq is not.
	must(t, p.L.S.V4().Skip(fxOrigin, 5, c[4].Hash, 1, nil, 0))
	if err := p.L.S.V2().Send(c[3].Raw); codeOf(err) != wire.CodeBadArgument {
		t.Errorf("send of seq 4 after a run to 5: %v", err)
	}
	must(t, p.L.S.V2().Send(c[5].Raw))
	p.Pump(10)
	if ev := p.D.Last(protocol.EventSkip); ev == nil || ev.Skip.From != 4 || ev.Skip.Prev != c[2].Hash || ev.Skip.To != 5 {
		t.Fatalf("skip %+v", ev)
	}
	if ev := p.D.Last(protocol.EventTxn); ev == nil || ev.Txn.Seq != 6 {
		t.Fatalf("txn %+v", ev)
	}
	// Beyond the peer's frame limit (1 KiB): refused.
	small := v4pair(t, protocol.Limits{MaxFrameBody: 1024, MaxMessage: 1024 + 64<<10}, protocol.Limits{})
	must(t, small.L.S.SetOriginName(fxOrigin, "nine"))
	must(t, small.D.S.V2().Subscribe([]vector.Entry{{Origin: fxOrigin}}))
	small.Pump(10)
	tables := make([][]byte, wire.MaxSkipTables)
	for i := range tables {
		tables[i] = []byte("table-of-a-long-name-" + itoa(uint64(100+i)))
	}
	if err := small.L.S.V4().Skip(fxOrigin, 2, c[1].Hash, 1, tables, 0); codeOf(err) != wire.CodeFrameTooLarge {
		t.Errorf("a SKIP over the peer's frame limit: %v", err)
	}
	// Below version 4: invalid-state.
	dc, lc := prototest.ConfigV3(wire.RoleDialer, "a", 1), prototest.ConfigV3(wire.RoleListener, "b", 2)
	v3 := established(t, dc, lc)
	must(t, v3.L.S.SetOriginName(fxOrigin, "nine"))
	must(t, v3.D.S.V2().Subscribe([]vector.Entry{{Origin: fxOrigin}}))
	v3.Pump(10)
	if err := v3.L.S.V4().Skip(fxOrigin, 2, c[1].Hash, 1, nil, 0); codeOf(err) != wire.CodeInvalidState {
		t.Errorf("skip on a version-3 connection: %v", err)
	}
}

// TestSkipReceiveChecks: each row of SKIP's receive checks (SPEC.md, "SKIP"), against a
// subscriber at position (3, hash of entry 3): the event, the position after it, the
// counters and what the subscriber sends.
func TestSkipReceiveChecks(t *testing.T) {
	c := skipChain
	other := c[7].Hash // a hash no entry of 1..7 has
	for _, row := range []struct {
		name    string
		frame   []byte
		event   protocol.EventKind
		seq     uint64 // the position after, checked by the next entry that extends it
		sent    wire.Type
		resend  uint64
		stat    func(protocol.Stats) uint64
		channel bool // the channel stays open
	}{
		{"to below a: duplicate", skipFrame(1, 2), protocol.EventDuplicate, 3, 0, 0, func(s protocol.Stats) uint64 { return s.Duplicates }, true},
		{"to == a, same hash: duplicate", skipFrame(2, 3), protocol.EventDuplicate, 3, 0, 0, func(s protocol.Stats) uint64 { return s.Duplicates }, true},
		{"to == a, another hash: divergence", prototest.Frame(&wire.Skip{Channel: 1, From: 2, To: 3, Prev: c[0].Hash, Hash: other, HLC: 1}),
			protocol.EventDivergence, 0, wire.TypeDivergence, 0, func(s protocol.Stats) uint64 { return s.Divergences }, false},
		{"from <= a < to: gap", skipFrame(3, 5), protocol.EventGap, 3, wire.TypeResend, 4, func(s protocol.Stats) uint64 { return s.Gaps }, true},
		{"from == a+1, prev == h: applied", skipFrame(4, 5), protocol.EventSkip, 5, 0, 0, nil, true},
		{"from == a+1, prev != h: divergence", skipFrame(4, 5, other), protocol.EventDivergence, 0, wire.TypeDivergence, 0,
			func(s protocol.Stats) uint64 { return s.Divergences }, false},
		{"from > a+1: gap", skipFrame(5, 6), protocol.EventGap, 3, wire.TypeResend, 4, func(s protocol.Stats) uint64 { return s.Gaps }, true},
	} {
		t.Run(row.name, func(t *testing.T) {
			p := fxSkip(t)
			must(t, p.D.S.Receive(p.Now, row.frame))
			p.D.Drain()
			sent := p.D.Sent
			evs := p.D.Events
			if last := evs[len(evs)-1]; last.Kind != row.event || last.Origin != fxOrigin || last.Skip == nil {
				t.Fatalf("event %v %+v, want %v", last.Kind, last, row.event)
			}
			var types []wire.Type
			for _, f := range frames(t, sent[len(sent)-1:]) {
				types = append(types, f.Type)
			}
			if row.sent == 0 && len(sent) > 0 {
				for _, f := range frames(t, sent) {
					if f.Type == wire.TypeResend || f.Type == wire.TypeDivergence {
						t.Fatalf("sent %v", f.Type)
					}
				}
			}
			if row.sent != 0 {
				fs := frames(t, sent[len(sent)-1:])
				f := fs[len(fs)-1]
				if f.Type != row.sent {
					t.Fatalf("sent %v, want %v", types, row.sent)
				}
				if r, ok := f.Value.(*wire.Resend); ok && (r.From != row.resend || r.Channel != 1) {
					t.Fatalf("resend %+v, want from %d", r, row.resend)
				}
				if d, ok := f.Value.(*wire.Divergence); ok && (d.Seq != 3 || d.Hash != c[2].Hash || d.Side != wire.SideSubscriber) {
					t.Fatalf("divergence %+v", d)
				}
			}
			if row.stat != nil && row.stat(p.D.S.Stats()) != 1 {
				t.Fatalf("counter %d, want 1 (%+v)", row.stat(p.D.S.Stats()), p.D.S.Stats())
			}
			if p.D.S.State() != protocol.StateEstablished {
				t.Fatalf("state %v: %v", p.D.S.State(), p.D.S.Err())
			}
			// The position: the entry at seq+1 extends it; a closed channel takes nothing.
			err := p.D.S.V2().Ack(fxOrigin, row.seq)
			if !row.channel {
				if codeOf(err) != wire.CodeInvalidState {
					t.Fatalf("ack on the closed channel: %v", err)
				}
				return
			}
			must(t, err)
			n := len(p.D.Events)
			data := wire.AppendHeader(nil, wire.Header{Type: wire.TypeData, Channel: 1, Length: uint32(wire.DataHeader + len(c[row.seq].Raw))})
			data = append(append(data, c[row.seq].Hash[:]...), c[row.seq].Raw...)
			must(t, p.D.S.Receive(p.Now, data))
			p.D.Drain()
			if evs := p.D.Events[n:]; len(evs) != 1 || evs[0].Kind != protocol.EventTxn || evs[0].Txn.Seq != row.seq+1 {
				t.Fatalf("entry %d after: %v", row.seq+1, kinds(evs))
			}
		})
	}
}

// TestSkipReceiveChannels: a SKIP on a channel never opened closes the session with
// bad-channel; on a channel closed since it is dropped and counted stale; while a RESEND is
// outstanding the runs of the stream from before it are discarded; on a version-3
// connection a SKIP is unexpected-frame.
func TestSkipReceiveChannels(t *testing.T) {
	p := fxSkip(t)
	must(t, p.D.S.Receive(p.Now, prototest.Frame(&wire.Skip{Channel: 2, From: 4, To: 5, Prev: skipChain[2].Hash, Hash: skipChain[4].Hash, HLC: 1})))
	checkClosed(t, p.D.S, p.D.Drain(), p.D.Events, wire.CodeBadChannel, wire.TypeSkip, 0)

	p = fxSkip(t)
	must(t, p.D.S.V2().Unsubscribe([]wire.OriginID{fxOrigin}))
	p.D.Drain()
	n := len(p.D.Events)
	must(t, p.D.S.Receive(p.Now, skipFrame(4, 5)))
	p.D.Drain()
	if st := p.D.S.Stats(); st.Stale != 1 || len(p.D.Events) != n || p.D.S.State() != protocol.StateEstablished {
		t.Fatalf("stale %d, events %v", st.Stale, kinds(p.D.Events[n:]))
	}

	p = fxSkip(t)
	must(t, p.D.S.Receive(p.Now, skipFrame(5, 7))) // gap: RESEND from 4
	must(t, p.D.S.Receive(p.Now, skipFrame(6, 7))) // back at or below the last dropped (7), without 4: asked again
	must(t, p.D.S.Receive(p.Now, skipFrame(8, 8))) // the stream from before the second resend: discarded
	must(t, p.D.S.Receive(p.Now, skipFrame(4, 5))) // the resent run
	p.D.Drain()
	if st := p.D.S.Stats(); st.Gaps != 2 || st.Discarded != 1 || st.ResendsRequested != 2 {
		t.Fatalf("stats %+v", st)
	}
	if ev := p.D.Last(protocol.EventSkip); ev == nil || ev.Skip.From != 4 || ev.Skip.To != 5 {
		t.Fatalf("skip %+v", ev)
	}

	v3 := established(t, prototest.ConfigV3(wire.RoleDialer, "a", 1), prototest.ConfigV3(wire.RoleListener, "b", 2))
	must(t, v3.D.S.Receive(v3.Now, skipFrame(1, 1)))
	checkClosed(t, v3.D.S, v3.D.Drain(), v3.D.Events, wire.CodeUnexpectedFrame, wire.TypeSkip, 0)
}

// TestSkipResend: a RESEND moves the sender back to the end it names, so a run sent after it
// joins that end's hash; a RESEND from inside a run sent as one SKIP is bad-field.
func TestSkipResend(t *testing.T) {
	c := skipChain
	p := v4pair(t, protocol.Limits{}, protocol.Limits{})
	must(t, p.L.S.SetOriginName(fxOrigin, "nine"))
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: fxOrigin}}))
	p.Pump(10)
	must(t, p.L.S.V2().Send(c[0].Raw))
	must(t, p.L.S.V4().Skip(fxOrigin, 4, c[3].Hash, 4, nil, 0))
	must(t, p.L.S.V2().Send(c[4].Raw))
	must(t, p.L.S.V4().Skip(fxOrigin, 6, c[5].Hash, 6, nil, 0))
	p.L.Drain() // lost in flight
	// The subscriber, at 4, asks from 5: a run sent now starts at 5 with entry 4's hash.
	must(t, p.L.S.Receive(p.Now, prototest.Frame(&wire.Resend{Channel: 1, From: 5})))
	if ev := p.L.Last(protocol.EventResend); ev != nil {
		t.Fatalf("resend before take: %+v", ev)
	}
	p.L.Drain()
	if ev := p.L.Last(protocol.EventResend); ev == nil || ev.From != 5 {
		t.Fatalf("resend %+v", p.L.Events)
	}
	must(t, p.L.S.V4().Skip(fxOrigin, 7, c[6].Hash, 7, nil, 0))
	fs := frames(t, p.L.Drain())
	if k, ok := fs[len(fs)-1].Value.(*wire.Skip); !ok || k.From != 5 || k.Prev != c[3].Hash || k.To != 7 {
		t.Fatalf("skip after the resend: %+v", fs[len(fs)-1].Value)
	}
	// From 2: entry 1's end, known since the subscription was at 0 and entry 1 was sent.
	must(t, p.L.S.Receive(p.Now, prototest.Frame(&wire.Resend{Channel: 1, From: 2})))
	must(t, p.L.S.V4().Skip(fxOrigin, 3, c[2].Hash, 3, nil, 0))
	fs = frames(t, p.L.Drain())
	if k, ok := fs[len(fs)-1].Value.(*wire.Skip); !ok || k.From != 2 || k.Prev != c[0].Hash {
		t.Fatalf("skip after the resend from 2: %+v", fs[len(fs)-1].Value)
	}
	// From 2 again, and the stream sent again as one run 2..4: entry 3 is inside it now,
	// though it ended the run 2..3 sent before.
	must(t, p.L.S.Receive(p.Now, prototest.Frame(&wire.Resend{Channel: 1, From: 2})))
	must(t, p.L.S.V4().Skip(fxOrigin, 4, c[3].Hash, 4, nil, 0))
	p.L.Drain()
	must(t, p.L.S.Receive(p.Now, prototest.Frame(&wire.Resend{Channel: 1, From: 4})))
	checkClosed(t, p.L.S, p.L.Drain(), p.L.Events, wire.CodeBadField, wire.TypeResend, 0)

	// The acknowledged position stays an end a RESEND may name, after CURSOR.
	p = v4pair(t, protocol.Limits{}, protocol.Limits{})
	must(t, p.L.S.SetOriginName(fxOrigin, "nine"))
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: fxOrigin}}))
	p.Pump(10)
	for _, e := range c[:3] {
		must(t, p.L.S.V2().Send(e.Raw))
	}
	p.L.Drain()
	must(t, p.L.S.Receive(p.Now, prototest.Frame(&wire.Cursor{Entries: []wire.CursorEntry{{Channel: 1, Seq: 1, Hash: c[0].Hash}}})))
	must(t, p.L.S.Receive(p.Now, prototest.Frame(&wire.Resend{Channel: 1, From: 2})))
	must(t, p.L.S.V4().Skip(fxOrigin, 3, c[2].Hash, 3, nil, 0))
	fs = frames(t, p.L.Drain())
	if k, ok := fs[len(fs)-1].Value.(*wire.Skip); !ok || k.From != 2 || k.Prev != c[0].Hash {
		t.Fatalf("skip after a resend from the acknowledged position + 1: %+v", fs[len(fs)-1].Value)
	}
	// The ends above a RESEND's are forgotten: entry 4 ended the run 2..4 sent before the
	// RESEND from 2, not the run 2..5 sent after it.
	p = v4pair(t, protocol.Limits{}, protocol.Limits{})
	must(t, p.L.S.SetOriginName(fxOrigin, "nine"))
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: fxOrigin}}))
	p.Pump(10)
	must(t, p.L.S.V2().Send(c[0].Raw))
	must(t, p.L.S.V4().Skip(fxOrigin, 4, c[3].Hash, 4, nil, 0))
	must(t, p.L.S.Receive(p.Now, prototest.Frame(&wire.Resend{Channel: 1, From: 2})))
	must(t, p.L.S.V4().Skip(fxOrigin, 5, c[4].Hash, 5, nil, 0))
	p.L.Drain()
	must(t, p.L.S.Receive(p.Now, prototest.Frame(&wire.Resend{Channel: 1, From: 5})))
	checkClosed(t, p.L.S, p.L.Drain(), p.L.Events, wire.CodeBadField, wire.TypeResend, 0)
}

// codeOf is the code of a command's refusal ("" for none).
func codeOf(err error) wire.Code {
	if e, ok := err.(*wire.Error); ok && e != nil {
		return e.Code
	}
	if err != nil {
		return "not-a-wire-error"
	}
	return ""
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func sprint(s []string) string { return "[" + strings.Join(s, " ") + "]" }
