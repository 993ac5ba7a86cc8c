package abi

import (
	"encoding/binary"
	"strconv"
	"time"

	"plait/protocol"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// The session commands, one row each: its opcode, its payload's layout (how a host writes
// the arguments and how the driver reads them back) and the session method the driver
// calls. A host appends a row with Append (shells/wasm/host's Session does for every
// command); the driver runs the row its opcode names. A new command of the core is
// therefore its protocol method, its Op, one row here and its line in the table of commands
// of shells/wasm/ABI.md (TestCommandTable holds the four together). CONFIGURE, DECODE and
// READY are the driver's own, not the session's, and have no row.

// Cmd is one command's row; A is its arguments as a host passes them.
type Cmd[A any] struct {
	Op   Op
	lay  layout[A]
	call func(d *Driver, a A) error
}

// layout is a payload's encoding: put appends the arguments, get reads them back or
// refuses the payload (bad-argument).
type layout[A any] struct {
	put func(b []byte, a A) ([]byte, error)
	get func(op Op, p []byte) (A, *wire.Error)
}

// rows are the commands by opcode, as the driver runs them: decode, then call.
var rows [256]func(d *Driver, p []byte) *wire.Error

func row[A any](op Op, lay layout[A], call func(d *Driver, a A) error) *Cmd[A] {
	if rows[op] != nil || op == OpConfigure || op == OpDecode || op == OpReady {
		panic("abi: a second command with op 0x" + strconv.FormatUint(uint64(op), 16))
	}
	c := &Cmd[A]{Op: op, lay: lay, call: call}
	rows[op] = c.run
	return c
}

// sessionRow is a row whose call is a method of the session.
func sessionRow[A any](op Op, lay layout[A], call func(s *protocol.Session, a A) error) *Cmd[A] {
	return row(op, lay, func(d *Driver, a A) error { return call(d.s, a) })
}

// timedRow is a row whose payload starts with the time: the driver keeps it as the time
// STATUS answers Connected at.
func timedRow(op Op, call func(s *protocol.Session, now time.Time, data []byte) error) *Cmd[TimedMsg] {
	return row(op, timedPayload, func(d *Driver, a TimedMsg) error {
		d.now = a.Now
		return call(d.s, a.Now, a.Data)
	})
}

func (c *Cmd[A]) run(d *Driver, p []byte) *wire.Error {
	a, err := c.lay.get(c.Op, p)
	if err != nil {
		return err
	}
	return asWire(c.call(d, a))
}

// Append appends command c with arguments a to the batch. Arguments that do not encode
// (CBOR) are an error, and the batch is left as it was.
func Append[A any](b *Batch, c *Cmd[A], a A) error {
	start := len(b.b)
	b.b = append(b.b, byte(c.Op), 0, 0, 0, 0)
	out, err := c.lay.put(b.b, a)
	if err != nil {
		b.b = b.b[:start]
		return err
	}
	b.b = out
	binary.BigEndian.PutUint32(b.b[start+1:], uint32(len(b.b)-start-recordHeader))
	return nil
}

// The rows. The payload of each is in the comment of its Op and in shells/wasm/ABI.md.
var (
	CmdStart     = timedRow(OpStart, (*protocol.Session).Start)
	CmdReceive   = timedRow(OpReceive, (*protocol.Session).Receive)
	CmdTick      = timedRow(OpTick, func(s *protocol.Session, now time.Time, _ []byte) error { return s.Tick(now) })
	CmdSubscribe = sessionRow(OpSubscribe, cborPayload[SubscribeMsg]("subscribe"), func(s *protocol.Session, m SubscribeMsg) error {
		return s.V1().Subscribe(m.From, entries(m.Vector))
	})
	CmdOffer = sessionRow(OpOffer, offerPayload, func(s *protocol.Session, m OfferMsg) error {
		return s.V1().Offer(m.Position, m.Txn)
	})
	CmdAck     = sessionRow(OpAck, positionPayload, func(s *protocol.Session, pos uint64) error { return s.V1().Ack(pos) })
	CmdObserve = sessionRow(OpObserve, cursorPayload, func(s *protocol.Session, c CursorMsg) error {
		return s.V1().Observe(vector.Entry(c))
	})
	CmdName = sessionRow(OpName, namePayload, func(s *protocol.Session, m NameMsg) error {
		return s.SetOriginName(m.Origin, m.Name)
	})
	CmdClose = sessionRow(OpClose, cborPayload[CloseMsg]("close"), func(s *protocol.Session, m CloseMsg) error {
		return s.Close(wire.Code(m.Code), m.Message)
	})

	CmdSubscribeOrigins = sessionRow(OpSubscribeOrigins, cborPayload[SubscribeMsg]("subscribe"), func(s *protocol.Session, m SubscribeMsg) error {
		return s.V2().Subscribe(entries(m.Vector))
	})
	CmdUnsubscribeOrigins = sessionRow(OpUnsubscribeOrigins, cborPayload[OriginsMsg]("origins"), func(s *protocol.Session, m OriginsMsg) error {
		return s.V2().Unsubscribe(m.Origins)
	})
	CmdAckOrigin = sessionRow(OpAckOrigin, ackOriginPayload, func(s *protocol.Session, m AckOriginMsg) error {
		return s.V2().Ack(m.Origin, m.Seq)
	})
	CmdSend           = sessionRow(OpSend, rawPayload, func(s *protocol.Session, txn []byte) error { return s.V2().Send(txn) })
	CmdAdvertiseHeads = sessionRow(OpAdvertiseHeads, cborPayload[HeadsMsg]("heads"), func(s *protocol.Session, m HeadsMsg) error {
		return s.V2().AdvertiseHeads(m.Heads)
	})
	CmdWithdrawHeads = sessionRow(OpWithdrawHeads, cborPayload[OriginsMsg]("origins"), func(s *protocol.Session, m OriginsMsg) error {
		return s.V2().WithdrawHeads(m.Origins)
	})

	CmdAdvertiseFloors = sessionRow(OpAdvertiseFloors, cborPayload[HeadsMsg]("heads"), func(s *protocol.Session, m HeadsMsg) error {
		return s.V3().AdvertiseFloors(m.Floors)
	})
	CmdPurged = sessionRow(OpPurged, cursorPayload, func(s *protocol.Session, c CursorMsg) error {
		return s.V3().Purged(c.Origin, c.Seq, c.Hash)
	})
	CmdRequestCopy = sessionRow(OpRequestCopy, cborPayload[CopyMsg]("copy"), func(s *protocol.Session, m CopyMsg) error {
		return s.V3().RequestCopy(m.Table, m.Key)
	})
	CmdAckChunk  = sessionRow(OpAckChunk, emptyPayload, func(s *protocol.Session, _ struct{}) error { return s.V3().AckChunk() })
	CmdAbortCopy = sessionRow(OpAbortCopy, cborPayload[AbortCopyMsg]("abort"), func(s *protocol.Session, m AbortCopyMsg) error {
		return s.V3().AbortCopy(m.Outgoing, wire.Code(m.Code), m.Message)
	})
	CmdBeginCopy = sessionRow(OpBeginCopy, cborPayload[CopyBeginMsg]("copy-begin"), func(s *protocol.Session, m CopyBeginMsg) error {
		return s.V3().BeginCopy(m.Positions, m.Tables, m.Records, m.Bytes)
	})
	CmdSendChunk   = sessionRow(OpSendChunk, rawPayload, func(s *protocol.Session, body []byte) error { return s.V3().SendChunk(body) })
	CmdEndCopy     = sessionRow(OpEndCopy, emptyPayload, func(s *protocol.Session, _ struct{}) error { return s.V3().EndCopy() })
	CmdAskRange    = sessionRow(OpAskRange, rangeDigestPayload, func(s *protocol.Session, d *wire.RangeDigest) error { return s.V3().AskRange(d) })
	CmdAnswerRange = sessionRow(OpAnswerRange, rawPayload, func(s *protocol.Session, body []byte) error { return s.V3().AnswerRange(body) })

	CmdSendMap = sessionRow(OpSendMap, cborPayload[wire.Map]("map"), func(s *protocol.Session, m wire.Map) error {
		return s.V4().SendMap(m)
	})
	CmdSendMembers = sessionRow(OpSendMembers, cborPayload[wire.Members]("members"), func(s *protocol.Session, m wire.Members) error {
		return s.V4().SendMembers(m.Entries)
	})
	// CmdRequest's RESULT carries the id the session gave the request (ResultMsg.ID).
	CmdRequest = row(OpRequest, cborPayload[wire.Request]("request"), func(d *Driver, r wire.Request) error {
		id, err := d.s.V4().Request(r)
		d.id = id
		return err
	})
	CmdRespond = sessionRow(OpRespond, cborPayload[wire.Response]("response"), func(s *protocol.Session, r wire.Response) error {
		return s.V4().Respond(r.ID, r)
	})
	CmdForget = sessionRow(OpForget, positionPayload, func(s *protocol.Session, id uint64) error { return s.V4().Forget(id) })
	CmdSkip   = sessionRow(OpSkip, cborPayload[SkipMsg]("skip"), func(s *protocol.Session, m SkipMsg) error {
		return s.V4().Skip(m.Origin, m.To, m.Hash, m.HLC, m.Tables, m.Generation)
	})
	CmdLink = sessionRow(OpLink, cborPayload[wire.Link]("link"), func(s *protocol.Session, l wire.Link) error {
		return s.V4().Link(l)
	})
	CmdLeafState = sessionRow(OpLeafState, cborPayload[wire.LeafState]("leaf-state"), func(s *protocol.Session, l wire.LeafState) error {
		return s.V4().LeafState(l)
	})
	CmdQuiet = sessionRow(OpQuiet, cborPayload[wire.Quiet]("quiet"), func(s *protocol.Session, q wire.Quiet) error {
		return s.V4().Quiet(q.Quiet, q.Loud)
	})
	CmdCopyHolds = sessionRow(OpCopyHolds, cborPayload[CopyHoldsMsg]("copy-holds"), func(s *protocol.Session, m CopyHoldsMsg) error {
		return s.V4().CopyHolds(m.Table, m.Seqs, m.Since)
	})
)

// TimedMsg is the payload of START, RECEIVE and TICK: the time (i64 Unix nanoseconds),
// then the nonce or the message (TICK: nothing, and anything after the time is ignored).
type TimedMsg struct {
	Now  time.Time
	Data []byte
}

// OfferMsg is OpOffer's payload: u64 position | transaction encoding.
type OfferMsg struct {
	Position uint64
	Txn      []byte
}

// NameMsg is OpName's payload: origin[16] | name.
type NameMsg struct {
	Origin wire.OriginID
	Name   string
}

// AckOriginMsg is OpAckOrigin's payload: origin[16] | u64 seq.
type AckOriginMsg struct {
	Origin wire.OriginID
	Seq    uint64
}

// CursorsOf converts a vector for SubscribeMsg.
func CursorsOf(vec []vector.Entry) []CursorMsg {
	out := make([]CursorMsg, len(vec))
	for i, e := range vec {
		out[i] = CursorMsg(e)
	}
	return out
}

func entries(cs []CursorMsg) []vector.Entry {
	vec := make([]vector.Entry, len(cs))
	for i, c := range cs {
		vec[i] = vector.Entry(c)
	}
	return vec
}

// The layouts.
var (
	timedPayload = layout[TimedMsg]{
		put: func(b []byte, a TimedMsg) ([]byte, error) {
			return append(binary.BigEndian.AppendUint64(b, uint64(a.Now.UnixNano())), a.Data...), nil
		},
		get: func(op Op, p []byte) (TimedMsg, *wire.Error) {
			if len(p) < 8 {
				return TimedMsg{}, short(op)
			}
			return TimedMsg{Now: time.Unix(0, int64(binary.BigEndian.Uint64(p))).UTC(), Data: p[8:]}, nil
		},
	}
	rawPayload = layout[[]byte]{
		put: func(b []byte, a []byte) ([]byte, error) { return append(b, a...), nil },
		get: func(_ Op, p []byte) ([]byte, *wire.Error) { return p, nil },
	}
	emptyPayload = layout[struct{}]{
		put: func(b []byte, _ struct{}) ([]byte, error) { return b, nil },
		get: func(op Op, p []byte) (struct{}, *wire.Error) {
			if len(p) != 0 {
				return struct{}{}, short(op)
			}
			return struct{}{}, nil
		},
	}
	positionPayload = layout[uint64]{
		put: func(b []byte, pos uint64) ([]byte, error) { return binary.BigEndian.AppendUint64(b, pos), nil },
		get: func(op Op, p []byte) (uint64, *wire.Error) {
			if len(p) != 8 {
				return 0, short(op)
			}
			return binary.BigEndian.Uint64(p), nil
		},
	}
	offerPayload = layout[OfferMsg]{
		put: func(b []byte, m OfferMsg) ([]byte, error) {
			return append(binary.BigEndian.AppendUint64(b, m.Position), m.Txn...), nil
		},
		get: func(op Op, p []byte) (OfferMsg, *wire.Error) {
			if len(p) < 8 {
				return OfferMsg{}, short(op)
			}
			return OfferMsg{Position: binary.BigEndian.Uint64(p), Txn: p[8:]}, nil
		},
	}
	cursorPayload = layout[CursorMsg]{ // origin[16] | u64 seq | hash[32]
		put: func(b []byte, c CursorMsg) ([]byte, error) {
			return append(binary.BigEndian.AppendUint64(append(b, c.Origin[:]...), c.Seq), c.Hash[:]...), nil
		},
		get: func(op Op, p []byte) (CursorMsg, *wire.Error) {
			var c CursorMsg
			if len(p) != 16+8+32 {
				return c, short(op)
			}
			copy(c.Origin[:], p[:16])
			c.Seq = binary.BigEndian.Uint64(p[16:24])
			copy(c.Hash[:], p[24:])
			return c, nil
		},
	}
	namePayload = layout[NameMsg]{
		put: func(b []byte, m NameMsg) ([]byte, error) { return append(append(b, m.Origin[:]...), m.Name...), nil },
		get: func(op Op, p []byte) (NameMsg, *wire.Error) {
			var m NameMsg
			if len(p) < 16 {
				return m, short(op)
			}
			copy(m.Origin[:], p[:16])
			m.Name = string(p[16:])
			return m, nil
		},
	}
	ackOriginPayload = layout[AckOriginMsg]{
		put: func(b []byte, m AckOriginMsg) ([]byte, error) {
			return binary.BigEndian.AppendUint64(append(b, m.Origin[:]...), m.Seq), nil
		},
		get: func(op Op, p []byte) (AckOriginMsg, *wire.Error) {
			var m AckOriginMsg
			if len(p) != 16+8 {
				return m, short(op)
			}
			copy(m.Origin[:], p[:16])
			m.Seq = binary.BigEndian.Uint64(p[16:])
			return m, nil
		},
	}
	rangeDigestPayload = layout[*wire.RangeDigest]{ // a RANGEDIGEST body
		put: func(b []byte, d *wire.RangeDigest) ([]byte, error) { return d.AppendBody(b) },
		get: func(_ Op, p []byte) (*wire.RangeDigest, *wire.Error) {
			d, err := wire.DecodeRangeDigest(p)
			if err != nil {
				return nil, wire.NewError(wire.CodeBadArgument, "range payload: "+err.Error())
			}
			return d, nil
		},
	}
)

// cborPayload is the layout of a CBOR message; what names it in the error that refuses one
// that does not decode.
func cborPayload[M any](what string) layout[M] {
	return layout[M]{
		put: func(b []byte, m M) ([]byte, error) {
			p, err := encMode.Marshal(&m)
			if err != nil {
				return b, err
			}
			return append(b, p...), nil
		},
		get: func(_ Op, p []byte) (M, *wire.Error) {
			var m M
			if err := decMode.Unmarshal(p, &m); err != nil {
				return m, wire.NewError(wire.CodeBadArgument, what+" payload: "+err.Error())
			}
			return m, nil
		},
	}
}
