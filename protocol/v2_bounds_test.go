package protocol_test

import (
	"strconv"
	"testing"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Every named bound of version 2 at its limit and one past it: the limit is accepted, one
// past is a typed resource-limit error (or refusal), nothing panics, and the bytes the
// session holds stay within its bound.

func wantCode(t *testing.T, err error, code wire.Code) {
	t.Helper()
	we, ok := err.(*wire.Error)
	if !ok || we.Code != code {
		t.Fatalf("err %v, want %s", err, code)
	}
	if cl, _ := wire.ClassOf(code); we.Class != cl {
		t.Fatalf("class %s, want %s", we.Class, cl)
	}
}

func origins(n int) []vector.Entry {
	out := make([]vector.Entry, n)
	for i := range out {
		out[i] = vector.Entry{Origin: wire.OriginID{0xa0, byte(i >> 8), byte(i)}}
	}
	return out
}

// TestBoundChannels: MaxChannels channels open; one more is refused, locally and when the
// peer asks for it.
func TestBoundChannels(t *testing.T) {
	const max = 5
	p := v2pair(t, protocol.Limits{MaxChannels: max})
	must(t, p.D.S.V2().Subscribe(origins(max)))
	wantCode(t, p.D.S.V2().Subscribe(origins(max + 1)[max:]), wire.CodeTooManyChannels)

	// The peer (the listener, bound 3) is asked for 4 channels by a subscriber bound at 5.
	lc := prototest.Config(wire.RoleListener, "s", 2)
	lc.Limits.MaxChannels = 3
	q := established(t, prototest.Config(wire.RoleDialer, "r", 1), lc)
	must(t, q.D.S.V2().Subscribe(origins(3)))
	q.Pump(10)
	if q.L.S.State() != protocol.StateEstablished || q.L.Count(protocol.EventSubscribed) != 3 {
		t.Fatalf("at the bound: %v, %d subscribed", q.L.S.Err(), q.L.Count(protocol.EventSubscribed))
	}
	must(t, q.D.S.V2().Subscribe(origins(4)[3:]))
	q.Pump(10)
	if e := q.L.S.Err(); e == nil || e.Code != wire.CodeTooManyChannels || e.Class != wire.ClassResourceLimit {
		t.Fatalf("one past the bound: %v", e)
	}
}

// TestBoundVector: a vector of MaxOrigins entries is accepted, one more refused; the heads a
// peer advertises are bounded the same way.
func TestBoundVector(t *testing.T) {
	const max = 6
	p := v2pair(t, protocol.Limits{MaxOrigins: max})
	wantCode(t, p.D.S.V2().Subscribe(origins(max+1)), wire.CodeTooManyOrigins)
	must(t, p.D.S.V2().Subscribe(origins(max)))

	q := v2pair(t, protocol.Limits{MaxOrigins: max}) // the dialer receives heads
	var heads []wire.Head
	for i, o := range origins(max + 1) {
		must(t, q.L.S.SetOriginName(o.Origin, "o"+string(rune('a'+i))))
		heads = append(heads, wire.Head{Origin: o.Origin, Seq: 1, HLC: 1})
	}
	must(t, q.L.S.V2().AdvertiseHeads(heads[:max]))
	q.Pump(10)
	if q.D.S.State() != protocol.StateEstablished {
		t.Fatalf("at the bound: %v", q.D.S.Err())
	}
	must(t, q.L.S.V2().AdvertiseHeads(heads[max:]))
	q.Pump(10)
	if e := q.D.S.Err(); e == nil || e.Code != wire.CodeTooManyOrigins {
		t.Fatalf("one past the bound: %v", e)
	}
}

// dataFrame builds a DATA frame for a channel.
func dataFrame(t *testing.T, ch uint32, e prototest.Entry) []byte {
	t.Helper()
	v, err := wire.ParseTxn(e.Raw)
	if err != nil {
		t.Fatal(err)
	}
	f, err := wire.AppendFrame(nil, 0, ch, &wire.Data{Hash: e.Hash, Txn: v.Txn()})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestBoundBuffers: DATA that fills a channel's window exactly is accepted and held; one
// byte more is credit-overrun; the same for the connection's window, over two channels.
func TestBoundBuffers(t *testing.T) {
	a, b := prototest.Origin(7), prototest.Origin(8)
	entry := prototest.Chain(a, 40, 1, 1000)
	entryB := prototest.Chain(b, 40, 1, 1000)
	size := len(dataFrame(t, 1, entry[0]))
	for _, c := range []struct {
		name     string
		channel  int // channel window, a multiple of the frame size
		session  int
		perChan  int // frames sent on each of the two channels before the last one
		overflow bool
	}{
		{"channel at its window", 4 * size, 16 * size, 4, false},
		{"channel one frame past", 4 * size, 16 * size, 5, true},
		{"session at its window", 4 * size, 6 * size, 3, false},
		{"session one frame past", 4 * size, 6*size + 1, 4, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := recordFed(t)
			limits := protocol.Limits{MaxFrameBody: 2048, MaxMessage: 65536, MaxChannelBuffer: c.channel, MaxSessionBuffer: c.session}
			p := v2pair(t, limits)
			must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: a}, {Origin: b}}))
			p.D.Drain()
			named := prototest.Cat(prototest.Frame(&wire.Origin{Origin: a, Name: "a"}), prototest.Frame(&wire.Origin{Origin: b, Name: "b"}))
			must(t, in.receive(p.D.S, p.Now, named))
			msgs := 0
			for i := 0; i < c.perChan; i++ {
				for ch, chain := range [][]prototest.Entry{entry, entryB} {
					if c.name[:7] == "channel" && ch == 1 {
						continue // one channel only
					}
					if p.D.S.State() != protocol.StateEstablished {
						break
					}
					must(t, in.receive(p.D.S, p.Now, dataFrame(t, uint32(ch+1), chain[i])))
					msgs++
				}
			}
			held := p.D.S.HeldBytes()
			if !c.overflow {
				if p.D.S.State() != protocol.StateEstablished || held < msgs*size || held > c.session {
					t.Fatalf("at the bound: state %v (%v), held %d for %d frames", p.D.S.State(), p.D.S.Err(), held, msgs)
				}
				return
			}
			if e := p.D.S.Err(); e == nil || e.Code != wire.CodeCreditOverrun || e.Class != wire.ClassResourceLimit {
				t.Fatalf("one past the bound: %v", e)
			}
		})
	}
}

// TestBoundFrame: a DATA body at the peer's frame limit is sent, one byte more is refused
// before anything is queued; a receiver refuses a body past its own limit.
func TestBoundFrame(t *testing.T) {
	in := recordFed(t)
	a := prototest.Origin(7)
	// Transactions whose DATA bodies are exactly 2048 and 2049 bytes.
	body := func(e prototest.Entry) int { return protocol.DataFrameSize(len(e.Raw)) - wire.HeaderSize }
	fill := 2048
	for body(prototest.Chain(a, 1, 1, fill)[0]) > 2048 {
		fill--
	}
	at := prototest.Chain(a, 1, 1, fill)[0]
	over := prototest.Chain(a, 1, 1, fill+1)[0]
	if body(at) != 2048 || body(over) != 2049 {
		t.Fatalf("probe bodies %d and %d", body(at), body(over))
	}
	for _, c := range []struct {
		e  prototest.Entry
		ok bool
	}{{at, true}, {over, false}} {
		p := v2pair(t, protocol.Limits{MaxFrameBody: 2048, MaxMessage: 65536, MaxChannelBuffer: 8192, MaxSessionBuffer: 8192})
		must(t, p.L.S.SetOriginName(a, "seven"))
		must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: a}}))
		p.Pump(10)
		err := p.L.S.V2().Send(c.e.Raw)
		if c.ok {
			must(t, err)
			p.Pump(10)
			if p.D.Count(protocol.EventTxn) != 1 {
				t.Fatalf("the entry at the limit did not arrive: %v", p.D.S.Err())
			}
			continue
		}
		wantCode(t, err, wire.CodeFrameTooLarge)
		// Forced past the sender's check, the receiver refuses it.
		must(t, in.receive(p.D.S, p.Now, dataFrame(t, 1, c.e)))
		if e := p.D.S.Err(); e == nil || e.Code != wire.CodeFrameTooLarge {
			t.Fatalf("receiver: %v", e)
		}
	}
}

// TestNoCredit: Send beyond the credit is refused with no-credit, queues nothing, and
// succeeds once the subscriber acknowledges.
func TestNoCredit(t *testing.T) {
	a := prototest.Origin(7)
	chain := prototest.Chain(a, 10, 1, 1500)
	size := protocol.DataFrameSize(len(chain[0].Raw))
	p := v2pair(t, protocol.Limits{MaxFrameBody: 2048, MaxMessage: 65536, MaxChannelBuffer: 2 * size, MaxSessionBuffer: 4 * size})
	must(t, p.L.S.SetOriginName(a, "seven"))
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: a}}))
	p.Pump(10)
	must(t, p.L.S.V2().Send(chain[0].Raw))
	must(t, p.L.S.V2().Send(chain[1].Raw))
	held := p.L.S.HeldBytes()
	wantCode(t, p.L.S.V2().Send(chain[2].Raw), wire.CodeNoCredit)
	if p.L.S.HeldBytes() != held || p.L.S.V2().Credit(a) != 0 {
		t.Fatalf("a refused Send changed the session: held %d -> %d, credit %d", held, p.L.S.HeldBytes(), p.L.S.V2().Credit(a))
	}
	p.Pump(10)
	must(t, p.D.S.V2().Ack(a, 2))
	p.Pump(10)
	if p.L.S.V2().Credit(a) < size || p.L.Last(protocol.EventCredit) == nil {
		t.Fatalf("credit %d after the ack", p.L.S.V2().Credit(a))
	}
	must(t, p.L.S.V2().Send(chain[2].Raw))
}

// TestClosedHoldsNothing: a version-2 session closed with buffered entries holds nothing
// for its channels any more; only the CLOSE it queued.
func TestClosedHoldsNothing(t *testing.T) {
	p := v2pair(t, protocol.Limits{})
	a := prototest.Origin(7)
	must(t, p.L.S.SetOriginName(a, "seven"))
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: a}}))
	p.Pump(10)
	for _, e := range prototest.Chain(a, 5, 1, 100) {
		must(t, p.L.S.V2().Send(e.Raw))
	}
	p.Pump(10)
	if p.D.S.HeldBytes() == 0 {
		t.Fatal("nothing held before the close")
	}
	p.D.Drain()
	must(t, p.D.S.Close(wire.CodeGoingAway, "bye"))
	queued := 0
	for _, m := range p.D.Drain() {
		queued += len(m)
	}
	if p.D.S.HeldBytes() != 0 || queued == 0 {
		t.Fatalf("held %d after the close (CLOSE queued: %d bytes, taken)", p.D.S.HeldBytes(), queued)
	}
}

// TestListsFitThePeerFrame: lists of many origins (HEADS, SUBSCRIBE) are split into frames
// no larger than the peer's frame limit, at its lowest (1 KiB), and all of them arrive:
// cut by their count alone, 60 origins' heads made one frame the peer refused with
// frame-too-large.
func TestListsFitThePeerFrame(t *testing.T) {
	const n = 60
	limits := protocol.Limits{MaxFrameBody: wire.MinMaxFrame}
	dc, lc := prototest.ConfigV2(wire.RoleDialer, "r", 1), prototest.ConfigV2(wire.RoleListener, "s", 2)
	dc.Limits, lc.Limits = limits, limits
	p := established(t, dc, lc)
	var heads []wire.Head
	var subs []vector.Entry
	for i, o := range origins(n) {
		must(t, p.L.S.SetOriginName(o.Origin, "o"+strconv.Itoa(i)))
		heads = append(heads, wire.Head{Origin: o.Origin, Seq: 7, HLC: 1 << 40})
		subs = append(subs, vector.Entry{Origin: o.Origin, Seq: 3, Hash: wire.Hash{1, byte(i)}})
	}
	p.D.Sent, p.L.Sent = nil, nil
	must(t, p.L.S.V2().AdvertiseHeads(heads))
	must(t, p.D.S.V2().Subscribe(subs))
	p.Pump(20)
	for _, s := range []*prototest.Side{p.D, p.L} {
		if s.S.State() != protocol.StateEstablished {
			t.Fatalf("a list of %d origins closed the connection: %v", n, s.S.Err())
		}
		lists := 0
		for _, f := range frames(t, s.Sent) {
			if len(f.Frame.Body) > wire.MinMaxFrame {
				t.Fatalf("a %s body of %d bytes, past the peer's limit %d", f.Frame.Type, len(f.Frame.Body), wire.MinMaxFrame)
			}
			if f.Frame.Type == wire.TypeHeads || f.Frame.Type == wire.TypeSubscribe {
				lists++
			}
		}
		if lists < 2 {
			t.Fatalf("the list went in %d frames: not split", lists)
		}
	}
	got := 0
	for _, ev := range p.D.Events {
		if ev.Kind == protocol.EventHeads {
			got += len(ev.Heads.Heads)
		}
	}
	if got != n || p.L.Count(protocol.EventSubscribed) != n {
		t.Fatalf("%d heads and %d subscriptions arrived, want %d of each", got, p.L.Count(protocol.EventSubscribed), n)
	}
}
