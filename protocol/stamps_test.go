package protocol_test

import (
	"slices"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// The stamps and PINGs of version 4 (SPEC.md, "The quiet control plane"; clock.go), on a
// pair of sessions joined by a link whose delay each way, and each side's clock, the test
// sets: what goes on the wire over tens of virtual seconds, and what each side measured.

var debugStamps = false

// dialer and listener index a stampLink's sides.
const (
	dialer   = 0
	listener = 1
)

// stampLink is two sessions on a virtual clock, each message delivered its direction's
// delay after it was sent, in order.
type stampLink struct {
	t      *testing.T
	s      [2]*protocol.Session
	now    time.Time        // the true time
	skew   [2]time.Duration // each side's clock is the true time plus its skew
	delay  [2]time.Duration // from side i to the other
	mute   [2]bool          // what side i sends is lost (a dead process, a cut cable)
	flight []stampFlight    // in delivery order
	closed [2]time.Time     // when each side's session closed (true time)

	// counted from the last reset: frames sent by type, messages sent, by side
	frames [2]map[wire.Type]int
	msgs   [2]int
	// unstamped counts the stamp-carrying frames sent without one
	unstamped [2]int
	// onEvent is the application: it may call commands (Ack) on the side's session.
	onEvent func(side int, e protocol.Event)
	// every runs app at each multiple of its period from the start of run
	every time.Duration
	app   func()
}

type stampFlight struct {
	at  time.Time
	to  int
	msg []byte
}

// newStampLink starts a dialer and a listener of configurations dc and lc and runs the
// link until both are established.
func newStampLink(t *testing.T, dc, lc protocol.Config, delay [2]time.Duration, skew [2]time.Duration) *stampLink {
	t.Helper()
	k := &stampLink{t: t, now: prototest.Epoch, delay: delay, skew: skew}
	for i, c := range []protocol.Config{dc, lc} {
		s, err := protocol.New(c)
		must(t, err)
		k.s[i] = s
		must(t, s.Start(k.clock(i), prototest.Nonce(byte(i+1))))
	}
	k.reset()
	k.take(dialer)
	k.take(listener)
	for range 100 {
		if k.s[0].State() == protocol.StateEstablished && k.s[1].State() == protocol.StateEstablished {
			return k
		}
		k.step(k.now.Add(time.Hour))
	}
	t.Fatalf("no handshake: %v %v", k.s[0].Err(), k.s[1].Err())
	return nil
}

func (k *stampLink) clock(i int) time.Time { return k.now.Add(k.skew[i]) }

// reset starts the counts again.
func (k *stampLink) reset() {
	k.frames = [2]map[wire.Type]int{{}, {}}
	k.msgs = [2]int{}
	k.unstamped = [2]int{}
}

// take moves side i's output onto the link, counting it, and lets the application act on
// its events (and takes again what that made).
func (k *stampLink) take(i int) {
	for range 100 {
		rd := k.s[i].Ready()
		for _, m := range rd.Messages {
			k.msgs[i]++
			for _, f := range frames(k.t, [][]byte{m}) {
				k.frames[i][f.Type]++
				if debugStamps {
					st, _ := stampField(f.Value)
					if st != nil || f.Type == wire.TypePing || f.Type == wire.TypePong {
						k.t.Logf("%v side %d sends %v %+v", k.now.Sub(prototest.Epoch), i, f.Type, st)
					}
				}
				if st, ok := stampField(f.Value); ok && st == nil {
					k.unstamped[i]++
				}
			}
			if !k.mute[i] {
				at := k.now.Add(k.delay[i])
				for _, f := range k.flight {
					if f.to == 1-i && at.Before(f.at) {
						at = f.at // a stream: nothing overtakes
					}
				}
				k.flight = append(k.flight, stampFlight{at: at, to: 1 - i, msg: m})
				slices.SortStableFunc(k.flight, func(a, b stampFlight) int { return a.at.Compare(b.at) })
			}
		}
		for _, e := range rd.Events {
			if e.Kind == protocol.EventClosed && k.closed[i].IsZero() {
				k.closed[i] = k.now
			}
			if k.onEvent != nil {
				k.onEvent(i, e)
			}
		}
		if !k.s[i].HasReady() {
			return
		}
	}
	k.t.Fatal("take: the session keeps producing")
}

// stampField is the stamp of a decoded frame that may carry one.
func stampField(v any) (*wire.Stamp, bool) {
	switch b := v.(type) {
	case *wire.Ping:
		return b.Stamp, true
	case *wire.Pong:
		return b.Stamp, true
	case *wire.Cursor:
		return b.Stamp, true
	case *wire.Credit:
		return b.Stamp, true
	case *wire.Heads:
		return b.Stamp, true
	case *wire.Quiet:
		return b.Stamp, true
	}
	return nil, false
}

// deadline is side i's next timer in true time (zero: none).
func (k *stampLink) deadline(i int) time.Time {
	d := k.s[i].NextDeadline()
	if d.IsZero() || k.s[i].State() == protocol.StateClosed {
		return time.Time{}
	}
	return d.Add(-k.skew[i])
}

// step moves the clock to the next delivery, timer or application tick, not past until,
// and handles everything due then; it reports whether anything was.
func (k *stampLink) step(until time.Time) bool {
	next := until
	earlier := func(t time.Time) {
		if !t.IsZero() && t.Before(next) {
			next = t
		}
	}
	if len(k.flight) > 0 {
		earlier(k.flight[0].at)
	}
	earlier(k.deadline(dialer))
	earlier(k.deadline(listener))
	var appAt time.Time
	if k.app != nil {
		appAt = prototest.Epoch.Add((k.now.Sub(prototest.Epoch)/k.every + 1) * k.every)
		earlier(appAt)
	}
	if next.Before(k.now) {
		next = k.now
	}
	k.now = next
	did := false
	for len(k.flight) > 0 && !k.flight[0].at.After(k.now) {
		f := k.flight[0]
		k.flight = k.flight[1:]
		if k.s[f.to].State() != protocol.StateClosed {
			must(k.t, k.s[f.to].Receive(k.clock(f.to), f.msg))
		}
		k.take(f.to)
		did = true
	}
	for i := range 2 {
		if d := k.deadline(i); !d.IsZero() && !d.After(k.now) {
			must(k.t, k.s[i].Tick(k.clock(i)))
			k.take(i)
			did = true
		}
	}
	if k.app != nil && !appAt.After(k.now) {
		for i, s := range k.s {
			must(k.t, s.Tick(k.clock(i))) // as a replica does at every input
		}
		k.app()
		k.take(dialer)
		k.take(listener)
		did = true
	}
	return did
}

// run runs the link for d; a timer that stays due without closing or sending (a session
// that keeps its deadline in the past) fails the test rather than spinning.
func (k *stampLink) run(d time.Duration) {
	k.t.Helper()
	until := k.now.Add(d)
	for same, at := 0, k.now; k.now.Before(until); {
		k.step(until)
		if k.now.Equal(at) {
			if same++; same > 10000 {
				k.t.Fatalf("the link makes no progress at %v", k.now.Sub(prototest.Epoch))
			}
		} else {
			same, at = 0, k.now
		}
	}
}

// open checks that both sides are still established.
func (k *stampLink) open() {
	k.t.Helper()
	for i, s := range k.s {
		if s.State() != protocol.StateEstablished {
			k.t.Fatalf("side %d closed: %v", i, s.Err())
		}
	}
}

// measured checks that both sides measured the round trip as exactly the two delays and
// the peer's clock offset within half of it: the bound rtt_ms and clock_offset_ms promise.
func (k *stampLink) measured() {
	k.t.Helper()
	rtt := k.delay[0] + k.delay[1]
	for i, s := range k.s {
		if got := s.RTT(); got != rtt {
			k.t.Errorf("side %d: round trip %v, want %v", i, got, rtt)
		}
		off, ok := s.ClockOffset()
		want := k.skew[1-i] - k.skew[i]
		if !ok || off < want-rtt/2 || off > want+rtt/2 {
			k.t.Errorf("side %d: clock offset %v (measured %v), want %v within %v", i, off, ok, want, rtt/2)
		}
	}
}

// stream makes side from send one entry of its origin to the other side every call of
// next, the other side subscribed from the start and acknowledging each entry at once.
type stream struct {
	chain []prototest.Entry
	sent  int
}

func (k *stampLink) stream(from int, n byte) *stream {
	k.t.Helper()
	o := prototest.Origin(100 + n)
	st := &stream{chain: prototest.Chain(o, 2000, 1, 16)}
	must(k.t, k.s[from].SetOriginName(o, "o"+string('0'+n)))
	must(k.t, k.s[1-from].V2().Subscribe([]vector.Entry{{Origin: o}}))
	k.take(1 - from)
	prev := k.onEvent
	k.onEvent = func(side int, e protocol.Event) {
		if side == 1-from && e.Kind == protocol.EventTxn && e.Origin == o {
			must(k.t, k.s[side].V2().Ack(o, e.Txn.Seq))
		}
		if prev != nil {
			prev(side, e)
		}
	}
	return st
}

func (k *stampLink) send(from int, st *stream) {
	k.t.Helper()
	if st.sent < len(st.chain) && k.s[from].State() == protocol.StateEstablished {
		must(k.t, k.s[from].V2().Send(st.chain[st.sent].Raw))
		st.sent++
	}
}

// TestVersion3PingsBothWays: on a version-3 link each side sends a PING every ping
// interval, idle or not, and never a stamp: as before version 4.
func TestVersion3PingsBothWays(t *testing.T) {
	k := newStampLink(t, prototest.ConfigV3(wire.RoleDialer, "a", 1), prototest.ConfigV3(wire.RoleListener, "b", 2),
		[2]time.Duration{5 * time.Millisecond, 5 * time.Millisecond}, [2]time.Duration{})
	k.reset()
	k.run(20 * time.Second)
	k.open()
	for i := range 2 {
		if n := k.frames[i][wire.TypePing]; n < 19 || n > 21 {
			t.Errorf("side %d sent %d PINGs in 20 s, want one a second", i, n)
		}
		if n := k.frames[i][wire.TypePong]; n < 19 || n > 21 {
			t.Errorf("side %d sent %d PONGs in 20 s, want one a second", i, n)
		}
		if k.unstamped[i] != k.frames[i][wire.TypePing]+k.frames[i][wire.TypePong] {
			t.Errorf("side %d stamped some of its frames on version 3", i)
		}
	}
}

// TestIdleLinkPingsAtTheInterval: on an idle version-4 link the listener never PINGs; the
// dialer does once per idle-ping interval, so the link carries at most one message a
// second (PONGs counted), and both sides keep measuring the round trip and the clock:
// the listener from the echo each PING carries of its last PONG, held for the interval.
func TestIdleLinkPingsAtTheInterval(t *testing.T) {
	k := newStampLink(t, prototest.Config(wire.RoleDialer, "a", 1), prototest.Config(wire.RoleListener, "b", 2),
		[2]time.Duration{3 * time.Millisecond, 40 * time.Millisecond}, [2]time.Duration{0, 7 * time.Second})
	k.run(time.Second) // the first two exchanges: both sides measured at once
	k.measured()
	k.reset()
	const span = 60 * time.Second
	k.run(span)
	k.open()
	if n := k.frames[listener][wire.TypePing]; n != 0 {
		t.Errorf("the listener sent %d PINGs", n)
	}
	pings, per := k.frames[dialer][wire.TypePing], int(span/protocol.DefaultIdlePingInterval)
	if pings < per-1 || pings > per {
		t.Errorf("the dialer sent %d PINGs in %v, want one per %v", pings, span, protocol.DefaultIdlePingInterval)
	}
	if m := k.msgs[dialer] + k.msgs[listener]; m > int(span/time.Second) {
		t.Errorf("%d messages in %v on an idle link: more than one a second", m, span)
	}
	if k.unstamped[dialer]+k.unstamped[listener] != 0 {
		t.Errorf("%d PINGs or PONGs without a stamp", k.unstamped[dialer]+k.unstamped[listener])
	}
	k.measured()
}

// TestBusyLinkNeverPings: a link busy both ways (each side streams an entry every 100 ms,
// the other acknowledging it) carries no PING after the first two: the stamps of the
// CURSOR and CREDIT frames keep both sides' samples coming, and a change of the delays
// shows in both sides' round trips at once.
func TestBusyLinkNeverPings(t *testing.T) {
	k := newStampLink(t, prototest.Config(wire.RoleDialer, "a", 1), prototest.Config(wire.RoleListener, "b", 2),
		[2]time.Duration{10 * time.Millisecond, 10 * time.Millisecond}, [2]time.Duration{-3 * time.Second, 0})
	ds, ls := k.stream(dialer, 1), k.stream(listener, 2)
	k.every, k.app = 100*time.Millisecond, func() {
		k.send(dialer, ds)
		k.send(listener, ls)
	}
	k.run(time.Second)
	k.reset()
	k.run(30 * time.Second)
	k.open()
	k.measured()
	k.delay = [2]time.Duration{25 * time.Millisecond, 5 * time.Millisecond}
	k.run(time.Second)
	k.measured()
	if n := k.frames[dialer][wire.TypePing] + k.frames[listener][wire.TypePing]; n != 0 {
		t.Errorf("%d PINGs on a link busy both ways", n)
	}
	if k.frames[dialer][wire.TypeCursor] < 250 || k.frames[listener][wire.TypeCursor] < 250 {
		t.Errorf("CURSOR frames %d and %d: the link was not busy", k.frames[dialer][wire.TypeCursor], k.frames[listener][wire.TypeCursor])
	}
	if k.unstamped[dialer]+k.unstamped[listener] != 0 {
		t.Errorf("%d frames that carry a stamp sent without one", k.unstamped[dialer]+k.unstamped[listener])
	}
}

// TestOneWayBusyLinkSamples: a link busy one way (one side streams, the other only
// acknowledges) is never idle, and the streaming side's DATA carries no stamp, so only
// the sample interval brings PINGs: one per interval, which keep both sides' round trips
// and clocks measured (a change of the delays shows within one interval), whichever side
// streams.
func TestOneWayBusyLinkSamples(t *testing.T) {
	for _, from := range []int{dialer, listener} {
		t.Run([]string{"dialer streams", "listener streams"}[from], func(t *testing.T) {
			k := newStampLink(t, prototest.Config(wire.RoleDialer, "a", 1), prototest.Config(wire.RoleListener, "b", 2),
				[2]time.Duration{10 * time.Millisecond, 30 * time.Millisecond}, [2]time.Duration{0, 90 * time.Millisecond})
			st := k.stream(from, 1)
			k.every, k.app = 100*time.Millisecond, func() { k.send(from, st) }
			k.run(time.Second)
			k.measured()
			k.reset()
			const span = 30 * time.Second
			k.run(span)
			k.open()
			pings, per := k.frames[dialer][wire.TypePing], int(span/protocol.DefaultSampleInterval)
			if pings < per-1 || pings > per+1 {
				t.Errorf("%d PINGs in %v, want one per sample interval (%v)", pings, span, protocol.DefaultSampleInterval)
			}
			if n := k.frames[listener][wire.TypePing]; n != 0 {
				t.Errorf("the listener sent %d PINGs", n)
			}
			k.delay = [2]time.Duration{50 * time.Millisecond, 2 * time.Millisecond}
			k.run(protocol.DefaultSampleInterval + time.Second)
			k.open()
			k.measured()
		})
	}
}

// TestSilentPeerClosedWithinLiveness: a peer that sends nothing more (dead, or its
// messages lost) is closed liveness-timeout within the liveness timeout of the last
// message received, on both sides: the listener, which never PINGs, hears the dialer's
// PINGs while it lives; the dialer's PINGs go unanswered.
func TestSilentPeerClosedWithinLiveness(t *testing.T) {
	for _, dead := range []int{dialer, listener} {
		t.Run([]string{"the dialer dies", "the listener dies"}[dead], func(t *testing.T) {
			k := newStampLink(t, prototest.Config(wire.RoleDialer, "a", 1), prototest.Config(wire.RoleListener, "b", 2),
				[2]time.Duration{5 * time.Millisecond, 5 * time.Millisecond}, [2]time.Duration{})
			k.run(10 * time.Second) // idle, alive: nothing closes
			k.open()
			live := 1 - dead
			k.mute[dead] = true
			k.flight = slices.DeleteFunc(k.flight, func(f stampFlight) bool { return f.to == live })
			last := k.s[live].LastReceive()
			k.run(protocol.DefaultLivenessTimeout + time.Second)
			s := k.s[live]
			if e := s.Err(); e == nil || e.Code != wire.CodeLivenessTimeout {
				t.Fatalf("the survivor: %v, want liveness-timeout", e)
			}
			if d := k.closed[live].Sub(last); d > protocol.DefaultLivenessTimeout {
				t.Errorf("closed %v after the last message, beyond the liveness timeout", d)
			}
		})
	}
}

// TestStampEchoedOnce: a stamp received is echoed by the next stamped frame sent, with
// how long it was held, and by no later one. (On the listener, which sends no PING of its
// own to echo it first.)
func TestStampEchoedOnce(t *testing.T) {
	p := established(t, prototest.Config(wire.RoleDialer, "a", 1), prototest.Config(wire.RoleListener, "b", 2))
	s := p.L.S
	o := prototest.Origin(9)
	must(t, s.SetOriginName(o, "nine"))
	peer := uint64(p.Now.Add(-time.Second).UnixMicro())
	got := p.Now.Add(time.Millisecond)
	credit := &wire.Credit{Entries: []wire.CreditEntry{{Limit: 1 << 40}}, Stamp: &wire.Stamp{Time: peer}}
	must(t, s.Receive(got, prototest.Frame(credit)))
	p.L.Drain()
	sent := got.Add(250 * time.Microsecond)
	must(t, s.Tick(sent))
	must(t, s.V2().AdvertiseHeads([]wire.Head{{Origin: o, Seq: 1, HLC: 1}}))
	must(t, s.V2().AdvertiseHeads([]wire.Head{{Origin: o, Seq: 2, HLC: 2}}))
	var stamps []wire.Stamp
	for _, f := range frames(t, p.L.Drain()) {
		if h, ok := f.Value.(*wire.Heads); ok {
			stamps = append(stamps, *h.Stamp)
		}
	}
	now := uint64(sent.UnixMicro())
	want := []wire.Stamp{{Time: now, Echo: peer, Held: 250}, {Time: now}}
	if !slices.Equal(stamps, want) {
		t.Fatalf("HEADS stamps %+v, want %+v", stamps, want)
	}
}

// TestStampIgnoredBelowVersion4: a version-3 session takes a PING with a stamp (a key it
// knows) as the PING it is: its PONG is version 3's, with its time and no stamp, and the
// stamp measures nothing.
func TestStampIgnoredBelowVersion4(t *testing.T) {
	p := established(t, prototest.ConfigV3(wire.RoleDialer, "a", 1), prototest.ConfigV3(wire.RoleListener, "b", 2))
	at := p.Now.Add(time.Millisecond)
	echo := uint64(p.Now.UnixMicro())
	must(t, p.L.S.Receive(at, prototest.Frame(&wire.Ping{ID: 7, Stamp: &wire.Stamp{Time: echo + 1, Echo: echo, Held: 10}})))
	msgs := p.L.Drain()
	want := prototest.Frame(&wire.Pong{ID: 7, Time: uint64(at.UnixMicro())})
	if len(msgs) != 1 || string(msgs[0]) != string(want) {
		t.Fatalf("the answer %x, want %x", msgs, want)
	}
	if _, ok := p.L.S.ClockOffset(); ok || p.L.S.RTT() != 0 {
		t.Fatalf("a stamp on version 3 measured: rtt %v", p.L.S.RTT())
	}
}

// TestStampSampleBounds: a stamp's sample is taken for a round trip from 0 up to
// MaxSampleRTT, and dropped beyond it or below 0 (an echo after the receive time), the
// estimate and the round trip unchanged.
func TestStampSampleBounds(t *testing.T) {
	p := established(t, prototest.Config(wire.RoleDialer, "a", 1), prototest.Config(wire.RoleListener, "b", 2))
	s := p.D.S
	start := p.Now.Add(time.Hour)
	for i, c := range []struct {
		rtt  time.Duration
		took bool
	}{
		{0, true},
		{protocol.MaxSampleRTT, true},
		{protocol.MaxSampleRTT + time.Microsecond, false},
		{-time.Microsecond, false},
	} {
		now := start.Add(time.Duration(i) * 2 * protocol.MaxSampleRTT)
		before := s.RTT()
		echo := uint64(now.Add(-c.rtt - time.Second).UnixMicro()) // held for a second by the peer
		credit := &wire.Credit{Entries: []wire.CreditEntry{{Limit: 1<<40 + uint64(i)}},
			Stamp: &wire.Stamp{Time: uint64(now.UnixMicro()), Echo: echo, Held: 1e6}}
		must(t, s.Receive(now, prototest.Frame(credit)))
		if s.State() != protocol.StateEstablished {
			t.Fatalf("round trip %v: closed %v", c.rtt, s.Err())
		}
		switch {
		case c.took && s.RTT() != c.rtt:
			t.Errorf("round trip %v: sampled %v", c.rtt, s.RTT())
		case !c.took && s.RTT() != before:
			t.Errorf("round trip %v: taken (round trip %v)", c.rtt, s.RTT())
		}
	}
}

// TestIdlePingIntervalLimits: IdlePingInterval is checked: above 0, below half the
// liveness timeout (at the limit and one past it); its default is 2 s, or a third of a
// shorter liveness timeout; SampleInterval is above 0.
func TestIdlePingIntervalLimits(t *testing.T) {
	for _, c := range []struct {
		name string
		l    protocol.Limits
		ok   bool
		idle time.Duration
	}{
		{"defaults", protocol.Limits{}, true, 2 * time.Second},
		{"just below half the liveness timeout", protocol.Limits{IdlePingInterval: 2500*time.Millisecond - 1}, true, 2500*time.Millisecond - 1},
		{"half the liveness timeout", protocol.Limits{IdlePingInterval: 2500 * time.Millisecond}, false, 0},
		{"negative", protocol.Limits{IdlePingInterval: -1}, false, 0},
		{"a liveness timeout of 3 s", protocol.Limits{LivenessTimeout: 3 * time.Second}, true, time.Second},
		{"a negative sample interval", protocol.Limits{SampleInterval: -1}, false, 0},
	} {
		l := c.l.WithDefaults()
		err := l.Validate()
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
		if c.ok && l.IdlePingInterval != c.idle {
			t.Errorf("%s: idle-ping interval %v, want %v", c.name, l.IdlePingInterval, c.idle)
		}
		if !c.ok && (err == nil || err.Code != wire.CodeBadArgument) {
			t.Errorf("%s: %v, want bad-argument", c.name, err)
		}
	}
}
