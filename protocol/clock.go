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

// ClockSamples is how many of the latest PING/PONG exchanges the clock filter keeps.
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
// always did; and never a time at or before the Unix epoch, which the key cannot hold.
func (s *Session) pongTime(now time.Time) uint64 {
	if s.info.Version < 3 {
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

// ClockOffset is the estimated offset of the peer's wall clock from this side's (positive:
// the peer's clock is ahead), and whether the peer was measured at all: false before the
// first PONG with a time, and always on connections of versions 1 and 2.
func (s *Session) ClockOffset() (time.Duration, bool) { return s.clock.estimate() }
