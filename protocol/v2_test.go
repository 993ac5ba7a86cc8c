package protocol_test

import (
	"bytes"
	"errors"
	"testing"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// twoOrigins names origins 7 ("seven") and 8 ("eight") on the sender, subscribes the
// receiver to both from the start, and returns their chains of n entries.
func twoOrigins(t *testing.T, p *prototest.Pair, n, ops, valueLen int) (a, b wire.OriginID, chains map[wire.OriginID][]prototest.Entry) {
	t.Helper()
	a, b = prototest.Origin(7), prototest.Origin(8)
	chains = map[wire.OriginID][]prototest.Entry{a: prototest.Chain(a, n, ops, valueLen), b: prototest.Chain(b, n, ops, valueLen)}
	must(t, p.L.S.SetOriginName(a, "seven"))
	must(t, p.L.S.SetOriginName(b, "eight"))
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: a}, {Origin: b}}))
	p.Pump(10)
	return a, b, chains
}

// serve sends what the sender's credit allows of each chain, from each channel's next seq.
func serve(t *testing.T, s *protocol.Session, chains map[wire.OriginID][]prototest.Entry, next map[wire.OriginID]uint64) {
	t.Helper()
	for o, chain := range chains {
		for next[o] >= 1 && next[o] <= uint64(len(chain)) {
			e := chain[next[o]-1]
			if s.V2().Credit(o) < protocol.DataFrameSize(len(e.Raw)) {
				break
			}
			if err := s.V2().Send(e.Raw); err != nil {
				t.Fatalf("send %d: %v", next[o], err)
			}
			next[o]++
		}
	}
}

func TestV2Stream(t *testing.T) {
	p := v2pair(t, protocol.Limits{MaxChannelBuffer: 4096, MaxSessionBuffer: 8192, MaxFrameBody: 2048, MaxMessage: 65536})
	a, b := prototest.Origin(7), prototest.Origin(8)
	chains := map[wire.OriginID][]prototest.Entry{a: prototest.Chain(a, 200, 1, 50), b: prototest.Chain(b, 200, 2, 30)}
	for o, name := range map[wire.OriginID]string{a: "seven", b: "eight"} {
		must(t, p.L.S.SetOriginName(o, name))
	}
	must(t, p.L.S.V2().AdvertiseHeads([]wire.Head{{Origin: a, Seq: 200, HLC: 5}, {Origin: b, Seq: 200, HLC: 6}}))
	// Resume a from seq 50, b from the start.
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: a, Seq: 50, Hash: chains[a][49].Hash}, {Origin: b}}))
	p.Pump(10)
	if p.D.Count(protocol.EventHeads) != 1 || p.L.Count(protocol.EventSubscribed) != 2 {
		t.Fatalf("heads %d subscribed %d", p.D.Count(protocol.EventHeads), p.L.Count(protocol.EventSubscribed))
	}
	next := map[wire.OriginID]uint64{}
	for _, e := range p.L.Events {
		if e.Kind == protocol.EventSubscribed {
			next[e.Origin] = e.Seq + 1
		}
	}
	if next[a] != 51 || next[b] != 1 {
		t.Fatalf("next %v", next)
	}
	applied := map[wire.OriginID]uint64{a: 50}
	for round := 0; round < 500; round++ {
		serve(t, p.L.S, chains, next)
		p.Pump(10)
		for _, e := range p.D.Events {
			if e.Kind == protocol.EventTxn {
				if e.Txn.Seq != applied[e.Origin]+1 {
					t.Fatalf("origin %v applied %d after %d", e.Origin, e.Txn.Seq, applied[e.Origin])
				}
				applied[e.Origin] = e.Txn.Seq
			}
		}
		p.D.Events = p.D.Events[:0]
		for o, seq := range applied {
			if seq > 0 {
				must(t, p.D.S.V2().Ack(o, seq))
			}
		}
		if p.D.S.HeldBytes() > 8192+65536 {
			t.Fatalf("held %d", p.D.S.HeldBytes())
		}
		if applied[a] == 200 && applied[b] == 200 {
			break
		}
	}
	if applied[a] != 200 || applied[b] != 200 {
		t.Fatalf("applied %v", applied)
	}
	st := p.D.S.Stats()
	if st.Duplicates != 0 || st.Gaps != 0 || st.Divergences != 0 || p.D.S.Err() != nil {
		t.Fatalf("stats %+v err %v", st, p.D.S.Err())
	}
	// Nothing at or below the resume position was sent.
	for _, m := range p.L.Sent {
		frames, _ := wire.DecodeMessage(m, wire.DefaultMaxMessage, 0)
		for _, f := range frames {
			if d, ok := f.Value.(*wire.Data); ok && d.Txn.Origin == a && d.Txn.Seq <= 50 {
				t.Fatalf("re-sent seq %d at or below the vector", d.Txn.Seq)
			}
		}
	}
}

// TestV2GapAndCorruption: a dropped entry is a gap answered by RESEND; a corrupted entry is
// a divergence, not applied, and closes only its channel.
func TestV2GapAndCorruption(t *testing.T) {
	p := v2pair(t, protocol.Limits{})
	a, b, chains := twoOrigins(t, p, 10, 1, 20)
	// Drop a:3 in flight; corrupt b:5 in flight.
	p.Tap = func(from *prototest.Side, msg []byte) []byte {
		if from != p.L {
			return msg
		}
		frames, err := wire.DecodeMessage(msg, wire.DefaultMaxMessage, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		for _, f := range frames {
			raw := msg[f.Offset : f.Offset+wire.HeaderSize+len(f.Body)]
			if d, ok := f.Value.(*wire.Data); ok {
				if d.Txn.Origin == a && d.Txn.Seq == 3 {
					p.Tap = nil // once
					continue
				}
				if d.Txn.Origin == b && d.Txn.Seq == 5 {
					raw = bytes.Clone(raw)
					raw[len(raw)-1] ^= 1
				}
			}
			out = append(out, raw...)
		}
		return out
	}
	next := map[wire.OriginID]uint64{a: 1, b: 1}
	serve(t, p.L.S, chains, next)
	p.Pump(10)
	if ev := p.D.Last(protocol.EventGap); ev == nil || ev.Origin != a || ev.Expected != 3 {
		t.Fatalf("gap %+v", ev)
	}
	if ev := p.D.Last(protocol.EventDivergence); ev == nil || ev.Origin != b || ev.Txn.Seq != 5 {
		t.Fatalf("divergence %+v", ev)
	}
	if ev := p.L.Last(protocol.EventResend); ev == nil || ev.Origin != a || ev.From != 3 {
		t.Fatalf("resend %+v", ev)
	}
	if ev := p.L.Last(protocol.EventDivergence); ev == nil || ev.Origin != b || !ev.ByPeer {
		t.Fatalf("sender's divergence %+v", ev)
	}
	// The sender resends a from 3; b's channel is closed.
	next[a] = 3
	delete(chains, b)
	serve(t, p.L.S, chains, next)
	p.Pump(10)
	var seqA, seqB []uint64
	for _, e := range p.D.Events {
		if e.Kind == protocol.EventTxn {
			if e.Origin == a {
				seqA = append(seqA, e.Txn.Seq)
			} else {
				seqB = append(seqB, e.Txn.Seq)
			}
		}
	}
	if len(seqA) != 10 || seqA[9] != 10 || len(seqB) != 4 {
		t.Fatalf("applied a %v b %v", seqA, seqB)
	}
	st := p.D.S.Stats()
	if st.Gaps != 1 || st.ResendsRequested != 1 || st.Divergences != 1 || p.D.S.State() != protocol.StateEstablished {
		t.Fatalf("stats %+v state %v", st, p.D.S.State())
	}
}

// drainTxns applies the subscriber's new EventTxn entries into applied, checking order, and
// returns how many arrived.
func drainTxns(t *testing.T, side *prototest.Side, applied map[wire.OriginID]uint64) int {
	t.Helper()
	n := 0
	for _, e := range side.Events {
		if e.Kind == protocol.EventTxn {
			if e.Txn.Seq != applied[e.Origin]+1 {
				t.Fatalf("origin %v applied %d after %d", e.Origin, e.Txn.Seq, applied[e.Origin])
			}
			applied[e.Origin] = e.Txn.Seq
			n++
		}
	}
	side.Events = side.Events[:0]
	return n
}

// TestV2StarvedChannelDoesNotBlockOthers: the subscriber stops acknowledging origin a; a's
// channel stops at its window while b streams to the end; acknowledging a resumes it.
func TestV2StarvedChannelDoesNotBlockOthers(t *testing.T) {
	limits := protocol.Limits{MaxFrameBody: 1024, MaxMessage: 65536, MaxChannelBuffer: 4096, MaxSessionBuffer: 3 * 4096}
	p := v2pair(t, limits)
	a, b, chains := twoOrigins(t, p, 300, 1, 40)
	next := map[wire.OriginID]uint64{a: 1, b: 1}
	applied := map[wire.OriginID]uint64{}
	for round := 0; round < 400 && applied[b] < 300; round++ {
		serve(t, p.L.S, chains, next)
		p.Pump(10)
		drainTxns(t, p.D, applied)
		if applied[b] > 0 {
			must(t, p.D.S.V2().Ack(b, applied[b])) // a is never acknowledged
		}
		if held := p.D.S.HeldBytes(); held > limits.MaxSessionBuffer+limits.MaxMessage {
			t.Fatalf("held %d", held)
		}
	}
	if applied[b] != 300 {
		t.Fatalf("b stopped at %d while a was starved (a at %d)", applied[b], applied[a])
	}
	frame := uint64(protocol.DataFrameSize(len(chains[a][0].Raw)))
	if a1 := applied[a]; a1 == 0 || a1*frame > uint64(limits.MaxChannelBuffer) || a1 == 300 {
		t.Fatalf("starved a received %d entries of %d bytes; its window is %d", a1, frame, limits.MaxChannelBuffer)
	}
	// Acknowledging a releases its credit and it streams to the end.
	for round := 0; round < 400 && applied[a] < 300; round++ {
		must(t, p.D.S.V2().Ack(a, applied[a]))
		p.Pump(10)
		serve(t, p.L.S, chains, next)
		p.Pump(10)
		drainTxns(t, p.D, applied)
	}
	if applied[a] != 300 {
		t.Fatalf("a stopped at %d after being acknowledged", applied[a])
	}
}

// TestV2MoveOneOrigin: unsubscribing one origin and subscribing it again (a failover back
// and forth) leaves the other channel untouched, resumes from the subscriber's position
// with nothing at or below it re-sent, and drops the entries that were in flight.
func TestV2MoveOneOrigin(t *testing.T) {
	p := v2pair(t, protocol.Limits{})
	a, b, chains := twoOrigins(t, p, 40, 1, 10)
	next := map[wire.OriginID]uint64{a: 1, b: 1}
	applied := map[wire.OriginID]uint64{}
	serve(t, p.L.S, map[wire.OriginID][]prototest.Entry{a: chains[a][:20], b: chains[b][:20]}, next)
	p.Pump(10)
	drainTxns(t, p.D, applied)
	// Entries 21..25 of a are in flight when the subscriber drops a's channel.
	serve(t, p.L.S, map[wire.OriginID][]prototest.Entry{a: chains[a][:25]}, next)
	must(t, p.D.S.V2().Unsubscribe([]wire.OriginID{a}))
	// Again, the channel closed: invalid-state, as Ack answers, which a caller passes
	// over (the session closes channels on its own within a message, ahead of its events).
	var we *wire.Error
	if err := p.D.S.V2().Unsubscribe([]wire.OriginID{a}); !errors.As(err, &we) || we.Code != wire.CodeInvalidState {
		t.Fatalf("Unsubscribe of a closed channel: %v, want invalid-state", err)
	}
	p.Pump(10)
	drainTxns(t, p.D, applied)
	if applied[a] != 20 || p.D.S.Stats().Stale != 5 || p.L.Count(protocol.EventUnsubscribed) != 1 {
		t.Fatalf("applied a %d, stale %d, unsubscribed %d", applied[a], p.D.S.Stats().Stale, p.L.Count(protocol.EventUnsubscribed))
	}
	sentBefore := len(p.L.Sent)
	// b goes on; a comes back from the subscriber's own position (20).
	c := chains[a][19]
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: a, Seq: 20, Hash: c.Hash}}))
	p.Pump(10)
	ev := p.L.Last(protocol.EventSubscribed)
	if ev == nil || ev.Origin != a || ev.Seq != 20 {
		t.Fatalf("resubscribe %+v", ev)
	}
	next[a] = ev.Seq + 1
	serve(t, p.L.S, chains, next)
	p.Pump(10)
	drainTxns(t, p.D, applied)
	if applied[a] != 40 || applied[b] != 40 {
		t.Fatalf("applied %v", applied)
	}
	for _, m := range p.L.Sent[sentBefore:] {
		frames, _ := wire.DecodeMessage(m, wire.DefaultMaxMessage, 0)
		for _, f := range frames {
			if d, ok := f.Value.(*wire.Data); ok && d.Txn.Origin == a && d.Txn.Seq <= 20 {
				t.Fatalf("re-sent a:%d at or below the subscriber's position", d.Txn.Seq)
			}
		}
	}
	if st := p.D.S.Stats(); st.Duplicates != 0 || st.Gaps != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestV2SenderFindsDivergence: a subscriber's position that the sender's log does not extend
// closes that channel on both sides with DIVERGENCE side 1; the other channel goes on.
func TestV2SenderFindsDivergence(t *testing.T) {
	p := v2pair(t, protocol.Limits{})
	a, b := prototest.Origin(7), prototest.Origin(8)
	mine := prototest.Chain(a, 5, 1, 10)
	theirs := prototest.Chain(a, 5, 2, 10) // another log of a: same seqs, other entries
	must(t, p.L.S.SetOriginName(a, "seven"))
	must(t, p.L.S.SetOriginName(b, "eight"))
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: a, Seq: 3, Hash: theirs[2].Hash}, {Origin: b}}))
	p.Pump(10)
	err := p.L.S.V2().Send(mine[3].Raw)
	if we, ok := err.(*wire.Error); !ok || we.Code != wire.CodeDivergence {
		t.Fatalf("send past a foreign position: %v", err)
	}
	p.Pump(10)
	ev := p.D.Last(protocol.EventDivergence)
	if ev == nil || ev.Origin != a || !ev.ByPeer || ev.Seq != 3 || ev.Hash != mine[2].Hash {
		t.Fatalf("subscriber's divergence %+v", ev)
	}
	if p.L.S.V2().Credit(a) != 0 || p.D.S.V2().Ack(a, 1) == nil {
		t.Fatal("a's channel is still open")
	}
	bs := prototest.Chain(b, 3, 1, 10)
	for _, e := range bs {
		must(t, p.L.S.V2().Send(e.Raw))
	}
	p.Pump(10)
	if p.D.Count(protocol.EventTxn) != 3 || p.D.S.State() != protocol.StateEstablished || p.L.S.State() != protocol.StateEstablished {
		t.Fatalf("b: %d entries, states %v %v", p.D.Count(protocol.EventTxn), p.D.S.State(), p.L.S.State())
	}
	if p.D.S.Stats().Divergences != 1 || p.L.S.Stats().Divergences != 1 {
		t.Fatalf("divergences %d / %d", p.D.S.Stats().Divergences, p.L.S.Stats().Divergences)
	}
}

// TestV2HeadsAndCursor: heads advance and are withdrawn; the sender sees the subscriber's
// durable positions as EventCursor.
func TestV2HeadsAndCursor(t *testing.T) {
	p := v2pair(t, protocol.Limits{})
	a, b := prototest.Origin(7), prototest.Origin(8)
	must(t, p.L.S.SetOriginName(a, "seven"))
	must(t, p.L.S.SetOriginName(b, "eight"))
	must(t, p.L.S.V2().AdvertiseHeads([]wire.Head{{Origin: a, Seq: 3, HLC: 10}, {Origin: b, Seq: 1, HLC: 11}}))
	must(t, p.L.S.V2().AdvertiseHeads([]wire.Head{{Origin: a, Seq: 3, HLC: 10}, {Origin: b, Seq: 2, HLC: 12}})) // only b moved
	must(t, p.L.S.V2().WithdrawHeads([]wire.OriginID{a}))
	p.Pump(10)
	var got [][]wire.Head
	var withdrawn []wire.OriginID
	for _, e := range p.D.Events {
		if e.Kind == protocol.EventHeads {
			got = append(got, e.Heads.Heads)
			withdrawn = append(withdrawn, e.Heads.Withdrawn...)
		}
	}
	if len(got) != 3 || len(got[0]) != 2 || len(got[1]) != 1 || got[1][0].Origin != b || got[1][0].Seq != 2 ||
		len(withdrawn) != 1 || withdrawn[0] != a || p.D.Count(protocol.EventOriginNamed) != 2 {
		t.Fatalf("heads %v withdrawn %v named %d", got, withdrawn, p.D.Count(protocol.EventOriginNamed))
	}
	if err := p.L.S.V2().AdvertiseHeads([]wire.Head{{Origin: b, Seq: 1, HLC: 11}}); err == nil {
		t.Fatal("a head went back")
	}
	chain := prototest.Chain(a, 4, 1, 10)
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: a}}))
	p.Pump(10)
	for _, e := range chain {
		must(t, p.L.S.V2().Send(e.Raw))
	}
	p.Pump(10)
	must(t, p.D.S.V2().Ack(a, 3))
	p.Pump(10)
	ev := p.L.Last(protocol.EventCursor)
	if ev == nil || ev.Origin != a || ev.Seq != 3 || ev.Hash != chain[2].Hash {
		t.Fatalf("cursor %+v", ev)
	}
}
