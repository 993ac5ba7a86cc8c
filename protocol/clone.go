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
	c.v2 = s.v2.clone()
	return &c
}

func (q ackQueue[T]) clone() ackQueue[T] {
	q.items = slices.Clone(q.items)
	return q
}

// clone copies the channels once each, so that the maps by id and by origin keep naming
// the same channel.
func (v v2State) clone() v2State {
	c := v
	if v.in != nil {
		c.in, c.inOrigin = make(map[uint32]*inChannel, len(v.in)), make(map[wire.OriginID]*inChannel, len(v.inOrigin))
		copies := make(map[*inChannel]*inChannel, len(v.in))
		cp := func(ch *inChannel) *inChannel {
			if n, ok := copies[ch]; ok {
				return n
			}
			n := *ch
			n.pending = ch.pending.clone()
			copies[ch] = &n
			return &n
		}
		for id, ch := range v.in {
			c.in[id] = cp(ch)
		}
		for o, ch := range v.inOrigin {
			c.inOrigin[o] = cp(ch)
		}
	}
	if v.out != nil {
		c.out, c.outOrigin = make(map[uint32]*outChannel, len(v.out)), make(map[wire.OriginID]*outChannel, len(v.outOrigin))
		copies := make(map[*outChannel]*outChannel, len(v.out))
		cp := func(ch *outChannel) *outChannel {
			if n, ok := copies[ch]; ok {
				return n
			}
			n := *ch
			copies[ch] = &n
			return &n
		}
		for id, ch := range v.out {
			c.out[id] = cp(ch)
		}
		for o, ch := range v.outOrigin {
			c.outOrigin[o] = cp(ch)
		}
	}
	c.advertised, c.peerHeads = maps.Clone(v.advertised), maps.Clone(v.peerHeads)
	c.advFloors, c.peerFloors = maps.Clone(v.advFloors), maps.Clone(v.peerFloors)
	if v.copyIn != nil {
		n := *v.copyIn
		n.vector = maps.Clone(v.copyIn.vector)
		n.table, n.key = bytes.Clone(v.copyIn.table), bytes.Clone(v.copyIn.key)
		n.pending = v.copyIn.pending.clone()
		c.copyIn = &n
	}
	if v.copyOut != nil {
		n := *v.copyOut
		n.table, n.key = bytes.Clone(v.copyOut.table), bytes.Clone(v.copyOut.key)
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
