package protocol_test

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// scenarioRun is everything both sides of one scripted run produced.
type scenarioRun struct {
	dSent, lSent     [][]byte
	dEvents, lEvents []protocol.Event
	dStats, lStats   protocol.Stats
}

// runScenario plays a fixed script on a fresh pair: handshake, subscribe, 50 offers across
// 3 origins with acks and time passing (PINGs from Tick), a duplicate, then a gap that
// closes the connection. The nonces are the only input that varies between calls.
func runScenario(t *testing.T, dNonce, lNonce []byte) scenarioRun {
	t.Helper()
	dc := prototest.Config(wire.RoleDialer, "a", 1)
	lc := prototest.Config(wire.RoleListener, "b", 2)
	dc.Capabilities = []string{"x", "y"}
	lc.Capabilities = []string{"y", "z"}
	d, err := protocol.New(dc)
	must(t, err)
	l, err := protocol.New(lc)
	must(t, err)
	p := &prototest.Pair{D: &prototest.Side{S: d}, L: &prototest.Side{S: l}, Now: prototest.Epoch}
	must(t, d.Start(p.Now, dNonce))
	must(t, l.Start(p.Now, lNonce))
	p.Pump(10)
	if d.State() != protocol.StateEstablished || l.State() != protocol.StateEstablished {
		t.Fatalf("handshake: %v / %v", d.Err(), l.Err())
	}

	p.Now = p.Now.Add(10 * time.Millisecond)
	must(t, d.Subscribe(0, nil))
	p.Pump(10)

	origins := []wire.OriginID{prototest.Origin(10), prototest.Origin(11), prototest.Origin(12)}
	chains := make([][]prototest.Entry, len(origins))
	for i, o := range origins {
		chains[i] = prototest.Chain(o, 20, 1+i, 8+i)
		must(t, l.SetOriginName(o, "origin-"+string(rune('a'+i))))
	}
	next := make([]int, len(origins))
	pos := uint64(0)
	offer := func(e prototest.Entry) {
		pos++
		must(t, l.Offer(pos, e.Raw))
	}
	for i := 0; i < 50; i++ {
		o := (i*7 + i/3) % 3 // an irregular interleaving
		offer(chains[o][next[o]])
		next[o]++
		if i%7 == 6 {
			p.Now = p.Now.Add(350 * time.Millisecond)
			must(t, d.Tick(p.Now))
			must(t, l.Tick(p.Now))
			p.Now = p.Now.Add(3 * time.Millisecond) // the round trip
			p.Pump(10)
			must(t, d.Ack(pos))
			p.Pump(10)
		}
	}
	p.Pump(10)
	must(t, d.Ack(pos))
	p.Pump(10)
	if p.D.Count(protocol.EventTxn) != 50 {
		t.Fatalf("%d txns applied", p.D.Count(protocol.EventTxn))
	}

	// A duplicate: an entry applied already, at a new position.
	offer(chains[1][2])
	p.Pump(10)
	if p.D.Count(protocol.EventDuplicate) != 1 {
		t.Fatal("duplicate not reported")
	}
	// A gap: origin 0 skips an entry.
	offer(chains[0][next[0]+1])
	p.Pump(10)
	if d.Err() == nil || d.Err().Code != wire.CodeGapDetected || l.State() != protocol.StateClosed {
		t.Fatalf("gap: %v / %v", d.Err(), l.Err())
	}
	for _, s := range []*protocol.Session{d, l} {
		if s.RTT() != 3*time.Millisecond {
			t.Fatalf("rtt %v: PINGs were not answered", s.RTT())
		}
	}
	if p.L.Count(protocol.EventAcked) < 7 {
		t.Fatalf("%d acks seen", p.L.Count(protocol.EventAcked))
	}
	return scenarioRun{dSent: p.D.Sent, lSent: p.L.Sent, dEvents: p.D.Events, lEvents: p.L.Events,
		dStats: d.Stats(), lStats: l.Stats()}
}

func equalMessages(a, b [][]byte) (int, bool) {
	for i := 0; i < len(a) && i < len(b); i++ {
		if !bytes.Equal(a[i], b[i]) {
			return i, false
		}
	}
	return min(len(a), len(b)), len(a) == len(b)
}

// TestDeterminism: the same inputs give byte-identical output and the same events.
func TestDeterminism(t *testing.T) {
	a := runScenario(t, prototest.Nonce(1), prototest.Nonce(2))
	b := runScenario(t, prototest.Nonce(1), prototest.Nonce(2))
	for _, c := range []struct {
		side string
		x, y [][]byte
	}{{"dialer", a.dSent, b.dSent}, {"listener", a.lSent, b.lSent}} {
		if i, ok := equalMessages(c.x, c.y); !ok {
			t.Fatalf("%s: message %d differs (%d vs %d messages)", c.side, i, len(c.x), len(c.y))
		}
	}
	if !reflect.DeepEqual(a.dEvents, b.dEvents) || !reflect.DeepEqual(a.lEvents, b.lEvents) {
		t.Fatal("event sequences differ")
	}
	if a.dStats != b.dStats || a.lStats != b.lStats {
		t.Fatalf("stats differ: %+v / %+v", a.dStats, b.dStats)
	}
	// The run exercised what it claims: pings on both sides, and every frame type of
	// version 1 but AUTH's failure paths.
	seen := map[wire.Type]int{}
	for _, msgs := range [][][]byte{a.dSent, a.lSent} {
		for _, f := range frames(t, msgs) {
			seen[f.Type]++
		}
	}
	for _, typ := range wire.Registered() {
		if seen[typ] == 0 {
			t.Errorf("the scenario sent no %s frame", typ)
		}
	}
	if seen[wire.TypeTxn1] != 52 || seen[wire.TypeOrigin] != 3 {
		t.Errorf("%d TXN1, %d ORIGIN frames", seen[wire.TypeTxn1], seen[wire.TypeOrigin])
	}
	if len(a.dEvents) == 0 || a.dEvents[len(a.dEvents)-1].Kind != protocol.EventClosed {
		t.Fatal("the dialer did not close")
	}

	// The comparison is sensitive: another listener nonce changes the bytes of its HELLO
	// and both AUTHs, and nothing else of either side's events.
	c := runScenario(t, prototest.Nonce(1), prototest.Nonce(3))
	if i, _ := equalMessages(a.lSent, c.lSent); i != 0 {
		t.Fatalf("the listener's first message is unchanged by its nonce (first difference at %d)", i)
	}
	if i, _ := equalMessages(a.dSent, c.dSent); i != 1 {
		t.Fatalf("the dialer's messages first differ at %d, want 1 (its AUTH)", i)
	}
	if !reflect.DeepEqual(a.dEvents, c.dEvents) || !reflect.DeepEqual(a.lEvents, c.lEvents) {
		t.Fatal("the nonce changed the events")
	}
}
