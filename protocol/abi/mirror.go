package abi

import (
	"time"

	"plait/protocol"
	"plait/protocol/wire"
)

// The mappings between the session's values and the STATUS record's messages, both ways:
// the driver writes a status with StatsOf and LimitsOf, and a host reads it back with
// StatsMsg.Stats and LimitsMsg.Limits. TestStatusMirrors fails when a field is added to one
// side and not the other.

// StatsOf converts a protocol.Stats.
func StatsOf(s protocol.Stats) StatsMsg {
	return StatsMsg{BytesIn: s.BytesIn, BytesOut: s.BytesOut, MessagesIn: s.MessagesIn,
		MessagesOut: s.MessagesOut, TxnsReceived: s.TxnsReceived, TxnsSent: s.TxnsSent,
		Duplicates: s.Duplicates, Gaps: s.Gaps, Divergences: s.Divergences,
		IgnoredFrames: s.IgnoredFrames, ProtocolErrors: s.ProtocolErrors,
		ResendsRequested: s.ResendsRequested, ResendsReceived: s.ResendsReceived, Discarded: s.Discarded, Stale: s.Stale,
		RangeBytesIn: s.RangeBytesIn, RangeBytesOut: s.RangeBytesOut,
		FramesIn: s.FramesIn, FramesOut: s.FramesOut, Frames: frameCountsOf(&s.FramesInByType, &s.FramesOutByType)}
}

// frameCountsOf lists the types with a count, the unknown bucket (type 0) first, then by
// type number.
func frameCountsOf(in, out *protocol.FrameCounts) *FrameCountsMsg {
	var l []FrameCountMsg
	for slot := range protocol.UsedFrameSlots() {
		if in[slot] == 0 && out[slot] == 0 {
			continue
		}
		t, _ := protocol.SlotType(slot) // 0 for the unknown bucket
		l = append(l, FrameCountMsg{Type: uint8(t), In: in[slot], Out: out[slot]})
	}
	if l == nil {
		return nil
	}
	return &FrameCountsMsg{Types: l}
}

// Stats converts back to a protocol.Stats.
func (m *StatsMsg) Stats() protocol.Stats {
	s := protocol.Stats{BytesIn: m.BytesIn, BytesOut: m.BytesOut, MessagesIn: m.MessagesIn, MessagesOut: m.MessagesOut,
		TxnsReceived: m.TxnsReceived, TxnsSent: m.TxnsSent, Duplicates: m.Duplicates, Gaps: m.Gaps,
		Divergences: m.Divergences, IgnoredFrames: m.IgnoredFrames, ProtocolErrors: m.ProtocolErrors,
		ResendsRequested: m.ResendsRequested, ResendsReceived: m.ResendsReceived, Discarded: m.Discarded, Stale: m.Stale,
		RangeBytesIn: m.RangeBytesIn, RangeBytesOut: m.RangeBytesOut, FramesIn: m.FramesIn, FramesOut: m.FramesOut}
	if m.Frames == nil {
		return s
	}
	for _, c := range m.Frames.Types {
		slot := protocol.FrameSlot(wire.Type(c.Type)) // a type this build does not know: the unknown bucket
		s.FramesInByType[slot] += c.In
		s.FramesOutByType[slot] += c.Out
	}
	return s
}

// LimitsOf converts a protocol.Limits, durations in nanoseconds. MaxOutMessage does not
// cross the ABI: a guest sizes its outgoing messages with the default; nor do
// IdlePingInterval and SampleInterval: a guest's version-4 PINGs go by the defaults (the
// idle interval a third of a shorter liveness timeout, Limits.WithDefaults).
func LimitsOf(l protocol.Limits) LimitsMsg {
	return LimitsMsg{MaxFrameBody: uint64(l.MaxFrameBody), MaxMessage: uint64(l.MaxMessage),
		MaxSendBuffer: uint64(l.MaxSendBuffer), MaxUnackedBytes: uint64(l.MaxUnackedBytes),
		MaxOrigins: uint64(l.MaxOrigins), HandshakeTimeout: uint64(l.HandshakeTimeout),
		PingInterval: uint64(l.PingInterval), LivenessTimeout: uint64(l.LivenessTimeout),
		MaxChannels: uint64(l.MaxChannels), MaxChannelBuffer: uint64(l.MaxChannelBuffer), MaxSessionBuffer: uint64(l.MaxSessionBuffer),
		MaxRequestsInFlight: uint64(l.MaxRequestsInFlight)}
}

// Limits converts back to a protocol.Limits, as a status reports them (a CONFIGURE's are
// bounded first: Driver.configure).
func (m *LimitsMsg) Limits() protocol.Limits {
	return protocol.Limits{MaxFrameBody: uint32(m.MaxFrameBody), MaxMessage: int(m.MaxMessage), MaxSendBuffer: int(m.MaxSendBuffer),
		MaxUnackedBytes: int(m.MaxUnackedBytes), MaxOrigins: int(m.MaxOrigins), HandshakeTimeout: time.Duration(m.HandshakeTimeout),
		PingInterval: time.Duration(m.PingInterval), LivenessTimeout: time.Duration(m.LivenessTimeout), MaxChannels: int(m.MaxChannels),
		MaxChannelBuffer: int(m.MaxChannelBuffer), MaxSessionBuffer: int(m.MaxSessionBuffer),
		MaxRequestsInFlight: int(m.MaxRequestsInFlight)}
}
