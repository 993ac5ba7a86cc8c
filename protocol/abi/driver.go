package abi

import (
	"encoding/binary"
	"strconv"
	"time"

	"plait/protocol"
	"plait/protocol/wire"
)

// Driver runs batches of commands against one Session. The zero Driver is ready: its
// first command must be OpConfigure (or OpDecode, which needs no session).
type Driver struct {
	s          *protocol.Session
	deferReady bool // DeferReady: drain only for an OpReady
	compact    bool // Compact: RESULT, EVENT and STATUS in the compact kinds
	ready      bool // the batch holds an OpReady
	now        time.Time
	broken     string // set after a recovered panic: the session can no longer be trusted
	out        []byte
	index      uint64
	id         uint64 // the id the command running gave a request (OpRequest), for its RESULT
}

// Clone returns a driver whose session is a Clone of this one's (protocol.Session.Clone),
// with the same settings and nothing of the last Step's output: the same batches given to
// both answer the same bytes. It exists for fuzzing, where a session is set up once and each
// input starts from a copy instead of replaying the setup's batches.
func (d *Driver) Clone() *Driver {
	c := &Driver{deferReady: d.deferReady, compact: d.compact, now: d.now, broken: d.broken}
	if d.s != nil {
		c.s = d.s.Clone()
	}
	return c
}

// Step runs every command of batch in order and returns the output batch: a RESULT record
// for each command (a DECODE's DECODED record right after its RESULT), then the session's
// Ready: a MESSAGE record for each message and an EVENT record for each event, then one
// STATUS record. Frames of several commands of one batch pack into shared messages, as they
// do natively between two calls of Ready. The output is valid until the next Step. Step
// never panics: a malformed batch, an unknown command or a panic inside the core becomes an
// error RESULT.
func (d *Driver) Step(batch []byte) []byte {
	d.out = d.out[:0]
	d.index = 0
	d.ready = false
	for off := 0; off < len(batch); d.index++ {
		if len(batch)-off < recordHeader {
			d.result(0, wire.NewError(wire.CodeBadArgument, "truncated command header at byte "+strconv.Itoa(off)))
			break
		}
		op := Op(batch[off])
		n := int(binary.BigEndian.Uint32(batch[off+1:]))
		if n > len(batch)-off-recordHeader {
			d.result(op, wire.NewError(wire.CodeBadArgument, "command at byte "+strconv.Itoa(off)+" runs past the end of the batch"))
			break
		}
		payload := batch[off+recordHeader : off+recordHeader+n]
		off += recordHeader + n
		d.command(op, payload)
	}
	d.drain()
	d.status()
	return d.out
}

// Reject answers a batch that cannot be read at all: one error RESULT, then STATUS.
func (d *Driver) Reject(msg string) []byte {
	d.out = d.out[:0]
	d.index = 0
	d.result(0, wire.NewError(wire.CodeBadArgument, msg))
	d.status()
	return d.out
}

// command runs one command, turning a panic into an error result.
func (d *Driver) command(op Op, payload []byte) {
	defer func() {
		if r := recover(); r != nil {
			d.broken = "a panic in the core: " + panicText(r)
			d.result(op, wire.NewError(wire.CodeInternal, d.broken))
		}
	}()
	d.id = 0
	err := d.run(op, payload)
	d.result(op, err)
	if op == OpDecode {
		d.decode(payload)
	}
}

func panicText(r any) string {
	switch v := r.(type) {
	case error:
		return v.Error()
	case string:
		return v
	}
	return "non-error panic value"
}

// run runs one command: DECODE, CONFIGURE and READY are the driver's own; every other
// opcode is its row of commands.go, which reads the payload and calls the session.
func (d *Driver) run(op Op, p []byte) *wire.Error {
	if op == OpDecode {
		return nil // answered after its RESULT
	}
	if d.broken != "" {
		return wire.NewError(wire.CodeInternal, "session unusable after "+d.broken)
	}
	if op == OpConfigure {
		return d.configure(p)
	}
	run := rows[op]
	if run == nil && op != OpReady {
		return wire.NewError(wire.CodeUnknownCommand, "unknown command 0x"+strconv.FormatUint(uint64(op), 16))
	}
	if d.s == nil {
		return wire.NewError(wire.CodeInvalidState, "command before OpConfigure")
	}
	if op == OpReady {
		d.ready = true // the output follows the RESULTs
		return nil
	}
	return run(d, p)
}

func short(op Op) *wire.Error {
	return wire.NewError(wire.CodeBadArgument, "payload of command 0x"+strconv.FormatUint(uint64(op), 16)+" has the wrong length")
}

func asWire(err error) *wire.Error {
	if err == nil {
		return nil
	}
	if we, ok := err.(*wire.Error); ok {
		return we
	}
	return wire.NewError(wire.CodeInternal, err.Error())
}

func (d *Driver) configure(p []byte) *wire.Error {
	if d.s != nil {
		return wire.NewError(wire.CodeInvalidState, "the session is already configured; one instance runs one session")
	}
	var m ConfigMsg
	if err := decMode.Unmarshal(p, &m); err != nil {
		return wire.NewError(wire.CodeBadArgument, "config payload: "+err.Error())
	}
	cfg := protocol.Config{
		Role:           wire.Role(m.Role),
		Name:           m.Name,
		Origin:         m.Origin,
		Secret:         m.Secret,
		MinVersion:     m.MinVersion,
		MaxVersion:     m.MaxVersion,
		Capabilities:   m.Capabilities,
		ExpectedPeer:   m.ExpectedPeer,
		ChannelBinding: m.ChannelBinding,
		Leaf:           m.Leaf,
		Limits: protocol.Limits{
			MaxFrameBody:     uint32(min(m.Limits.MaxFrameBody, wire.MaxFrameBody+1)),
			MaxMessage:       int(min(m.Limits.MaxMessage, 1<<31)),
			MaxSendBuffer:    int(min(m.Limits.MaxSendBuffer, 1<<40)),
			MaxUnackedBytes:  int(min(m.Limits.MaxUnackedBytes, 1<<40)),
			MaxOrigins:       int(min(m.Limits.MaxOrigins, 1<<31)),
			HandshakeTimeout: time.Duration(min(m.Limits.HandshakeTimeout, 1<<62)),
			PingInterval:     time.Duration(min(m.Limits.PingInterval, 1<<62)),
			LivenessTimeout:  time.Duration(min(m.Limits.LivenessTimeout, 1<<62)),
			MaxChannels:      int(min(m.Limits.MaxChannels, 1<<31)),
			MaxChannelBuffer: int(min(m.Limits.MaxChannelBuffer, 1<<40)),
			MaxSessionBuffer: int(min(m.Limits.MaxSessionBuffer, 1<<40)),
			// ABI 5; absent from an older host's CONFIGURE: the default.
			MaxRequestsInFlight: int(min(m.Limits.MaxRequestsInFlight, 1<<31)),
		},
	}
	s, err := protocol.New(cfg)
	if err != nil {
		return asWire(err)
	}
	d.s, d.deferReady, d.compact = s, m.DeferReady, m.Compact
	return nil
}

func (d *Driver) decode(msg []byte) {
	frames, err := wire.DecodeMessage(msg, wire.DefaultMaxMessage, wire.MaxFrameBody)
	m := DecodedMsg{Err: ErrorOf(err)}
	for _, f := range frames {
		enc, encErr := wire.EncodeMessage([]wire.Decoded{f})
		if encErr != nil {
			m.Err = ErrorOf(wire.FrameError(wire.CodeInternal, f.Type, f.Offset, "re-encoding: "+encErr.Error()))
			break
		}
		m.Frames = append(m.Frames, FrameMsg{Type: uint8(f.Type), Flags: f.Flags, Channel: f.Channel,
			Offset: uint64(f.Offset), Encoded: enc, Known: wire.Known(f.Type)})
	}
	d.record(KindDecoded, &m)
}

// drain turns what the session produced into MESSAGE and EVENT records. A panic here makes
// the session unusable and is reported by a RESULT with op 0 after the batch's commands.
func (d *Driver) drain() {
	if d.s == nil || d.broken != "" || (d.deferReady && !d.ready) {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			d.broken = "a panic in the core: " + panicText(r)
			d.result(0, wire.NewError(wire.CodeInternal, d.broken))
		}
	}()
	rd := d.s.Ready()
	for _, m := range rd.Messages {
		d.raw(KindMessage, m)
		d.s.Release(m)
	}
	for i := range rd.Events {
		if d.compact {
			d.compactRecord(KindEventCompact, func(b []byte) []byte { return AppendEventCompact(b, EventOf(&rd.Events[i])) })
			continue
		}
		d.record(KindEvent, EventOf(&rd.Events[i]))
	}
}

func (d *Driver) result(op Op, err *wire.Error) {
	m := ResultMsg{Op: uint8(op), Index: d.index, Err: ErrorOf(err), ID: d.id}
	if d.compact {
		d.compactRecord(KindResultCompact, func(b []byte) []byte { return AppendResultCompact(b, &m) })
		return
	}
	d.record(KindResult, &m)
}

// status appends the STATUS record. After a recovered panic it reports only that the
// session is closed with an internal error: the session's own state is not trusted.
func (d *Driver) status() {
	m := StatusMsg{Configured: d.s != nil}
	if d.broken != "" {
		m.State = uint8(protocol.StateClosed)
		m.Err = ErrorOf(wire.NewError(wire.CodeInternal, d.broken))
		d.statusRecord(&m)
		return
	}
	defer func() {
		if r := recover(); r != nil {
			d.broken = "a panic in the core: " + panicText(r)
			d.status()
		}
	}()
	if s := d.s; s != nil {
		m.State = uint8(s.State())
		m.Connected = s.Connected(d.now)
		m.HeldBytes = uint64(s.HeldBytes())
		m.ReadPaused = s.ReadPaused()
		m.SendBudget = uint64(s.SendBudget())
		if dl := s.NextDeadline(); !dl.IsZero() {
			m.Deadline = dl.UnixNano()
		}
		m.RTT = int64(s.RTT())
		m.Version = s.Handshake().Version
		m.Stats = StatsOf(s.Stats())
		m.Err = ErrorOf(s.Err())
		if lr := s.LastReceive(); !lr.IsZero() {
			m.LastReceive = lr.UnixNano()
		}
		l := LimitsOf(s.Limits())
		m.Liveness = int64(l.LivenessTimeout)
		m.Limits = &l
		for _, c := range s.V2().Credits() {
			m.Credits = append(m.Credits, CreditMsg{Origin: c.Origin, Credit: uint64(c.Credit)})
		}
		m.MinVersion, m.MaxVersion = s.Advertised()
		m.HasReady = d.deferReady && s.HasReady()
		m.Resumed = s.ReadsResumed()
		m.CopyCredit = uint64(s.V3().CopyCredit())
		m.RangeAsked = s.V3().RangeAsked()
		if off, ok := s.ClockOffset(); ok {
			ns := int64(off)
			m.ClockOffset = &ns
		}
		if m.Version != 0 {
			m.Handshake = HandshakeOf(s.Handshake())
		}
	}
	d.statusRecord(&m)
}

func (d *Driver) statusRecord(m *StatusMsg) {
	if d.compact {
		d.compactRecord(KindStatusCompact, func(b []byte) []byte { return AppendStatusCompact(b, m) })
		return
	}
	d.record(KindStatus, m)
}

// compactRecord appends a record of kind k whose payload appendPayload writes in place,
// straight into the output: no reflection and no copy.
func (d *Driver) compactRecord(k Kind, appendPayload func([]byte) []byte) {
	start := len(d.out)
	d.out = append(d.out, byte(k), 0, 0, 0, 0)
	d.out = appendPayload(d.out)
	binary.BigEndian.PutUint32(d.out[start+1:], uint32(len(d.out)-start-recordHeader))
}

func (d *Driver) record(k Kind, v any) {
	p, err := encMode.Marshal(v)
	if err != nil {
		// Every record type encodes by construction; say so rather than drop it.
		p, _ = encMode.Marshal(&ResultMsg{Index: d.index, Err: ErrorOf(wire.NewError(wire.CodeInternal, "encoding a record: "+err.Error()))})
		k = KindResult
	}
	d.raw(k, p)
}

func (d *Driver) raw(k Kind, p []byte) {
	d.out = append(d.out, byte(k))
	d.out = binary.BigEndian.AppendUint32(d.out, uint32(len(p)))
	d.out = append(d.out, p...)
}
