package protocol_test

import (
	"bytes"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// scenarioRun is everything both sides of one scripted run produced.
type scenarioRun struct {
	dSent, lSent     [][]byte
	dEvents, lEvents []protocol.Event
	dStats, lStats   protocol.Stats
	credits          [][]protocol.OriginCredit // the sender's credit after each round (version 2)
}

// runScenario plays a fixed script on a fresh pair: handshake, subscribe, 50 offers across
// 3 origins with acks and time passing (PINGs from Tick), a duplicate, then a gap that
// closes the connection. The nonces are the only input that varies between calls.
func runScenario(t *testing.T, dNonce, lNonce []byte) scenarioRun {
	t.Helper()
	dc := prototest.ConfigV1(wire.RoleDialer, "a", 1)
	lc := prototest.ConfigV1(wire.RoleListener, "b", 2)
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
	must(t, d.V1().Subscribe(0, nil))
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
		must(t, l.V1().Offer(pos, e.Raw))
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
			must(t, d.V1().Ack(pos))
			p.Pump(10)
		}
	}
	p.Pump(10)
	must(t, d.V1().Ack(pos))
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

// runScenarioV2 plays a fixed version-2 script on a fresh pair of this build: handshake;
// the listener names four origins and advertises their heads; the dialer subscribes to them
// (one resumed from seq 2, one from a position the listener's log does not extend: the
// listener reports DIVERGENCE); the listener streams within its credit while the dialer
// acknowledges (CURSOR) and grants (CREDIT), with time passing (PINGs from Tick). In flight
// one entry is dropped (a gap, answered by RESEND) and one is corrupted (a divergence: the
// dialer reports DIVERGENCE, then subscribes the origin again from where it stands); the
// dialer unsubscribes one origin with an entry of it in flight (stale); the listener
// withdraws that head and advances the others; the dialer closes. The nonces are the only
// input that varies between calls.
func runScenarioV2(t *testing.T, dNonce, lNonce []byte) scenarioRun {
	t.Helper()
	dc := prototest.ConfigV2(wire.RoleDialer, "a", 1)
	lc := prototest.ConfigV2(wire.RoleListener, "b", 2)
	dc.Capabilities = []string{"x", "y"}
	lc.Capabilities = []string{"y", "z"}
	// Small windows, so that credit runs out and is granted again many times.
	dc.Limits = protocol.Limits{MaxFrameBody: 1024, MaxMessage: 65536, MaxChannelBuffer: 2048, MaxSessionBuffer: 4096}
	d, err := protocol.New(dc)
	must(t, err)
	l, err := protocol.New(lc)
	must(t, err)
	p := &prototest.Pair{D: &prototest.Side{S: d}, L: &prototest.Side{S: l}, Now: prototest.Epoch}
	must(t, d.Start(p.Now, dNonce))
	must(t, l.Start(p.Now, lNonce))
	p.Pump(10)
	if d.State() != protocol.StateEstablished || l.State() != protocol.StateEstablished || d.Handshake().Version != 2 {
		t.Fatalf("handshake: %v / %v, version %d", d.Err(), l.Err(), d.Handshake().Version)
	}

	const n = 60
	origins := []wire.OriginID{prototest.Origin(10), prototest.Origin(11), prototest.Origin(12), prototest.Origin(13)}
	const gapped, corrupted, dropped, forked = 0, 1, 2, 3 // what happens to each origin
	chains := make([][]prototest.Entry, len(origins))
	head := func(i, seq int) wire.Head {
		return wire.Head{Origin: origins[i], Seq: uint64(seq), HLC: wire.MakeHLC(1_800_000_000_000+uint64(seq), 0)}
	}
	var heads []wire.Head
	for i, o := range origins {
		chains[i] = prototest.Chain(o, n, 1+i%2, 40+8*i)
		must(t, l.SetOriginName(o, "origin-"+string(rune('a'+i))))
		heads = append(heads, head(i, 20))
	}
	must(t, l.V2().AdvertiseHeads(heads))
	fork := prototest.Chain(origins[forked], 3, 1, 7) // another log of the same origin
	must(t, d.V2().Subscribe([]vector.Entry{
		{Origin: origins[gapped]},
		{Origin: origins[corrupted], Seq: 2, Hash: chains[corrupted][1].Hash},
		{Origin: origins[dropped]},
		{Origin: origins[forked], Seq: 3, Hash: fork[2].Hash},
	}))
	p.Pump(10)

	// In flight: drop gapped's seq 5 and corrupt corrupted's seq 7, once each.
	var droppedOnce, corruptedOnce bool
	p.Tap = func(from *prototest.Side, msg []byte) []byte {
		if from != p.L {
			return msg
		}
		fs, err := wire.DecodeMessage(msg, wire.DefaultMaxMessage, 0)
		if err != nil {
			t.Fatalf("the sender sent a malformed message: %v", err)
		}
		var out []byte
		for _, f := range fs {
			raw := msg[f.Offset : f.Offset+wire.HeaderSize+len(f.Body)]
			if dt, ok := f.Value.(*wire.Data); ok {
				switch {
				case !droppedOnce && dt.Txn.Origin == origins[gapped] && dt.Txn.Seq == 5:
					droppedOnce = true
					continue
				case !corruptedOnce && dt.Txn.Origin == origins[corrupted] && dt.Txn.Seq == 7:
					corruptedOnce = true
					raw = bytes.Clone(raw)
					raw[len(raw)-1] ^= 0x55 // a value byte: the encoding still parses
				}
			}
			out = append(out, raw...)
		}
		return out
	}

	next := make([]uint64, len(origins)) // the sender's next seq per origin; 0: not serving
	applied := make([]uint64, len(origins))
	acked := make([]uint64, len(origins))
	dOpen := make([]bool, len(origins)) // the dialer's channel is open
	for i := range dOpen {
		dOpen[i] = true
	}
	applied[corrupted], acked[corrupted] = 2, 2
	index := func(o wire.OriginID) int { return slices.Index(origins, o) }
	var lSeen, dSeen int
	var credits [][]protocol.OriginCredit
	sideOne := false // the listener found the forked position
	resubscribed := false
	serve := func() {
		for i := range origins {
			for next[i] >= 1 && next[i] <= n {
				e := chains[i][next[i]-1]
				if l.V2().Credit(origins[i]) < protocol.DataFrameSize(len(e.Raw)) {
					break
				}
				err := l.V2().Send(e.Raw)
				if i == forked {
					// The subscriber's position is not in this log: the channel is closed.
					if we, ok := err.(*wire.Error); !ok || we.Code != wire.CodeDivergence || sideOne {
						t.Fatalf("Send of the forked origin: %v", err)
					}
					sideOne = true
					next[i] = 0
					break
				}
				must(t, err)
				next[i]++
			}
		}
	}
	events := func() {
		for _, e := range p.L.Events[lSeen:] {
			i := index(e.Origin)
			switch e.Kind {
			case protocol.EventSubscribed:
				next[i] = e.Seq + 1
			case protocol.EventResend:
				next[i] = e.From
			case protocol.EventUnsubscribed, protocol.EventDivergence:
				next[i] = 0
			}
		}
		lSeen = len(p.L.Events)
		for _, e := range p.D.Events[dSeen:] {
			i := index(e.Origin)
			switch e.Kind {
			case protocol.EventTxn:
				if e.Txn.Seq != applied[i]+1 {
					t.Fatalf("origin %d: applied seq %d after %d", i, e.Txn.Seq, applied[i])
				}
				applied[i] = e.Txn.Seq
			case protocol.EventDivergence:
				dOpen[i] = false
			}
		}
		dSeen = len(p.D.Events)
	}
	for round := 0; ; round++ {
		if round == 100 {
			t.Fatalf("the stream did not complete: applied %v", applied)
		}
		switch round {
		case 3: // with an entry of it in flight
			must(t, d.V2().Unsubscribe([]wire.OriginID{origins[dropped]}))
			dOpen[dropped] = false
		case 6:
			must(t, l.V2().WithdrawHeads([]wire.OriginID{origins[dropped], origins[forked]}))
			must(t, l.V2().AdvertiseHeads([]wire.Head{head(gapped, n), head(corrupted, n)}))
		}
		if !dOpen[corrupted] && !resubscribed {
			// Subscribe again, a new channel, from the last entry that was applied.
			resubscribed = true
			must(t, d.V2().Subscribe([]vector.Entry{{Origin: origins[corrupted], Seq: applied[corrupted], Hash: chains[corrupted][applied[corrupted]-1].Hash}}))
			dOpen[corrupted] = true
			acked[corrupted] = applied[corrupted]
		}
		serve()
		if round%2 == 0 {
			p.Now = p.Now.Add(400 * time.Millisecond)
			must(t, d.Tick(p.Now))
			must(t, l.Tick(p.Now))
			p.Now = p.Now.Add(3 * time.Millisecond) // the round trip
		}
		p.Pump(10)
		events()
		for i := range origins {
			if dOpen[i] && applied[i] > acked[i] {
				must(t, d.V2().Ack(origins[i], applied[i]))
				acked[i] = applied[i]
			}
		}
		p.Pump(10)
		events()
		credits = append(credits, l.V2().Credits())
		if applied[gapped] == n && applied[corrupted] == n && resubscribed && round > 6 {
			break
		}
	}
	must(t, d.Close(wire.CodeGoingAway, "done"))
	p.Pump(10)

	if !droppedOnce || !corruptedOnce || !sideOne {
		t.Fatalf("dropped %v, corrupted %v, forked position found %v", droppedOnce, corruptedOnce, sideOne)
	}
	if applied[dropped] == 0 || applied[dropped] == n || applied[forked] != 0 {
		t.Fatalf("applied %v: want the unsubscribed origin part way, the forked one not at all", applied)
	}
	ds, ls := d.Stats(), l.Stats()
	if ds.Gaps != 1 || ds.ResendsRequested != 1 || ls.ResendsReceived != 1 || ds.Divergences != 2 || ls.Divergences != 2 ||
		ds.Stale == 0 || ds.Duplicates != 0 || ds.ProtocolErrors != 0 || ls.ProtocolErrors != 0 {
		t.Fatalf("dialer stats %+v, listener stats %+v", ds, ls)
	}
	if e := l.Err(); e == nil || e.Code != wire.CodeGoingAway || l.State() != protocol.StateClosed {
		t.Fatalf("listener: %v", e)
	}
	for _, s := range []*protocol.Session{d, l} {
		if s.RTT() != 3*time.Millisecond {
			t.Fatalf("rtt %v: PINGs were not answered", s.RTT())
		}
	}
	return scenarioRun{dSent: p.D.Sent, lSent: p.L.Sent, dEvents: p.D.Events, lEvents: p.L.Events,
		dStats: ds, lStats: ls, credits: credits}
}

// TestDeterminism: the same inputs give byte-identical output and the same events, for a
// version-1 connection (two sessions configured to version 1, as release 0.1), a version-2
// one, version-3 ones and a version-4 one; between them the scenarios send every frame type
// this build registers.
func TestDeterminism(t *testing.T) {
	seen := map[wire.Type]int{}
	for _, sc := range []struct {
		name    string
		version uint64 // the scenario's number in the checks below
		proto   uint64 // the version its connection negotiates
		run     func(t *testing.T, dNonce, lNonce []byte) scenarioRun
	}{
		{"version 1", 1, 1, runScenario},
		{"version 2", 2, 2, runScenarioV2},
		{"version 3", 3, 3, runScenarioV3},
		{"version 3 copy", 4, 3, runScenarioCopy},
		{"version 3 anti-entropy", 5, 3, runScenarioAntiEntropy},
		{"version 4 map and requests", 6, 4, runScenarioV4},
	} {
		t.Run(sc.name, func(t *testing.T) {
			a := sc.run(t, prototest.Nonce(1), prototest.Nonce(2))
			b := sc.run(t, prototest.Nonce(1), prototest.Nonce(2))
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
			if !reflect.DeepEqual(a.credits, b.credits) {
				t.Fatal("the sender's credit differs")
			}
			// Every frame sent belongs to the negotiated version (or to every version).
			types := map[wire.Type]int{}
			for _, msgs := range [][][]byte{a.dSent, a.lSent} {
				for _, f := range frames(t, msgs) {
					types[f.Type]++
					seen[f.Type]++
					if v, cv := wire.Version(f.Type), sc.proto; v != 0 && v != cv && !(v >= 2 && cv > v) {
						t.Errorf("a version-%d frame %s on a version-%d connection", v, f.Type, cv)
					}
				}
			}
			for _, typ := range []wire.Type{wire.TypeHello, wire.TypeAuth, wire.TypePing, wire.TypePong, wire.TypeOrigin, wire.TypeClose} {
				if types[typ] == 0 && !(typ == wire.TypeOrigin && sc.version >= 5) { // ranges and requests carry no origin's name
					t.Errorf("the scenario sent no %s frame", typ)
				}
			}
			if len(a.dEvents) == 0 || a.dEvents[len(a.dEvents)-1].Kind != protocol.EventClosed {
				t.Fatal("the dialer did not close")
			}
			switch sc.version {
			case 1:
				if types[wire.TypeTxn1] != 52 || types[wire.TypeOrigin] != 3 {
					t.Errorf("%d TXN1, %d ORIGIN frames", types[wire.TypeTxn1], types[wire.TypeOrigin])
				}
			case 2:
				// One DIVERGENCE from each side, one RESEND, ORIGIN once per origin.
				if types[wire.TypeDivergence] != 2 || types[wire.TypeResend] != 1 || types[wire.TypeOrigin] != 4 || types[wire.TypeUnsubscribe] != 1 {
					t.Errorf("%d DIVERGENCE, %d RESEND, %d ORIGIN, %d UNSUBSCRIBE frames", types[wire.TypeDivergence], types[wire.TypeResend],
						types[wire.TypeOrigin], types[wire.TypeUnsubscribe])
				}
				if types[wire.TypeCredit] < 5 || types[wire.TypeCursor] < 5 || types[wire.TypeHeads] != 3 || types[wire.TypeSubscribe] != 2 {
					t.Errorf("%d CREDIT, %d CURSOR, %d HEADS, %d SUBSCRIBE frames", types[wire.TypeCredit], types[wire.TypeCursor],
						types[wire.TypeHeads], types[wire.TypeSubscribe])
				}
			case 5:
				if types[wire.TypeRangeDigest] != 3 || types[wire.TypeRangeRecords] != 3 {
					t.Errorf("%d RANGEDIGEST, %d RANGERECORDS frames", types[wire.TypeRangeDigest], types[wire.TypeRangeRecords])
				}
			case 4:
				// A copy whole (two chunks), one resumed and refused busy.
				if types[wire.TypeCopy] != 2 || types[wire.TypeCopyBegin] != 1 || types[wire.TypeChunk] != 2 ||
					types[wire.TypeCopyEnd] != 1 || types[wire.TypeCopyAbort] != 1 {
					t.Errorf("%d COPY, %d COPYBEGIN, %d CHUNK, %d COPYEND, %d COPYABORT frames", types[wire.TypeCopy], types[wire.TypeCopyBegin],
						types[wire.TypeChunk], types[wire.TypeCopyEnd], types[wire.TypeCopyAbort])
				}
			case 6:
				// Both maps, one MEMBERS, four requests each answered once: by the listener (one
				// late), and by the session itself (too-many-requests).
				if types[wire.TypeMap] != 2 || types[wire.TypeMembers] != 1 || types[wire.TypeRequest] != 4 || types[wire.TypeResponse] != 4 ||
					types[wire.TypeSkip] != 1 || types[wire.TypeLink] != 1 || types[wire.TypeHolds] != 1 || types[wire.TypeLeafState] != 1 ||
					types[wire.TypeQuiet] != 2 {
					t.Errorf("%d MAP, %d MEMBERS, %d REQUEST, %d RESPONSE, %d SKIP, %d LINK, %d HOLDS, %d QUIET frames", types[wire.TypeMap], types[wire.TypeMembers],
						types[wire.TypeRequest], types[wire.TypeResponse], types[wire.TypeSkip], types[wire.TypeLink], types[wire.TypeHolds], types[wire.TypeQuiet])
				}
			case 3:
				// A head and a floor, one PURGED answer, then one entry from the floor.
				if types[wire.TypePurged] != 1 || types[wire.TypeHeads] != 2 || types[wire.TypeSubscribe] != 2 || types[wire.TypeData] != 1 {
					t.Errorf("%d PURGED, %d HEADS, %d SUBSCRIBE, %d DATA frames", types[wire.TypePurged], types[wire.TypeHeads],
						types[wire.TypeSubscribe], types[wire.TypeData])
				}
			}

			// The comparison is sensitive: another listener nonce changes the bytes of its
			// HELLO and both AUTHs, and nothing else of either side's events.
			c := sc.run(t, prototest.Nonce(1), prototest.Nonce(3))
			if i, _ := equalMessages(a.lSent, c.lSent); i != 0 {
				t.Fatalf("the listener's first message is unchanged by its nonce (first difference at %d)", i)
			}
			if i, _ := equalMessages(a.dSent, c.dSent); i != 1 {
				t.Fatalf("the dialer's messages first differ at %d, want 1 (its AUTH)", i)
			}
			if !reflect.DeepEqual(a.dEvents, c.dEvents) || !reflect.DeepEqual(a.lEvents, c.lEvents) {
				t.Fatal("the nonce changed the events")
			}
		})
	}
	for _, typ := range wire.Registered() {
		if seen[typ] == 0 {
			t.Errorf("no scenario sent a %s frame", typ)
		}
	}
}

// runScenarioV3 plays version 3's additions: the sender advertises a head and its floor,
// the subscriber asks from below the floor and is answered PURGED, then asks again from
// the floor and receives the next entry.
func runScenarioV3(t *testing.T, dNonce, lNonce []byte) scenarioRun {
	t.Helper()
	p, d, l := startV3(t, dNonce, lNonce)
	if d.Handshake().Version != 3 {
		t.Fatalf("handshake: version %d", d.Handshake().Version)
	}
	o := prototest.Origin(7)
	chain := prototest.Chain(o, 5, 1, 4)
	must(t, l.SetOriginName(o, "seven"))
	must(t, l.V2().AdvertiseHeads([]wire.Head{{Origin: o, Seq: 5, HLC: 5}}))
	must(t, l.V3().AdvertiseFloors([]wire.Floor{{Origin: o, Seq: 3, Hash: chain[2].Hash}}))
	p.Pump(10)
	must(t, d.V2().Subscribe([]vector.Entry{{Origin: o, Seq: 1, Hash: chain[0].Hash}}))
	p.Pump(10)
	must(t, l.V3().Purged(o, 3, chain[2].Hash))
	p.Pump(10)
	if ev := p.D.Last(protocol.EventPurged); ev == nil || ev.Origin != o || ev.Seq != 3 || ev.Hash != chain[2].Hash {
		t.Fatalf("the subscriber's purged event: %+v", ev)
	}
	must(t, d.V2().Subscribe([]vector.Entry{{Origin: o, Seq: 3, Hash: chain[2].Hash}}))
	p.Pump(10)
	must(t, l.V2().Send(chain[3].Raw))
	p.Pump(10)
	return endV3(t, p, d, l)
}

// runScenarioCopy plays the base copy: the subscriber asks for a copy, the sender begins it
// and streams two chunks, the subscriber acknowledges them, the copy ends; a second copy,
// after a resume point, is refused as busy.
func runScenarioCopy(t *testing.T, dNonce, lNonce []byte) scenarioRun {
	t.Helper()
	p, d, l := startV3(t, dNonce, lNonce)
	o := prototest.Origin(7)
	chain := prototest.Chain(o, 3, 1, 4)
	must(t, l.SetOriginName(o, "seven"))
	must(t, d.V3().RequestCopy(nil, nil))
	p.Pump(10)
	must(t, l.V3().BeginCopy([]wire.CopyPosition{{Origin: o, Seq: 3, Hash: chain[2].Hash, HLC: 9}}, 2, 3, 64))
	for _, c := range []struct {
		table string
		keys  []string
	}{{"t", []string{"a", "b"}}, {"u", []string{"a"}}} {
		var recs []wire.CopyRecord
		for _, k := range c.keys {
			recs = append(recs, wire.CopyRecord{Key: []byte(k), Value: []byte("v"), HLC: 9, Origin: o})
		}
		body, err := wire.AppendChunk(nil, []byte(c.table), recs)
		must(t, err)
		must(t, l.V3().SendChunk(body))
	}
	p.Pump(10)
	must(t, d.V3().AckChunk())
	must(t, d.V3().AckChunk())
	must(t, l.V3().EndCopy())
	p.Pump(10)
	if ev := p.D.Last(protocol.EventCopyEnd); ev == nil || ev.Count != 3 {
		t.Fatalf("the subscriber's copy-end event: %+v", ev)
	}
	must(t, d.V3().RequestCopy([]byte("u"), []byte("a")))
	p.Pump(10)
	must(t, l.V3().AbortCopy(true, wire.CodeCopyBusy, "busy"))
	p.Pump(10)
	return endV3(t, p, d, l)
}

// runScenarioAntiEntropy plays anti-entropy: each side asks a range, one answered equal,
// the other with records, and a second ask to the end of the tables.
func runScenarioAntiEntropy(t *testing.T, dNonce, lNonce []byte) scenarioRun {
	t.Helper()
	p, d, l := startV3(t, dNonce, lNonce)
	o := prototest.Origin(7)
	through := wire.RangePoint{Table: []byte("t"), Key: []byte("m")}
	must(t, d.V3().AskRange(&wire.RangeDigest{ThroughTable: through.Table, ThroughKey: through.Key, Count: 1, Digest: wire.Hash{7}}))
	must(t, l.V3().AskRange(&wire.RangeDigest{AfterTable: through.Table, AfterKey: through.Key}))
	p.Pump(10)
	eq, err := wire.AppendRangeRecords(nil, true, through, nil)
	must(t, err)
	must(t, l.V3().AnswerRange(eq))
	recs, err := wire.AppendRangeRecords(nil, false, wire.RangePoint{}, []wire.RangeRecord{
		{Table: []byte("t"), Key: []byte("x"), Value: []byte("v"), HLC: 9, Origin: o},
		{Table: []byte("u"), Key: []byte("a"), Deleted: true, HLC: 10, Origin: o}})
	must(t, err)
	must(t, d.V3().AnswerRange(recs))
	p.Pump(10)
	if ev := p.L.Last(protocol.EventRangeAnswered); ev == nil || len(ev.Range.Records) != 2 {
		t.Fatalf("the listener's answer: %+v", ev)
	}
	must(t, d.V3().AskRange(&wire.RangeDigest{AfterTable: through.Table, AfterKey: through.Key}))
	p.Pump(10)
	end, err := wire.AppendRangeRecords(nil, true, wire.RangePoint{}, nil)
	must(t, err)
	must(t, l.V3().AnswerRange(end))
	p.Pump(10)
	return endV3(t, p, d, l)
}

// runScenarioV4 plays version 4's map and requests: each side sends its map, the listener
// its member entries; the dialer asks the listener's map (answered), asks again and gives
// up (the answer comes late), then asks twice more: the listener's session, whose bound is
// one request owed, answers the second too-many-requests itself, and the listener answers
// the first. Then the listener streams an origin with a run left out (SKIP).
func runScenarioV4(t *testing.T, dNonce, lNonce []byte) scenarioRun {
	t.Helper()
	lc := prototest.Config(wire.RoleListener, "b", 2)
	lc.Limits.MaxRequestsInFlight = 1
	dc := prototest.Config(wire.RoleDialer, "a", 1)
	dc.Leaf = true // the dialer is a leaf of the listener, its hub: LEAFSTATE below
	p, d, l := startPair(t, dc, lc, dNonce, lNonce)
	if d.Handshake().Version != 4 || !l.Handshake().PeerLeaf {
		t.Fatalf("handshake: version %d", d.Handshake().Version)
	}
	must(t, d.V4().SendMap(testMap(3, "a")))
	must(t, l.V4().SendMap(testMap(4, "b")))
	must(t, l.V4().SendMembers([]wire.Member{{Name: "b", MaxVersion: 4, Stamp: 9}, {Name: "a", MaxVersion: 4, Stamp: 8}}))
	p.Pump(10)
	ask := wire.Request{Target: "b", Path: []string{"a"}, TimeoutMS: 500, Scope: wire.ScopeRead, Kind: "map"}
	answer := func(id uint64) {
		m := testMap(4, "b")
		body, err := wire.AppendMapAnswer(nil, &m)
		must(t, err)
		must(t, l.V4().Respond(id, wire.Response{Body: body}))
		p.Pump(10)
	}
	for id := range uint64(2) {
		got, err := d.V4().Request(ask)
		must(t, err)
		if got != id+1 {
			t.Fatalf("request id %d, want %d", got, id+1)
		}
		p.Pump(10)
		if id == 1 {
			must(t, d.V4().Forget(2))
		}
		answer(id + 1)
	}
	if ev := p.D.Last(protocol.EventResponse); ev == nil || !ev.Late || ev.Response.ID != 2 {
		t.Fatalf("the dialer's late response: %+v", ev)
	}
	for range 2 {
		_, err := d.V4().Request(ask)
		must(t, err)
	}
	p.Pump(10)
	if ev := p.L.Last(protocol.EventRequestRefused); ev == nil || ev.Request.ID != 4 {
		t.Fatalf("the listener's refusal: %+v", ev)
	}
	answer(3)
	// Placement: the listener leaves entries 2 and 3 of an origin out of the dialer's
	// channel with one SKIP, between two entries, and the dialer acknowledges past it.
	o := prototest.Origin(9)
	chain := prototest.Chain(o, 4, 1, 8)
	must(t, l.SetOriginName(o, "nine"))
	must(t, d.V2().Subscribe([]vector.Entry{{Origin: o}}))
	p.Pump(10)
	must(t, l.V2().Send(chain[0].Raw))
	must(t, l.V4().Skip(o, 3, chain[2].Hash, 3, [][]byte{[]byte("t")}, 4))
	must(t, l.V2().Send(chain[3].Raw))
	must(t, d.V4().Link(wire.Link{Mode: wire.LinkReceive, Tables: [][]byte{[]byte("t")}}))
	p.Pump(10)
	if ev := p.L.Last(protocol.EventLink); ev == nil || ev.Link.Mode != wire.LinkReceive {
		t.Fatalf("the listener's link: %+v", ev)
	}
	if ev := p.D.Last(protocol.EventSkip); ev == nil || ev.Skip.From != 2 || ev.Skip.To != 3 {
		t.Fatalf("the dialer's skip: %+v", ev)
	}
	must(t, d.V2().Ack(o, 4))
	p.Pump(10)
	// A copy whose snapshot holds table t only through entry 1 of the origin: one HOLDS
	// before its COPYBEGIN.
	must(t, d.V3().RequestCopy(nil, nil))
	p.Pump(10)
	must(t, l.V4().CopyHolds([]byte("t"), []wire.OriginSeq{{Origin: o, Seq: 1}}, 0))
	must(t, l.V3().BeginCopy([]wire.CopyPosition{{Origin: o, Seq: 4, Hash: chain[3].Hash, HLC: 4}}, 0, 0, 0))
	must(t, l.V3().EndCopy())
	p.Pump(10)
	if ev := p.D.Last(protocol.EventCopyHolds); ev == nil || string(ev.Holds.Table) != "t" || p.D.Count(protocol.EventCopyEnd) != 1 {
		t.Fatalf("the dialer's copy-holds: %+v", ev)
	}
	// QUIET: the dialer's first, then one delta with an origin quiet and one loud.
	must(t, d.V4().Quiet(nil, nil))
	must(t, d.V4().Quiet([]wire.OriginID{prototest.Origin(9)}, []wire.OriginID{prototest.Origin(8)}))
	p.Pump(10)
	if ev := p.L.Last(protocol.EventQuiet); ev == nil || len(ev.Quiet.Quiet) != 1 || ev.Quiet.Quiet[0] != prototest.Origin(9) || p.L.Count(protocol.EventQuiet) != 2 {
		t.Fatalf("the listener's quiet: %+v", ev)
	}
	// The hub's state of its leaf.
	must(t, l.V4().LeafState(wire.LeafState{Reoriginated: 4, HubSeq: 9, Core: 3}))
	p.Pump(10)
	if ev := p.D.Last(protocol.EventLeafState); ev == nil || ev.LeafState.Reoriginated != 4 || ev.LeafState.HubSeq != 9 {
		t.Fatalf("the leaf's leaf-state: %+v", ev)
	}
	return endV3(t, p, d, l)
}

// testMap is a map of generation g published on node pub, its document canonical.
func testMap(g uint64, pub string) wire.Map {
	doc := `{"generation":` + strconv.FormatUint(g, 10) + `,"nodes":[{"api":"http://127.0.0.1:7401","name":"a"}]}`
	return wire.Map{Generation: g, Document: []byte(doc), Publisher: pub, Published: 1 << 40}
}

// startV3 is a pair of current-build sessions through their handshake at version 3.
func startV3(t *testing.T, dNonce, lNonce []byte) (*prototest.Pair, *protocol.Session, *protocol.Session) {
	t.Helper()
	return startPair(t, prototest.ConfigV3(wire.RoleDialer, "a", 1), prototest.ConfigV3(wire.RoleListener, "b", 2), dNonce, lNonce)
}

// startPair is a pair of sessions of these configurations through their handshake.
func startPair(t *testing.T, dc, lc protocol.Config, dNonce, lNonce []byte) (*prototest.Pair, *protocol.Session, *protocol.Session) {
	t.Helper()
	d, err := protocol.New(dc)
	must(t, err)
	l, err := protocol.New(lc)
	must(t, err)
	p := &prototest.Pair{D: &prototest.Side{S: d}, L: &prototest.Side{S: l}, Now: prototest.Epoch}
	must(t, d.Start(p.Now, dNonce))
	must(t, l.Start(p.Now, lNonce))
	p.Pump(10)
	return p, d, l
}

// endV3 ends a version-3 or version-4 run: a PING each way (version 3) or the dialer's on
// the idle link (version 4), the dialer's close, and what each side sent, reported and
// counted.
func endV3(t *testing.T, p *prototest.Pair, d, l *protocol.Session) scenarioRun {
	t.Helper()
	p.Now = p.Now.Add(protocol.DefaultIdlePingInterval + 500*time.Millisecond)
	must(t, d.Tick(p.Now))
	must(t, l.Tick(p.Now))
	p.Pump(10)
	must(t, d.Close(wire.CodeGoingAway, "done"))
	p.Pump(10)
	return scenarioRun{dSent: p.D.Sent, lSent: p.L.Sent, dEvents: p.D.Events, lEvents: p.L.Events,
		dStats: d.Stats(), lStats: l.Stats()}
}
