package protocol

import (
	"bytes"
	"maps"
	"slices"

	"plait/protocol/wire"
)

// Clone returns an independent copy of the session as it is between calls: the same state,
// output not yet taken and counters, so that the same calls give both the same results,
// and nothing done to one is seen by the other.
//
// It exists for fuzzing and model checking: a session is set up once (a handshake, its
// subscriptions) and each input starts from a copy, instead of from a handshake replayed
// per input, which costs several times the input itself. A copy shares only what neither
// ever writes: its Config, and what events not yet taken point to (the caller's input,
// values made for the event).
func (s *Session) Clone() *Session {
	c := *s
	c.localHello, c.peerHello = bytes.Clone(s.localHello), bytes.Clone(s.peerHello)
	c.pending.Caps, c.info.Caps = slices.Clone(s.pending.Caps), slices.Clone(s.info.Caps)
	c.msgs = make([][]byte, len(s.msgs))
	for i, m := range s.msgs {
		c.msgs[i] = bytes.Clone(m)
	}
	if s.msgs == nil {
		c.msgs = nil
	}
	c.cur = bytes.Clone(s.cur)
	c.spare = nil // a buffer to reuse, which the original may still reuse
	c.events = slices.Clone(s.events)
	if s.closeErr != nil {
		e := *s.closeErr
		c.closeErr = &e
	}
	c.names, c.announced, c.peerOrigins = maps.Clone(s.names), maps.Clone(s.announced), maps.Clone(s.peerOrigins)
	c.v1.unacked = s.v1.unacked.clone()
	c.chans = s.chans.clone()
	c.v4.out, c.v4.in = maps.Clone(s.v4.out), maps.Clone(s.v4.in)
	c.v4.peerQuiet, c.v4.quietOut = maps.Clone(s.v4.peerQuiet), maps.Clone(s.v4.quietOut)
	return &c
}

func (q ackQueue[T]) clone() ackQueue[T] {
	q.items = slices.Clone(q.items)
	return q
}

// clone copies the version-2 state: each channel once, so that the copy's maps by id and
// by origin keep naming the same channel.
func (v channelState) clone() channelState {
	c := v
	c.in, c.inOrigin = cloneChannels(v.in, v.inOrigin, func(ch inChannel) inChannel {
		ch.pending = ch.pending.clone()
		return ch
	})
	c.out, c.outOrigin = cloneChannels(v.out, v.outOrigin, func(ch outChannel) outChannel {
		ch.ends = slices.Clone(ch.ends)
		return ch
	})
	c.advertised, c.peerHeads = maps.Clone(v.advertised), maps.Clone(v.peerHeads)
	c.advFloors, c.peerFloors = maps.Clone(v.advFloors), maps.Clone(v.peerFloors)
	if v.copyIn != nil {
		n := *v.copyIn
		n.vector = maps.Clone(v.copyIn.vector)
		n.table, n.key = bytes.Clone(v.copyIn.table), bytes.Clone(v.copyIn.key)
		n.pending = v.copyIn.pending.clone()
		n.holds.table = bytes.Clone(v.copyIn.holds.table)
		c.copyIn = &n
	}
	if v.copyOut != nil {
		n := *v.copyOut
		n.table, n.key = bytes.Clone(v.copyOut.table), bytes.Clone(v.copyOut.key)
		n.holds.table = bytes.Clone(v.copyOut.holds.table)
		c.copyOut = &n
	}
	c.rangeOut, c.rangeIn = v.rangeOut.clone(), v.rangeIn.clone()
	c.cursors, c.grants = slices.Clone(v.cursors), slices.Clone(v.grants)
	return c
}

func (a *rangeAsk) clone() *rangeAsk {
	if a == nil {
		return nil
	}
	return &rangeAsk{after: wire.RangePoint{Table: bytes.Clone(a.after.Table), Key: bytes.Clone(a.after.Key)},
		through: wire.RangePoint{Table: bytes.Clone(a.through.Table), Key: bytes.Clone(a.through.Key)}}
}

// cloneChannels copies the channels of a map by id and a map by origin that point to the
// same channels, each once (copyOf copies what a channel holds beyond its values); a nil map
// stays nil.
func cloneChannels[C any](byID map[uint32]*C, byOrigin map[wire.OriginID]*C, copyOf func(C) C) (map[uint32]*C, map[wire.OriginID]*C) {
	copies := make(map[*C]*C, len(byID))
	cp := func(ch *C) *C {
		if n, ok := copies[ch]; ok {
			return n
		}
		n := copyOf(*ch)
		copies[ch] = &n
		return &n
	}
	var id map[uint32]*C
	var org map[wire.OriginID]*C
	if byID != nil {
		id = make(map[uint32]*C, len(byID))
		for k, ch := range byID {
			id[k] = cp(ch)
		}
	}
	if byOrigin != nil {
		org = make(map[wire.OriginID]*C, len(byOrigin))
		for k, ch := range byOrigin {
			org[k] = cp(ch)
		}
	}
	return id, org
}
