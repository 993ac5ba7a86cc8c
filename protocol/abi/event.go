package abi

import (
	"fmt"

	"plait/protocol"
	"plait/protocol/wire"
)

// The one mapping between protocol.Event and EventMsg, both ways: the guest and the native
// driver encode events with EventOf, and a host decodes them with EventMsg.Event. EventMsg
// keeps ABI 2's keys and values whatever protocol.Event's fields are called: key 4
// (Expected) carries a gap's expected seq, a resend's start and the seq of a received
// entry that diverged; key 12 and 13 (Seq, Hash) a chain position.

// EventOf converts a protocol.Event.
func EventOf(e *protocol.Event) *EventMsg {
	m := &EventMsg{Kind: uint8(e.Kind), Position: e.Position, Name: e.Name,
		Frame: uint8(e.Frame), Err: ErrorOf(e.Err), ByPeer: e.ByPeer, Count: e.Count, Seq: e.Seq,
		Outgoing: e.Outgoing}
	switch e.Kind {
	case protocol.EventGap:
		m.Expected = e.Expected
	case protocol.EventResend:
		m.Expected = e.From
	case protocol.EventDivergence:
		if e.Txn.Raw() != nil || e.Skip != nil { // about a received entry or run: its seq (otherwise it is Seq's)
			m.Expected = e.DivergedAt
		}
	}
	if e.Hash != (wire.Hash{}) {
		h := e.Hash
		m.Hash = &h
	}
	if e.Heads != nil {
		m.Heads = &HeadsMsg{Heads: e.Heads.Heads, Withdrawn: e.Heads.Withdrawn, Floors: e.Heads.Floors}
	}
	if raw := e.Txn.Raw(); raw != nil {
		m.Txn = raw
	}
	if !e.Origin.IsZero() {
		o := e.Origin
		m.Origin = &o
	}
	if e.Handshake != nil {
		m.Handshake = HandshakeOf(*e.Handshake)
	}
	if c := e.Copy; c != nil {
		m.Copy = &CopyMsg{Channel: c.Channel, Credit: c.Credit, Table: c.Table, Key: c.Key}
	}
	if b := e.CopyBegin; b != nil {
		m.CopyBegin = &CopyBeginMsg{Channel: b.Channel, Positions: b.Positions, Tables: b.Tables, Records: b.Records, Bytes: b.Bytes}
	}
	if e.Chunk != nil {
		m.Chunk = e.Chunk.Raw()
	}
	if e.RangeDigest != nil {
		m.RangeDigest, _ = e.RangeDigest.AppendBody(nil) // the session decoded it: it encodes
	}
	if e.Range != nil {
		m.Range = e.Range.Raw()
	}
	// The session decoded these bodies from frames, or was given them checked: they encode.
	if e.Map != nil {
		m.Map, _ = e.Map.AppendBody(nil)
	}
	if e.Members != nil {
		m.Members, _ = e.Members.AppendBody(nil)
	}
	if e.Request != nil {
		m.Request, _ = e.Request.AppendBody(nil)
	}
	if e.Response != nil {
		m.Response, _ = e.Response.AppendBody(nil)
	}
	if e.Skip != nil {
		m.Skip, _ = e.Skip.AppendBody(nil)
	}
	if e.Link != nil {
		m.Link, _ = e.Link.AppendBody(nil)
	}
	if e.Holds != nil {
		m.Holds, _ = e.Holds.AppendBody(nil)
	}
	if e.LeafState != nil {
		m.LeafState, _ = e.LeafState.AppendBody(nil)
	}
	if e.Quiet != nil {
		m.Quiet, _ = e.Quiet.AppendBody(nil)
	}
	m.Late = e.Late
	return m
}

// Event converts an EVENT record back to a protocol.Event. Its transaction is parsed (the
// view aliases m.Txn); a record whose transaction does not parse is an error.
func (m *EventMsg) Event() (protocol.Event, error) {
	e := protocol.Event{Kind: protocol.EventKind(m.Kind), Position: m.Position, Name: m.Name,
		Frame: wire.Type(m.Frame), Err: m.Err.Wire(), ByPeer: m.ByPeer, Count: m.Count, Seq: m.Seq, Outgoing: m.Outgoing,
		Late: m.Late}
	switch e.Kind {
	case protocol.EventGap:
		e.Expected = m.Expected
	case protocol.EventResend:
		e.From = m.Expected
	case protocol.EventDivergence:
		e.DivergedAt = m.Seq
		if m.Txn != nil || m.Skip != nil {
			e.DivergedAt = m.Expected
		}
	}
	if m.Origin != nil {
		e.Origin = *m.Origin
	}
	if m.Hash != nil {
		e.Hash = *m.Hash
	}
	if m.Heads != nil {
		e.Heads = &wire.Heads{Heads: m.Heads.Heads, Withdrawn: m.Heads.Withdrawn, Floors: m.Heads.Floors}
	}
	if m.Handshake != nil {
		h := m.Handshake.Info()
		e.Handshake = &h
	}
	if c := m.Copy; c != nil {
		e.Copy = &wire.Copy{Channel: c.Channel, Credit: c.Credit, Table: c.Table, Key: c.Key}
	}
	if b := m.CopyBegin; b != nil {
		e.CopyBegin = &wire.CopyBegin{Channel: b.Channel, Positions: b.Positions, Tables: b.Tables, Records: b.Records, Bytes: b.Bytes}
	}
	if m.Chunk != nil {
		v, err := wire.ParseChunk(m.Chunk)
		if err != nil {
			return e, fmt.Errorf("abi: an event's chunk: %w", err)
		}
		e.Chunk = &v
	}
	if m.RangeDigest != nil {
		d, err := wire.DecodeRangeDigest(m.RangeDigest)
		if err != nil {
			return e, fmt.Errorf("abi: an event's range ask: %w", err)
		}
		e.RangeDigest = d
	}
	if m.Range != nil {
		v, err := wire.ParseRangeRecords(m.Range)
		if err != nil {
			return e, fmt.Errorf("abi: an event's range answer: %w", err)
		}
		e.Range = &v
	}
	var err error
	if m.Map != nil {
		if e.Map, err = wire.DecodeMap(m.Map); err != nil {
			return e, fmt.Errorf("abi: an event's map: %w", err)
		}
	}
	if m.Members != nil {
		if e.Members, err = wire.DecodeMembers(m.Members); err != nil {
			return e, fmt.Errorf("abi: an event's members: %w", err)
		}
	}
	if m.Request != nil {
		if e.Request, err = wire.DecodeRequest(m.Request); err != nil {
			return e, fmt.Errorf("abi: an event's request: %w", err)
		}
	}
	if m.Response != nil {
		if e.Response, err = wire.DecodeResponse(m.Response); err != nil {
			return e, fmt.Errorf("abi: an event's response: %w", err)
		}
	}
	if m.Skip != nil {
		if e.Skip, err = wire.DecodeSkip(m.Skip); err != nil {
			return e, fmt.Errorf("abi: an event's skip: %w", err)
		}
	}
	if m.Link != nil {
		if e.Link, err = wire.DecodeLink(m.Link); err != nil {
			return e, fmt.Errorf("abi: an event's link: %w", err)
		}
	}
	if m.Holds != nil {
		if e.Holds, err = wire.DecodeHolds(m.Holds); err != nil {
			return e, fmt.Errorf("abi: an event's holds: %w", err)
		}
	}
	if m.LeafState != nil {
		if e.LeafState, err = wire.DecodeLeafState(m.LeafState); err != nil {
			return e, fmt.Errorf("abi: an event's leaf state: %w", err)
		}
	}
	if m.Quiet != nil {
		if e.Quiet, err = wire.DecodeQuiet(m.Quiet); err != nil {
			return e, fmt.Errorf("abi: an event's quiet: %w", err)
		}
	}
	if m.Txn != nil {
		v, err := wire.ParseTxn(m.Txn)
		if err != nil {
			return e, fmt.Errorf("abi: an event's transaction: %w", err)
		}
		e.Txn = v
	}
	return e, nil
}

// HandshakeOf converts a protocol.HandshakeInfo.
func HandshakeOf(h protocol.HandshakeInfo) *HandshakeMsg {
	return &HandshakeMsg{Version: h.Version, Caps: h.Caps, PeerName: h.PeerName, PeerOrigin: h.PeerOrigin,
		PeerMin: h.PeerMin, PeerMax: h.PeerMax, Authenticated: h.Authenticated, Bound: h.Bound, PeerLeaf: h.PeerLeaf}
}

// Info converts back to a protocol.HandshakeInfo.
func (m *HandshakeMsg) Info() protocol.HandshakeInfo {
	return protocol.HandshakeInfo{Version: m.Version, Caps: m.Caps, PeerName: m.PeerName, PeerOrigin: m.PeerOrigin,
		PeerMin: m.PeerMin, PeerMax: m.PeerMax, Authenticated: m.Authenticated, Bound: m.Bound, PeerLeaf: m.PeerLeaf}
}
