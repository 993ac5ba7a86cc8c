package protocol

import (
	"time"

	"plait/protocol/wire"
)

// The clock offset between this node and its peer, estimated from PING/PONG exchanges
// (SPEC.md, "Liveness"; docs/design.md, "Clock offset and its bound").
//
// A version-3 PONG carries the answering side's wall clock T, read once when it handled
// the PING, so its receive and send times are the same instant. With the PING sent at t0
// and the PONG received at t3 (this side's clock), NTP's offset ((T - t0) + (T - t3)) / 2
// is then T - (t0 + rtt/2): the peer's clock minus this one's, wrong by at most rtt/2
// whatever the path's asymmetry. Like NTP's clock filter, the estimate is the offset of
// the sample with the lowest RTT among the last ClockSamples: the exchange least delayed
// by queues bounds the error most tightly, and one slow exchange does not move it.

// On a version-4 connection the samples come from stamps (SPEC.md, "The quiet control
// plane"; docs/design.md §28.1): every PING, PONG, CURSOR, CREDIT, HEADS and QUIET carries
// the sender's time and its echo of the latest stamp it received, with how long it held
// it. A stamp that echoes one of this side's, received at t3, is one exchange: the round
// trip is t3 - echo - held, and the peer read its clock for time held after it received
// the echoed stamp, so the same midpoint rule gives the offset time - (t3 - rtt/2), wrong
// by at most rtt/2. A frame stamped late (a command queued between inputs takes the time
// of the latest one) only lengthens its sample's round trip, never the bound.

// ClockSamples is how many of the latest samples the clock filter keeps.
const ClockSamples = 8

// clockSample is one exchange's offset and round trip.
type clockSample struct {
	offset time.Duration // the peer's clock minus this side's
	rtt    time.Duration
}

// clockFilter keeps the latest ClockSamples samples in a ring.
type clockFilter struct {
	samples [ClockSamples]clockSample
	n       int // samples held, up to ClockSamples
	next    int // the ring slot the next sample takes
}

func (f *clockFilter) add(s clockSample) {
	f.samples[f.next] = s
	f.next = (f.next + 1) % ClockSamples
	f.n = min(f.n+1, ClockSamples)
}

// estimate is the offset of the held sample with the lowest RTT; among equal RTTs the
// newest, so that a clock that was stepped shows in the estimate as soon as it can.
func (f *clockFilter) estimate() (time.Duration, bool) {
	if f.n == 0 {
		return 0, false
	}
	best := -1
	for i := 0; i < f.n; i++ {
		j := (f.next - 1 - i + 2*ClockSamples) % ClockSamples // newest first
		if best < 0 || f.samples[j].rtt < f.samples[best].rtt {
			best = j
		}
	}
	return f.samples[best].offset, true
}

// pongTime is the wall clock a PONG carries: on version-3 connections only, so that
// peers of versions 1 and 2 (frozen releases among them) see exactly the PONG they
// always did, and a version-4 PONG carries its stamp instead (the same time, and the
// PING's echo); and never a time at or before the Unix epoch, which the key cannot hold.
func (s *Session) pongTime(now time.Time) uint64 {
	if s.info.Version != 3 {
		return 0
	}
	return uint64(max(now.UnixMicro(), 0))
}

// onPongTime takes one sample from a PONG that answered the outstanding PING.
func (s *Session) onPongTime(p *wire.Pong) {
	if p.Time == 0 || s.rtt < 0 {
		return // a peer that sends no time (versions 1 and 2) is never measured
	}
	// Clamped to a century either way, so that no time a peer sends overflows a Duration.
	const century = int64(100 * 365 * 24 * time.Hour / time.Microsecond)
	d := int64(min(p.Time, uint64(1<<62))) - s.pingSent.UnixMicro()
	off := time.Duration(min(max(d, -century), century))*time.Microsecond - s.rtt/2
	s.clock.add(clockSample{offset: off, rtt: s.rtt})
}

// MaxSampleRTT bounds a stamp's sample: one whose round trip is negative (the echo is
// after the receive time: this side's clock stepped back, or an echo it never sent) or
// above MaxSampleRTT is dropped, not an error. Why: the replica's clock guard allows each
// estimate half the latest round trip as its error (RTT), so an absurd round trip from one
// bad echo would blind it to that peer's clock until the next sample.
const MaxSampleRTT = time.Minute

// stampState is a version-4 session's side of the stamps.
type stampState struct {
	peer    uint64    // the time of the latest stamp received and not yet echoed (0: none)
	peerAt  time.Time // when it was received
	sent    time.Time // when a frame was last queued (the session's time then)
	sampled time.Time // when the latest sample was taken (zero before the first)
	// echoSent is when this side last sent a stamp that echoed one of the peer's, which
	// gave the peer a sample (zero before the first): the dialer's view of how fresh the
	// listener's samples are, since the listener never PINGs.
	echoSent time.Time
}

// stampOf is where a body keeps its stamp, or nil for a body without one: the one list of
// the frames that carry a stamp (SPEC.md, "Stamps").
func stampOf(b wire.Body) **wire.Stamp {
	switch b := b.(type) {
	case *wire.Ping:
		return &b.Stamp
	case *wire.Pong:
		return &b.Stamp
	case *wire.Cursor:
		return &b.Stamp
	case *wire.Credit:
		return &b.Stamp
	case *wire.Heads:
		return &b.Stamp
	case *wire.Quiet:
		return &b.Stamp
	}
	return nil
}

// stamp gives a body about to be sent its stamp, on an established version-4 connection,
// and reports whether it did: the session's time, and the echo of the peer's latest stamp
// not yet echoed with how long it was held. The caller calls echoed once the frame is
// queued, so that each received stamp is echoed once.
func (s *Session) stamp(b wire.Body) bool {
	p := stampOf(b)
	t := s.now.UnixMicro()
	if p == nil || s.state != StateEstablished || s.info.Version < 4 || t < 1 {
		return false
	}
	st := &wire.Stamp{Time: uint64(t)}
	if s.stamps.peer != 0 {
		s.stamps.echoSent = s.now
		st.Echo = s.stamps.peer
		if held := s.now.Sub(s.stamps.peerAt); held > 0 {
			st.Held = uint64(held / time.Microsecond)
		}
	}
	*p = st
	return true
}

// echoed marks the peer's latest stamp as echoed.
func (s *Session) echoed() { s.stamps.peer = 0 }

// onStamp takes a stamp received on a version-4 connection at now: it is the one the next
// frame sent echoes, and, when it echoes one of this side's, a sample of the round trip
// and the clock offset (the comment at the top of this file).
func (s *Session) onStamp(now time.Time, st *wire.Stamp) {
	s.stamps.peer, s.stamps.peerAt = st.Time, now
	t3, held := now.UnixMicro(), st.Held
	if s.cfg.Mutations.IgnoreStampHeld {
		held = 0 // test-only: the peer's hold counted as round trip
	}
	if st.Echo == 0 || t3 < 0 || st.Echo > uint64(t3) || held > uint64(t3)-st.Echo {
		return // no echo, or a negative round trip
	}
	rtt := time.Duration(uint64(t3)-st.Echo-held) * time.Microsecond
	if rtt > MaxSampleRTT {
		return
	}
	const century = int64(100 * 365 * 24 * time.Hour / time.Microsecond)
	d := int64(min(st.Time, uint64(1<<62))) - t3
	off := time.Duration(min(max(d, -century), century))*time.Microsecond + rtt/2
	s.rtt = rtt
	s.stamps.sampled = now
	s.clock.add(clockSample{offset: off, rtt: rtt})
}

// ClockOffset is the estimated offset of the peer's wall clock from this side's (positive:
// the peer's clock is ahead), and whether the peer was measured at all: false before the
// first PONG with a time, and always on connections of versions 1 and 2.
func (s *Session) ClockOffset() (time.Duration, bool) { return s.clock.estimate() }
