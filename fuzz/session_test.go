package fuzz

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// FuzzSession feeds messages to an ESTABLISHED VERSION-2 session (the session under test),
// as its peer would send them.
//
// # Setup
//
// Two current-build sessions (prototest.ConfigV2: they negotiate version 2) with the small
// limits of sessLimits, joined by a prototest.Pair: the dialer "a" (origin 1) is the session
// under test, the listener "b" (origin 2) its peer. After the handshake:
//
//   - the peer names its own origin 2 ("b") and a relayed origin 9 ("nine") and advertises
//     their heads at seq 128; the session names its origin 1 and advertises it at seq 8;
//   - the session subscribes to origins 2 and 9 from seq 0: its channels 1 (origin 2) and 2
//     (origin 9), with the connection's CREDIT;
//   - the peer subscribes to origin 1 from seq 0: the session sends on the peer's channel 1;
//   - the peer sends DATA 2:1, 2:2 (channel 1) and 9:1 (channel 2), all applied; the session
//     sends 1:1..1:3; the session acknowledges 2:1, the peer acknowledges 1:1;
//   - the session's PING 1 is outstanding (Tick), not delivered.
//
// So every version-2 frame can be valid in either direction: DATA 2:3 on channel 1 and 9:2
// on channel 2 apply (sessChainP and sessChainR continue both chains), CURSOR on channel 1
// up to seq 3, RESEND on channel 1 from 2..4, CREDIT, UNSUBSCRIBE and DIVERGENCE (side 0)
// of channel 1, DIVERGENCE (side 1) of channels 1 and 2, HEADS of origins 2 and 9 at seq >=
// 128, SUBSCRIBE of channel 2 and up (not origin 1, open already, nor 2, the peer's own),
// PONG {1: 1}, PING, ORIGIN.
//
// The setup runs once per fuzz worker (sessionSetup): the messages the peer sent to the
// session under test and the commands the session ran are recorded in order, checked once
// to rebuild the same session byte for byte (a session is deterministic given its config,
// nonce, clock, inputs and commands), and every input gets a Clone of the rebuilt session
// (sessSetup.newExec).
//
// # Input encoding
//
//	input = mode message*
//	mode  = 1 byte; bit 0 set: after each message, the session acknowledges (AckOrigin)
//	        every entry it applied so far, as a shell whose store is durable at once, and
//	        Ready takes the CURSOR and the CREDIT it grants again; other bits are ignored.
//	        An empty input is mode 0 with no message.
//	message = length (2 bytes, big-endian) and that many bytes. A length of 0xffff, or one
//	        larger than what remains, makes the rest of the input the last message; a
//	        single byte left over is a last message of one byte. Length 0 is an empty message.
//
// The messages are fed to Receive in order, each followed by Ready (and, in mode bit 0, the
// acks and another Ready); after the session closes the rest of the input is not fed.
//
// # Properties
//
// After every message (sessExec.message; property 5 also after the acks):
//
//  1. No panic. Receive on the established session returns nil.
//  2. Every rejection is an event. If the session closed: exactly one EventClosed over the
//     whole run, the last event; Err() non-nil and the event's Err; for an error of its own,
//     a code wire.ClassOf knows with that class (never local), at an offset inside the
//     message, the last frame it sent a CLOSE with the same code and class, ProtocolErrors
//     +1 exactly for class protocol; for the peer's CLOSE, a class wire.PeerClass can give
//     (ClassOf's for a known code) and no CLOSE sent. If it stays established: no
//     EventClosed, Err() nil, ProtocolErrors unchanged.
//  3. Counters equal the events: TxnsReceived +(EventTxn + EventDuplicate + EventGap + own
//     EventDivergence) + Discarded; Duplicates, Gaps, Divergences (own and the peer's) and
//     ResendsReceived + the count of their events; ResendsRequested + EventGap count = the
//     RESEND frames sent; own EventDivergence count = the DIVERGENCE frames sent;
//     IgnoredFrames + the sum of EventIgnoredFrame counts (one such event at most);
//     MessagesIn +1, BytesIn +len, BytesOut and MessagesOut = what Ready returned, TxnsSent
//     unchanged.
//  4. Every message it sends decodes with wire.DecodeMessage at the peer's limits.
//  5. HeldBytes() stays within MaxSessionBuffer + MaxSendBuffer + MaxMessage + 64 KiB after
//     Receive, after Ready and after the acks, and after Receive within MaxSessionBuffer +
//     len(message) + one CLOSE (one input yields no more control output than its size).
//  6. The session never applies an entry that does not check: an EventTxn's transaction
//     is the body of a DATA frame of the message, on the channel of the event's origin,
//     whose SHA-256 equals the frame's chain hash, whose prev is the chain hash of the entry
//     applied before on that origin, and whose seq is the one after it. EventDuplicate and
//     EventGap carry an entry whose hash matched its frame too (a mismatch is a divergence).
//  7. Credit the session grants only grows per channel (CREDIT limits strictly increase).
//
// And against a reference model of protocol/SPEC.md's version-2 receive rules (v2Model, written
// from the spec, not from the core), after every message:
//
//  8. The session fails at the frame the model predicts, with one of the codes of the rules
//     that frame breaks (protocol/SPEC.md does not order them), or stays established when the model
//     does; the peer's CLOSE closes it with the peer's code and wire.PeerClass's class.
//  9. It emits exactly the events the model predicts, in order, with their fields (a data
//     event carries the very transaction of its DATA frame); before closing on a frame that
//     lists entries it may also have emitted events of that frame.
//  10. It sends exactly the frames the model predicts (PONG, RESEND, DIVERGENCE, CLOSE), then
//     at Ready one CURSOR of the acknowledged open channels and at most one CREDIT whose
//     grants are each released + window above the last grant, connection first, channels
//     ascending, including every grant protocol/SPEC.md's rule makes due (half of the window free
//     beyond the last grant, or nothing buffered and less than one largest frame left).
//  11. Its counters move as predicted; established, HeldBytes after Ready is the data
//     received and not yet released.
//
// The model runs through the setup too, checked against the session. Not checked: what
// HeldBytes reports once the session is closed (a closed version-2 session keeps counting
// the data it had received and not released, which no call can release any more).
func FuzzSession(f *testing.F) {
	for _, s := range sessionSeeds(f) {
		if !s.testOnly {
			f.Add(s.data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		runSession(t, data)
	})
}

// Session limits: small, so that credit, origin and channel bounds are reachable.
var sessLimits = protocol.Limits{
	MaxFrameBody:     2048,
	MaxMessage:       65536,
	MaxChannelBuffer: 4096,
	MaxSessionBuffer: 6144,
	MaxOrigins:       8,
	MaxChannels:      4,
	MaxSendBuffer:    65536,
}

// heldBound is the bound of property 5.
const heldBound = 6144 + 65536 + 65536 + 64<<10

var (
	sOrigin = prototest.Origin(1) // the session under test, "a"
	pOrigin = prototest.Origin(2) // its peer, "b"
	rOrigin = prototest.Origin(9) // relayed by the peer, "nine"

	// The chains the peer holds (heads at seq 128) and the session's own.
	sessChainP = prototest.Chain(pOrigin, 128, 1, 8)
	sessChainR = prototest.Chain(rOrigin, 128, 1, 8)
	sessChainS = prototest.Chain(sOrigin, 8, 1, 8)

	// The session under test receives at sessNow, when its PING 1 went out.
	sessNow = prototest.Epoch.Add(protocol.DefaultPingInterval)
)

func hlcOf(seq uint64) wire.HLC { return wire.MakeHLC(1_800_000_000_000+seq, 0) }

// splitSessionInput decodes the input encoding documented on FuzzSession.
func splitSessionInput(data []byte) (mode byte, msgs [][]byte) {
	if len(data) == 0 {
		return 0, nil
	}
	mode, rest := data[0], data[1:]
	for len(rest) > 0 {
		if len(rest) < 2 {
			return mode, append(msgs, rest)
		}
		n := int(binary.BigEndian.Uint16(rest))
		rest = rest[2:]
		if n == 0xffff || n > len(rest) {
			return mode, append(msgs, rest)
		}
		msgs = append(msgs, rest[:n])
		rest = rest[n:]
	}
	return mode, msgs
}

// sessionInput encodes mode and messages; only the last may be 0xffff bytes or longer.
func sessionInput(mode byte, msgs ...[]byte) []byte {
	out := []byte{mode}
	for i, m := range msgs {
		if len(m) >= 0xffff {
			if i != len(msgs)-1 {
				panic("sessionInput: only the last message may be 0xffff bytes or longer")
			}
			out = binary.BigEndian.AppendUint16(out, 0xffff)
		} else {
			out = binary.BigEndian.AppendUint16(out, uint16(len(m)))
		}
		out = append(out, m...)
	}
	return out
}

// ---- setup ----

// sessStep is one input of the session under test during the setup: a message from the
// peer, or a command (with what it does to the model).
type sessStep struct {
	name  string
	msg   []byte
	cmd   func(*protocol.Session) error
	model func(*v2Model)
}

type sessSetup struct {
	cfg   protocol.Config
	steps []sessStep
	estab int // steps[:estab] are the handshake, which the model does not cover
	stats protocol.Stats
	held  int
	base  *protocol.Session // the session after the setup, cloned for every input (never fed)
	x     *sessExec         // the checker's state after the setup, cloned for every input
}

var (
	sessOnce sync.Once
	sessSU   *sessSetup
	sessErr  error
)

// loadSessionSetup builds the setup once per process (each fuzz worker is one).
func loadSessionSetup() (*sessSetup, error) {
	sessOnce.Do(func() { sessSU, sessErr = buildSessionSetup() })
	return sessSU, sessErr
}

func sessionSetup(tb testing.TB) *sessSetup {
	tb.Helper()
	su, err := loadSessionSetup()
	if err != nil {
		tb.Fatal(err)
	}
	return su
}

// buildSessionSetup records the setup with a prototest.Pair, then replays it into a fresh
// session checked against the model and against the recorded session.
func buildSessionSetup() (*sessSetup, error) {
	su, p, err := recordSessionSetup()
	if err != nil {
		return nil, err
	}
	return su, su.check(p)
}

// recordSessionSetup establishes the pair and records the inputs of the session under test.
func recordSessionSetup() (*sessSetup, *prototest.Pair, error) {
	dc := prototest.ConfigV2(wire.RoleDialer, "a", 1)
	lc := prototest.ConfigV2(wire.RoleListener, "b", 2)
	dc.Limits, lc.Limits = sessLimits, sessLimits
	p, err := prototest.NewPair(dc, lc)
	if err != nil {
		return nil, nil, err
	}
	su := &sessSetup{cfg: dc}
	p.Tap = func(from *prototest.Side, msg []byte) []byte {
		if from == p.L {
			su.steps = append(su.steps, sessStep{name: "peer message", msg: bytes.Clone(msg)})
		}
		return msg
	}
	p.Pump(20)
	if p.D.S.State() != protocol.StateEstablished || p.D.S.Handshake().Version != 2 {
		return nil, nil, fmt.Errorf("setup: handshake: state %v, version %d, err %v", p.D.S.State(), p.D.S.Handshake().Version, p.D.S.Err())
	}
	su.estab = len(su.steps)

	var ferr error
	onS := func(name string, cmd func(*protocol.Session) error, model func(*v2Model)) {
		if ferr != nil {
			return
		}
		if err := cmd(p.D.S); err != nil {
			ferr = fmt.Errorf("setup: %s: %w", name, err)
			return
		}
		su.steps = append(su.steps, sessStep{name: name, cmd: cmd, model: model})
		p.Pump(20) // its first step takes the session's output (Ready), as the replay does
	}
	onP := func(name string, cmd func(*protocol.Session) error) {
		if ferr != nil {
			return
		}
		if err := cmd(p.L.S); err != nil {
			ferr = fmt.Errorf("setup: peer: %s: %w", name, err)
			return
		}
		p.Pump(20)
	}
	last := func(c []prototest.Entry) wire.Head {
		return wire.Head{Seq: uint64(len(c)), HLC: hlcOf(uint64(len(c)))}
	}
	hp, hr, hs := last(sessChainP), last(sessChainR), last(sessChainS)
	hp.Origin, hr.Origin, hs.Origin = pOrigin, rOrigin, sOrigin

	onP("name and advertise", func(s *protocol.Session) error {
		return firstErr(s.SetOriginName(pOrigin, "b"), s.SetOriginName(rOrigin, "nine"), s.V2().AdvertiseHeads([]wire.Head{hp, hr}))
	})
	onS("name and advertise", func(s *protocol.Session) error {
		return firstErr(s.SetOriginName(sOrigin, "a"), s.V2().AdvertiseHeads([]wire.Head{hs}))
	}, nil)
	subs := []vector.Entry{{Origin: pOrigin}, {Origin: rOrigin}}
	onS("subscribe", func(s *protocol.Session) error { return s.V2().Subscribe(subs) },
		func(m *v2Model) { m.subscribe(subs) })
	onP("subscribe", func(s *protocol.Session) error { return s.V2().Subscribe([]vector.Entry{{Origin: sOrigin}}) })
	onP("send", func(s *protocol.Session) error {
		return firstErr(s.V2().Send(sessChainP[0].Raw), s.V2().Send(sessChainP[1].Raw), s.V2().Send(sessChainR[0].Raw))
	})
	onS("send", func(s *protocol.Session) error {
		return firstErr(s.V2().Send(sessChainS[0].Raw), s.V2().Send(sessChainS[1].Raw), s.V2().Send(sessChainS[2].Raw))
	}, func(m *v2Model) { m.sent(sOrigin, 3) })
	onS("ack", func(s *protocol.Session) error { return s.V2().Ack(pOrigin, 1) },
		func(m *v2Model) { m.ack(pOrigin, 1) })
	onP("ack", func(s *protocol.Session) error { return s.V2().Ack(sOrigin, 1) })
	if ferr != nil {
		return nil, nil, ferr
	}
	// PING 1 goes out and stays outstanding: the session's output is taken, not delivered.
	tick := func(s *protocol.Session) error { return s.Tick(sessNow) }
	if err := tick(p.D.S); err != nil {
		return nil, nil, fmt.Errorf("setup: tick: %w", err)
	}
	su.steps = append(su.steps, sessStep{name: "tick", cmd: tick, model: func(m *v2Model) { m.pingOut, m.pingID = true, 1 }})
	p.D.Drain()

	d := p.D.S
	if d.State() != protocol.StateEstablished || p.L.S.State() != protocol.StateEstablished {
		return nil, nil, fmt.Errorf("setup: states %v/%v, errors %v/%v", d.State(), p.L.S.State(), d.Err(), p.L.S.Err())
	}
	if n := p.D.Count(protocol.EventTxn); n != 3 {
		return nil, nil, fmt.Errorf("setup: the session applied %d entries, want 3", n)
	}
	return su, p, nil
}

// check replays the recorded setup into a fresh session, checking it against the model
// from the handshake on, and against the recorded session byte for byte; it keeps the
// checker's state for newExec.
func (su *sessSetup) check(p *prototest.Pair) error {
	d := p.D.S
	s, err := protocol.New(su.cfg)
	if err != nil {
		return err
	}
	if err := s.Start(prototest.Epoch, prototest.Nonce(1)); err != nil {
		return err
	}
	x := &sessExec{s: s, m: newV2Model(), now: prototest.Epoch,
		applied: map[wire.OriginID]chainHead{}, granted: map[uint32]uint64{}, counts: map[protocol.EventKind]int{}}
	var sent []byte
	for i, st := range su.steps {
		switch {
		case i < su.estab:
			if err := s.Receive(prototest.Epoch, st.msg); err != nil {
				return fmt.Errorf("setup replay: step %d (%s): %w", i, st.name, err)
			}
			for _, m := range s.Ready().Messages {
				sent = append(sent, m...)
			}
		case st.msg != nil:
			if err := x.message(st.msg); err != nil {
				return fmt.Errorf("setup replay: step %d (%s): %w", i, st.name, err)
			}
			sent = append(sent, bytes.Join(x.lastMsgs, nil)...)
		default:
			if err := x.command(st); err != nil {
				return fmt.Errorf("setup replay: step %d (%s): %w", i, st.name, err)
			}
			sent = append(sent, bytes.Join(x.lastMsgs, nil)...)
		}
	}
	if orig := bytes.Join(p.D.Sent, nil); !bytes.Equal(sent, orig) {
		return fmt.Errorf("setup replay: the replayed session sent %d bytes, the recorded one %d, or other bytes", len(sent), len(orig))
	}
	// The same bytes, in fewer messages: the pair took the session's HELLO before the peer's
	// reached it.
	rst, dst := s.Stats(), d.Stats()
	rst.MessagesOut, dst.MessagesOut = 0, 0
	if rst != dst || s.HeldBytes() != d.HeldBytes() || s.State() != protocol.StateEstablished {
		return fmt.Errorf("setup replay: stats %+v held %d, recorded %+v held %d", s.Stats(), s.HeldBytes(), d.Stats(), d.HeldBytes())
	}
	su.stats, su.held = s.Stats(), s.HeldBytes()
	su.base = s
	x.s = nil
	x.now = sessNow
	su.x = x
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// newExec returns a checker of a Clone of the session the setup built (check), checked to be
// as it was. Replaying the setup into a fresh session per input (handshake, commands, about
// 160 µs) cost more than most inputs; check proves once that the replay rebuilds the
// recorded session, and a copy of that session is the same state.
func (su *sessSetup) newExec() (*sessExec, error) {
	s := su.base.Clone()
	if s.State() != protocol.StateEstablished || s.Stats() != su.stats || s.HeldBytes() != su.held || s.HasReady() {
		return nil, fmt.Errorf("setup copy: state %v, stats %+v, held %d, output %v; want established, %+v, %d, none",
			s.State(), s.Stats(), s.HeldBytes(), s.HasReady(), su.stats, su.held)
	}
	x := su.x.clone()
	x.s = s
	return x, nil
}

// ---- the checker ----

// chainHead is what the checker knows of an origin the session subscribed to: its channel
// and the entry last applied.
type chainHead struct {
	channel uint32
	seq     uint64
	hash    wire.Hash
}

// sessExec checks one session under test through a run.
type sessExec struct {
	s        *protocol.Session
	m        *v2Model
	now      time.Time
	applied  map[wire.OriginID]chainHead // property 6: from the SUBSCRIBE frames the session sent, then its EventTxn
	granted  map[uint32]uint64           // property 7: the highest credit granted per channel (0: the connection)
	counts   map[protocol.EventKind]int  // events since the setup
	closed   bool                        // EventClosed was seen
	byPeer   bool                        // and it was the peer's CLOSE
	lastMsgs [][]byte                    // the messages of the last Ready
}

func (x *sessExec) clone() *sessExec {
	return &sessExec{m: x.m.clone(), now: x.now, applied: maps.Clone(x.applied), granted: maps.Clone(x.granted),
		counts: map[protocol.EventKind]int{}}
}

// runSession runs one input through a fresh session under test.
func runSession(t *testing.T, data []byte) *sessExec {
	t.Helper()
	x, err := runSessionInput(data)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func runSessionInput(data []byte) (*sessExec, error) {
	su, err := loadSessionSetup()
	if err != nil {
		return nil, err
	}
	x, err := su.newExec()
	if err != nil {
		return nil, err
	}
	mode, msgs := splitSessionInput(data)
	for i, msg := range msgs {
		msg = bytes.Clone(msg) // the session's events alias it
		if err := x.message(msg); err != nil {
			return nil, fmt.Errorf("message %d of %d (%d bytes: %s): %v", i+1, len(msgs), len(msg), shortHex(msg), err)
		}
		if x.closed {
			break
		}
		if mode&1 != 0 {
			if err := x.ack(); err != nil {
				return nil, fmt.Errorf("after message %d of %d: %v", i+1, len(msgs), err)
			}
		}
	}
	if err := x.finish(); err != nil {
		return nil, fmt.Errorf("at the end: %v", err)
	}
	return x, nil
}

func shortHex(b []byte) string {
	if len(b) > 64 {
		return fmt.Sprintf("%x...", b[:64])
	}
	return fmt.Sprintf("%x", b)
}

// message feeds one message and checks the properties and the model.
func (x *sessExec) message(msg []byte) error {
	s := x.s
	before := s.Stats()
	pred := x.m.receive(msg)
	if err := s.Receive(x.now, msg); err != nil {
		return fmt.Errorf("Receive on an established session refused: %v", err)
	}
	held := s.HeldBytes()
	if held > heldBound {
		return fmt.Errorf("HeldBytes %d after Receive exceeds %d", held, heldBound)
	}
	if b := sessLimits.MaxSessionBuffer + len(msg) + maxCloseFrame; held > b {
		return fmt.Errorf("HeldBytes %d after Receive of %d bytes exceeds %d", held, len(msg), b)
	}
	state, serr := s.State(), s.Err()
	rd := s.Ready()
	st := s.Stats()
	if h := s.HeldBytes(); h > heldBound {
		return fmt.Errorf("HeldBytes %d after Ready exceeds %d", h, heldBound)
	}
	x.lastMsgs = rd.Messages
	sent, out, err := decodeSent(rd.Messages)
	if err != nil {
		return err
	}
	if err := x.checkProperties(msg, rd.Events, sent, len(rd.Messages), out, state, serr, before, st); err != nil {
		return err
	}
	if err := x.observeSent(sent); err != nil {
		return err
	}

	// The model.
	if err := sameFailure(pred, serr); err != nil {
		return fmt.Errorf("the model disagrees: %v", err)
	}
	if err := sameEvents(pred, rd.Events); err != nil {
		return fmt.Errorf("the model disagrees on the events: %v", err)
	}
	if err := x.m.sameSent(pred.frames, sent); err != nil {
		return fmt.Errorf("the model disagrees on the frames sent: %v", err)
	}
	if err := pred.sameStats(before, st); err != nil {
		return fmt.Errorf("the model disagrees on the counters: %v", err)
	}
	if !x.m.closed && s.HeldBytes() != int(x.m.conn.buffered()) {
		return fmt.Errorf("HeldBytes %d after Ready, the model holds %d received bytes not yet released", s.HeldBytes(), x.m.conn.buffered())
	}
	x.release(rd.Messages)
	return nil
}

// release gives the session its message buffers back once checked (as a shell does after
// sending them): a new one is 64 KiB, the bulk of an input's allocations.
func (x *sessExec) release(msgs [][]byte) {
	for _, m := range msgs {
		x.s.Release(m)
	}
}

// command runs a setup command and checks the CURSOR and CREDIT frames of its Ready.
func (x *sessExec) command(st sessStep) error {
	if err := st.cmd(x.s); err != nil {
		return err
	}
	var want []wire.Body
	if st.model != nil {
		st.model(x.m)
		want = x.m.cmdFrames
		x.m.cmdFrames = nil
	}
	rd := x.s.Ready()
	x.lastMsgs = rd.Messages
	sent, _, err := decodeSent(rd.Messages)
	if err != nil {
		return err
	}
	for _, e := range rd.Events {
		if e.Kind == protocol.EventClosed {
			return fmt.Errorf("closed: %v", e.Err)
		}
	}
	if err := x.observeSent(sent); err != nil {
		return err
	}
	var got []wire.Decoded
	for _, f := range sent {
		if f.Type == wire.TypeCursor || f.Type == wire.TypeCredit {
			got = append(got, f)
		}
	}
	if err := x.m.sameSent(want, got); err != nil {
		return fmt.Errorf("the model disagrees on the CURSOR and CREDIT frames: %v", err)
	}
	if h := x.s.HeldBytes(); h != int(x.m.conn.buffered()) {
		return fmt.Errorf("HeldBytes %d, the model holds %d", h, x.m.conn.buffered())
	}
	return nil
}

// ack acknowledges every entry applied so far (mode bit 0).
func (x *sessExec) ack() error {
	for _, id := range slices.Sorted(maps.Keys(x.m.in)) {
		ch := x.m.in[id]
		if ch.seq == ch.acked {
			continue
		}
		if err := x.s.V2().Ack(ch.origin, ch.seq); err != nil {
			return fmt.Errorf("AckOrigin(%v, %d): %v", ch.origin, ch.seq, err)
		}
		x.m.ack(ch.origin, ch.seq)
	}
	if h := x.s.HeldBytes(); h > heldBound {
		return fmt.Errorf("HeldBytes %d after the acks exceeds %d", h, heldBound)
	}
	return x.flush()
}

// flush takes the output of calls without input (the acks' CURSOR and CREDIT), as a shell
// does before it reads again.
func (x *sessExec) flush() error {
	s := x.s
	rd := s.Ready()
	sent, _, err := decodeSent(rd.Messages)
	if err != nil {
		return err
	}
	if len(rd.Events) != 0 {
		return fmt.Errorf("%d events without input, the first %s", len(rd.Events), rd.Events[0].Kind)
	}
	if err := x.observeSent(sent); err != nil {
		return err
	}
	if err := x.m.sameSent(nil, sent); err != nil {
		return fmt.Errorf("the model disagrees on the frames sent: %v", err)
	}
	if h := s.HeldBytes(); h != int(x.m.conn.buffered()) {
		return fmt.Errorf("HeldBytes %d, the model holds %d", h, x.m.conn.buffered())
	}
	x.release(rd.Messages)
	return nil
}

// finish checks the end of a run: a closed session takes no more input and has no output;
// an established one has nothing more to say than what the model predicts.
func (x *sessExec) finish() error {
	s := x.s
	if x.closed {
		var werr *wire.Error
		if err := s.Receive(x.now, prototest.Frame(&wire.Ping{ID: 1})); !errors.As(err, &werr) || werr.Code != wire.CodeClosed {
			return fmt.Errorf("Receive on a closed session: %v, want a closed error", err)
		}
		if s.HasReady() {
			return fmt.Errorf("a closed session has output after a refused Receive")
		}
		if rd := s.Ready(); len(rd.Messages) != 0 || len(rd.Events) != 0 {
			return fmt.Errorf("a closed session produced %d messages and %d events", len(rd.Messages), len(rd.Events))
		}
		return nil
	}
	return x.flush()
}

// decodeSent decodes the messages the session sent with the peer's limits (property 4).
func decodeSent(msgs [][]byte) (frames []wire.Decoded, size int, err error) {
	for i, m := range msgs {
		fs, werr := wire.DecodeMessage(m, sessLimits.MaxMessage, sessLimits.MaxFrameBody)
		if werr != nil {
			return nil, 0, fmt.Errorf("sent message %d of %d is one the peer rejects: %v (%s)", i+1, len(msgs), werr, shortHex(m))
		}
		frames = append(frames, fs...)
		size += len(m)
	}
	return frames, size, nil
}

// dataFrames lists the DATA frames of msg the session can have taken an entry from.
func dataFrames(msg []byte) []wire.Frame {
	var out []wire.Frame
	r := wire.NewReader(msg, sessLimits.MaxFrameBody)
	for r.More() {
		f, err := r.Next()
		if err != nil {
			break
		}
		if f.Type == wire.TypeData && len(f.Body) > wire.DataHeader {
			out = append(out, f)
		}
	}
	return out
}

// checkProperties checks properties 2, 3 and 6 on the output of one message.
func (x *sessExec) checkProperties(msg []byte, evs []protocol.Event, sent []wire.Decoded, nMsgs, outBytes int,
	state protocol.State, serr *wire.Error, before, st protocol.Stats) error {
	count := map[protocol.EventKind]int{}
	ownDiv := 0
	var ignored uint64
	var closedEv *protocol.Event
	var frames []wire.Frame
	for i := range evs {
		e := &evs[i]
		count[e.Kind]++
		x.counts[e.Kind]++
		switch e.Kind {
		case protocol.EventClosed:
			if i != len(evs)-1 {
				return fmt.Errorf("EventClosed is event %d of %d", i+1, len(evs))
			}
			closedEv = e
			x.closed, x.byPeer = true, e.ByPeer
		case protocol.EventIgnoredFrame:
			if e.Count == 0 || !e.Frame.Ignorable() || wire.Known(e.Frame) {
				return fmt.Errorf("event %d: %d ignored frames, the first of type %s", i+1, e.Count, e.Frame)
			}
			ignored += e.Count
		case protocol.EventTxn, protocol.EventDuplicate, protocol.EventGap, protocol.EventDivergence:
			if e.Kind == protocol.EventDivergence {
				if e.Err == nil || e.Err.Code != wire.CodeDivergence {
					return fmt.Errorf("event %d: divergence with error %v", i+1, e.Err)
				}
				if e.ByPeer {
					continue
				}
				ownDiv++
			}
			if frames == nil {
				frames = dataFrames(msg)
			}
			if err := x.checkEntry(frames, e); err != nil {
				return fmt.Errorf("event %d (%s): %v", i+1, e.Kind, err)
			}
		case protocol.EventHandshake, protocol.EventAcked:
			return fmt.Errorf("event %d: %s on an established version-2 session", i+1, e.Kind)
		}
	}

	// Counters (property 3).
	d := func(a, b uint64) uint64 { return a - b }
	var resends, divergences, closes int
	var lastClose *wire.Close
	for _, f := range sent {
		switch v := f.Value.(type) {
		case *wire.Resend:
			resends++
		case *wire.Divergence:
			divergences++
		case *wire.Close:
			closes++
			lastClose = v
		}
	}
	dataEvents := uint64(count[protocol.EventTxn] + count[protocol.EventDuplicate] + count[protocol.EventGap] + ownDiv)
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"TxnsReceived", d(st.TxnsReceived, before.TxnsReceived), dataEvents + d(st.Discarded, before.Discarded)},
		{"Duplicates", d(st.Duplicates, before.Duplicates), uint64(count[protocol.EventDuplicate])},
		{"Gaps", d(st.Gaps, before.Gaps), uint64(count[protocol.EventGap])},
		{"ResendsRequested", d(st.ResendsRequested, before.ResendsRequested), uint64(count[protocol.EventGap])},
		{"RESEND frames sent", uint64(resends), uint64(count[protocol.EventGap])},
		{"Divergences", d(st.Divergences, before.Divergences), uint64(count[protocol.EventDivergence])},
		{"DIVERGENCE frames sent", uint64(divergences), uint64(ownDiv)},
		{"ResendsReceived", d(st.ResendsReceived, before.ResendsReceived), uint64(count[protocol.EventResend])},
		{"IgnoredFrames", d(st.IgnoredFrames, before.IgnoredFrames), ignored},
		{"EventIgnoredFrame events", uint64(count[protocol.EventIgnoredFrame]), min(ignored, 1)},
		{"MessagesIn", d(st.MessagesIn, before.MessagesIn), 1},
		{"BytesIn", d(st.BytesIn, before.BytesIn), uint64(len(msg))},
		{"BytesOut", d(st.BytesOut, before.BytesOut), uint64(outBytes)},
		{"MessagesOut", d(st.MessagesOut, before.MessagesOut), uint64(nMsgs)},
		{"TxnsSent", d(st.TxnsSent, before.TxnsSent), 0},
	} {
		if c.got != c.want {
			return fmt.Errorf("%s +%d, want %d (events %v)", c.name, c.got, c.want, count)
		}
	}

	// Closed or established (property 2).
	protocolErrors := uint64(0)
	switch state {
	case protocol.StateClosed:
		if serr == nil || closedEv == nil || closedEv.Err != serr || count[protocol.EventClosed] != 1 {
			return fmt.Errorf("closed: Err %v, EventClosed %+v (%d)", serr, closedEv, count[protocol.EventClosed])
		}
		if closedEv.ByPeer {
			if closes != 0 {
				return fmt.Errorf("closed by the peer (%v), yet sent %d CLOSE frames", serr, closes)
			}
			if cl, ok := wire.ClassOf(serr.Code); ok && serr.Class != cl {
				return fmt.Errorf("closed by the peer with code %s of class %s, acting on class %s", serr.Code, cl, serr.Class)
			}
			switch serr.Class {
			case wire.ClassProtocol, wire.ClassUnsupported, wire.ClassResourceLimit, wire.ClassTransient, wire.ClassRefused:
			default:
				return fmt.Errorf("closed by the peer, acting on class %q", serr.Class)
			}
			break
		}
		if cl, ok := wire.ClassOf(serr.Code); !ok || cl != serr.Class || cl == wire.ClassLocal {
			return fmt.Errorf("closed with code %q of class %q; ClassOf says %q, %v", serr.Code, serr.Class, cl, ok)
		}
		if serr.Offset < 0 || serr.Offset >= max(len(msg), 1) {
			return fmt.Errorf("error offset %d outside the message of %d bytes: %v", serr.Offset, len(msg), serr)
		}
		if closes != 1 || sent[len(sent)-1].Value != wire.Body(lastClose) || lastClose.Code != serr.Code || lastClose.Class != serr.Class {
			return fmt.Errorf("closed with %v; sent %d CLOSE frames, the last frame sent %s", serr, closes, sent[len(sent)-1].Type)
		}
		if serr.Class == wire.ClassProtocol {
			protocolErrors = 1
		}
	case protocol.StateEstablished:
		if serr != nil || closedEv != nil {
			return fmt.Errorf("established with Err %v, EventClosed %+v", serr, closedEv)
		}
	default:
		return fmt.Errorf("state %v after Receive", state)
	}
	if got := d(st.ProtocolErrors, before.ProtocolErrors); got != protocolErrors {
		return fmt.Errorf("ProtocolErrors +%d, want %d (%v)", got, protocolErrors, serr)
	}
	return nil
}

// checkEntry checks the entry of a data event against the DATA frame it came from
// (property 6).
func (x *sessExec) checkEntry(frames []wire.Frame, e *protocol.Event) error {
	raw := e.Txn.Raw()
	if len(raw) == 0 {
		return fmt.Errorf("no transaction")
	}
	var fr *wire.Frame
	for i := range frames {
		if b := frames[i].Body; len(b) == wire.DataHeader+len(raw) && &b[wire.DataHeader] == &raw[0] {
			fr = &frames[i]
			break
		}
	}
	if fr == nil {
		return fmt.Errorf("its transaction (origin %v seq %d) is not the body of a DATA frame of the message", e.Txn.Origin, e.Txn.Seq)
	}
	if e.Origin != e.Txn.Origin {
		return fmt.Errorf("event of origin %v with an entry of origin %v", e.Origin, e.Txn.Origin)
	}
	head, ok := x.applied[e.Origin]
	if !ok {
		return fmt.Errorf("an entry of origin %v, which the session did not subscribe to", e.Origin)
	}
	if fr.Channel != head.channel {
		return fmt.Errorf("taken from channel %d; origin %v is on channel %d", fr.Channel, e.Origin, head.channel)
	}
	if e.Kind == protocol.EventDivergence {
		return nil
	}
	h := sha256.Sum256(raw)
	if !bytes.Equal(h[:], fr.Body[:wire.DataHeader]) {
		return fmt.Errorf("seq %d: its SHA-256 %x differs from the DATA frame's chain hash %x", e.Txn.Seq, h, fr.Body[:wire.DataHeader])
	}
	switch e.Kind {
	case protocol.EventTxn:
		if e.Txn.Seq != head.seq+1 || e.Txn.Prev != head.hash {
			return fmt.Errorf("applied seq %d with prev %x after seq %d with chain hash %x", e.Txn.Seq, e.Txn.Prev, head.seq, head.hash)
		}
		x.applied[e.Origin] = chainHead{channel: head.channel, seq: e.Txn.Seq, hash: h}
	case protocol.EventDuplicate:
		if e.Txn.Seq > head.seq || e.Txn.Seq == head.seq && h != head.hash {
			return fmt.Errorf("seq %d (%x) is no duplicate at seq %d (%x)", e.Txn.Seq, h, head.seq, head.hash)
		}
	case protocol.EventGap:
		if e.Txn.Seq <= head.seq+1 || e.Expected != head.seq+1 {
			return fmt.Errorf("seq %d expecting %d is no gap after seq %d", e.Txn.Seq, e.Expected, head.seq)
		}
	}
	return nil
}

// observeSent follows what the session sent: its SUBSCRIBEs name the chain heads property 6
// starts from, and its CREDIT limits strictly increase (property 7).
func (x *sessExec) observeSent(sent []wire.Decoded) error {
	for _, f := range sent {
		switch v := f.Value.(type) {
		case *wire.Subscribe:
			for _, e := range v.Entries {
				x.granted[e.Channel] = e.Credit
				x.applied[e.Origin] = chainHead{channel: e.Channel, seq: e.Seq, hash: e.Hash}
			}
		case *wire.Credit:
			for _, e := range v.Entries {
				if e.Limit <= x.granted[e.Channel] {
					return fmt.Errorf("CREDIT of channel %d at %d after a grant of %d", e.Channel, e.Limit, x.granted[e.Channel])
				}
				x.granted[e.Channel] = e.Limit
			}
		}
	}
	return nil
}

// ---- comparing with the model ----

func sameFailure(p *mPred, serr *wire.Error) error {
	switch {
	case p.fail == nil && serr == nil:
		return nil
	case p.fail == nil:
		return fmt.Errorf("the session closed with %v, the model stays established", serr)
	case serr == nil:
		return fmt.Errorf("the model closes with %v at offset %d (by the peer: %v), the session stays established", p.codes, p.fail.Offset, p.byPeer)
	case p.byPeer:
		if serr.Code != p.fail.Code || serr.Class != p.fail.Class {
			return fmt.Errorf("the session closed with %v, the model with the peer's %s (%s)", serr, p.fail.Code, p.fail.Class)
		}
	case !slices.Contains(p.codes, serr.Code) || p.fail.Offset != serr.Offset:
		return fmt.Errorf("the session closed with %v, the model with one of %v at offset %d", serr, p.codes, p.fail.Offset)
	}
	p.settle(serr)
	return nil
}

// sameEvents compares the events. Before an error of its own, the session may have emitted
// events of the failing frame (a frame that lists entries, taken in part): events of the
// kinds that frame type emits are allowed there.
func sameEvents(p *mPred, got []protocol.Event) error {
	want := p.events
	if p.fail != nil && len(got) > len(want) {
		k := p.failEvents
		extra := len(got) - len(want)
		for i := k; i < k+extra; i++ {
			if !slices.Contains(partialKinds[p.failType], got[i].Kind) {
				return fmt.Errorf("the model emits %v, the session %v (%s before closing on a %s frame)",
					eventKinds(want), eventKinds(got), got[i].Kind, p.failType)
			}
		}
		got = append(got[:k:k], got[k+extra:]...)
	}
	for i := range min(len(want), len(got)) {
		if d := eventDiff(&want[i], &got[i]); d != "" {
			return fmt.Errorf("event %d: %s", i+1, d)
		}
	}
	if len(want) != len(got) {
		return fmt.Errorf("the model emits %v, the session %v", eventKinds(want), eventKinds(got))
	}
	return nil
}

// partialKinds are the events a frame that breaks a rule may have emitted before.
var partialKinds = map[wire.Type][]protocol.EventKind{
	wire.TypeSubscribe:   {protocol.EventSubscribed},
	wire.TypeUnsubscribe: {protocol.EventUnsubscribed},
	wire.TypeCursor:      {protocol.EventCursor},
	wire.TypeCredit:      {protocol.EventCredit},
}

func eventKinds(evs []protocol.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Kind.String()
	}
	return out
}

func eventDiff(w, g *protocol.Event) string {
	if w.Kind != g.Kind {
		return fmt.Sprintf("the model emits %s, the session %s", w.Kind, g.Kind)
	}
	wr, gr := w.Txn.Raw(), g.Txn.Raw()
	switch {
	case w.Position != g.Position, w.Expected != g.Expected, w.From != g.From, w.DivergedAt != g.DivergedAt, w.Origin != g.Origin, w.Seq != g.Seq, w.Hash != g.Hash,
		w.Name != g.Name, w.Frame != g.Frame, w.Count != g.Count, w.ByPeer != g.ByPeer, g.Handshake != nil:
	case len(wr) != len(gr) || len(wr) > 0 && &wr[0] != &gr[0]:
		return fmt.Sprintf("%s: the model's entry (%d bytes, seq %d) is not the session's (%d bytes, seq %d)", w.Kind, len(wr), w.Txn.Seq, len(gr), g.Txn.Seq)
	case (w.Err == nil) != (g.Err == nil) || w.Err != nil && (w.Err.Code != g.Err.Code || w.Err.Class != g.Err.Class):
		return fmt.Sprintf("%s: the model's error %v, the session's %v", w.Kind, w.Err, g.Err)
	case !reflect.DeepEqual(w.Heads, g.Heads):
		return fmt.Sprintf("%s: the model's heads %+v, the session's %+v", w.Kind, w.Heads, g.Heads)
	default:
		return ""
	}
	return fmt.Sprintf("%s: the model's {pos %d expected %d from %d diverged at %d origin %v seq %d hash %x name %q frame %s count %d by peer %v}, "+
		"the session's {pos %d expected %d from %d diverged at %d origin %v seq %d hash %x name %q frame %s count %d by peer %v handshake %v}", w.Kind,
		w.Position, w.Expected, w.From, w.DivergedAt, w.Origin, w.Seq, w.Hash, w.Name, w.Frame, w.Count, w.ByPeer,
		g.Position, g.Expected, g.From, g.DivergedAt, g.Origin, g.Seq, g.Hash, g.Name, g.Frame, g.Count, g.ByPeer, g.Handshake)
}

func sameFrames(want []wire.Body, got []wire.Decoded) error {
	for i := range min(len(want), len(got)) {
		w, g := want[i], got[i]
		if w.FrameType() != g.Type || g.Channel != 0 || g.Flags != 0 {
			return fmt.Errorf("frame %d: the model sends %s, the session %s (flags %d, channel %d)", i+1, w.FrameType(), g.Type, g.Flags, g.Channel)
		}
		if wc, ok := w.(*wire.Close); ok {
			gc := g.Value.(*wire.Close)
			if wc.Code != gc.Code || wc.Class != gc.Class {
				return fmt.Errorf("frame %d: the model's CLOSE %s (%s), the session's %s (%s)", i+1, wc.Code, wc.Class, gc.Code, gc.Class)
			}
			continue
		}
		wb, err := w.AppendBody(nil)
		if err != nil {
			return fmt.Errorf("frame %d: encoding the model's %s: %v", i+1, w.FrameType(), err)
		}
		if !bytes.Equal(wb, g.Body) {
			return fmt.Errorf("frame %d: the model's %s %+v, the session's %+v", i+1, w.FrameType(), w, g.Value)
		}
	}
	if len(want) != len(got) {
		wt := make([]string, len(want))
		for i, w := range want {
			wt[i] = w.FrameType().String()
		}
		gt := make([]string, len(got))
		for i, g := range got {
			gt[i] = g.Type.String()
		}
		return fmt.Errorf("the model sends %v, the session %v", wt, gt)
	}
	return nil
}

// sameStats compares the counters the model predicts.
func (p *mPred) sameStats(before, st protocol.Stats) error {
	got := protocol.Stats{
		MessagesIn:       st.MessagesIn - before.MessagesIn,
		BytesIn:          st.BytesIn - before.BytesIn,
		TxnsReceived:     st.TxnsReceived - before.TxnsReceived,
		TxnsSent:         st.TxnsSent - before.TxnsSent,
		Duplicates:       st.Duplicates - before.Duplicates,
		Gaps:             st.Gaps - before.Gaps,
		Divergences:      st.Divergences - before.Divergences,
		IgnoredFrames:    st.IgnoredFrames - before.IgnoredFrames,
		ProtocolErrors:   st.ProtocolErrors - before.ProtocolErrors,
		ResendsRequested: st.ResendsRequested - before.ResendsRequested,
		ResendsReceived:  st.ResendsReceived - before.ResendsReceived,
		Discarded:        st.Discarded - before.Discarded,
		Stale:            st.Stale - before.Stale,
	}
	if got != p.stats {
		return fmt.Errorf("the session's counters moved by %+v, the model's by %+v", got, p.stats)
	}
	return nil
}

// ---- seeds ----

// sessSeed is one seed input of FuzzSession and what it does to the session under test:
// the code it closes with ("" when it stays established) and events it emits (exact
// counts, over the whole input).
type sessSeed struct {
	name       string
	data       []byte
	code       wire.Code
	byPeer     bool
	events     map[protocol.EventKind]int
	anyOutcome bool // TestSessionSeedOutcomes checks only the properties
	// testOnly: run by TestSessionSeedOutcomes, not a fuzz seed (a 64 KiB input would cost
	// the fuzzer a minute of minimizing whatever it derives from it).
	testOnly bool
}

type evCount = map[protocol.EventKind]int

// dataFrame is a DATA frame of entry e on channel ch.
func dataFrame(ch uint32, e prototest.Entry) []byte {
	return prototest.RawFrame(wire.TypeData, 0, ch, prototest.Cat(e.Hash[:], e.Raw))
}

func dataRun(ch uint32, es []prototest.Entry) []byte {
	var out []byte
	for _, e := range es {
		out = append(out, dataFrame(ch, e)...)
	}
	return out
}

// bigChain continues an origin's chain after seq (whose chain hash is prev) with n entries
// of one put of a 1900-byte printable value: 2 DATA frames fill a channel's window, 3 the
// connection's, and the corpus files stay small.
func bigChain(origin wire.OriginID, seq uint64, prev wire.Hash, n int) []prototest.Entry {
	var out []prototest.Entry
	for range n {
		seq++
		t := wire.Txn{Origin: origin, Seq: seq, HLC: hlcOf(seq), Prev: prev, Ops: []wire.Op{{Kind: wire.OpPut,
			Table: []byte("t"), Key: []byte("k"), Value: bytes.Repeat([]byte{'a' + byte(seq%26)}, 1900)}}}
		raw, err := t.Encode()
		if err != nil {
			panic(err)
		}
		prev = sha256.Sum256(raw)
		out = append(out, prototest.Entry{Seq: seq, Raw: raw, Hash: prev})
	}
	return out
}

// sessionSeeds returns the seeds: protocol/SPEC.md's examples as they are, the version-2 ones
// adjusted to the setup's channels and origins (valid), and the error classes of version 2.
func sessionSeeds(tb testing.TB) []sessSeed {
	tb.Helper()
	exs := specExamples(tb)
	var out []sessSeed
	add := func(name string, code wire.Code, events evCount, mode byte, msgs ...[]byte) {
		out = append(out, sessSeed{name: name, data: sessionInput(mode, msgs...), code: code, events: events})
	}

	// protocol/SPEC.md's examples, unchanged, each as one message, and all of them as one.
	specCodes := map[string]wire.Code{
		"HELLO": wire.CodeUnexpectedFrame, "AUTH": wire.CodeUnexpectedFrame, "CLOSE": wire.CodeUnsupportedVersion,
		"PING": "", "PONG": wire.CodeUnexpectedFrame, "ORIGIN": "", "SUBSCRIBE1": wire.CodeUnexpectedFrame,
		"TXN1": wire.CodeUnexpectedFrame, "ACK1": wire.CodeUnexpectedFrame,
		"SUBSCRIBE":   wire.CodeBadChannel,      // channel 1 is open already
		"UNSUBSCRIBE": wire.CodeBadChannel,      // channel 2 was never opened
		"CURSOR":      "",                       // seq 1 is acknowledged already: nothing changes
		"DATA":        wire.CodeUnexpectedFrame, // an origin other than channel 1's
		"HEADS":       wire.CodeUnexpectedFrame, // an origin the peer never named
		"CREDIT":      "", "RESEND": "", "DIVERGENCE": "",
	}
	var all []byte
	ex := map[string][]byte{}
	for i, e := range exs {
		code, known := specCodes[e.name] // an example added since: a seed, its outcome unchecked
		if dataFormatV4(e.data, 0) {
			code = wire.CodeUnsupportedTxn // transaction formats 2 and 3 are version 4's; this session runs version 2
		}
		s := sessSeed{name: fmt.Sprintf("spec-%02d-%s", i+1, strings.ToLower(e.name)), data: sessionInput(0, e.data), code: code,
			anyOutcome: !known}
		s.byPeer = e.name == "CLOSE"
		out = append(out, s)
		all = append(all, e.data...)
		if _, dup := ex[e.name]; !dup {
			ex[e.name] = e.data
		}
	}
	out = append(out, sessSeed{name: "spec-all", data: sessionInput(0, all), code: wire.CodeUnexpectedFrame, anyOutcome: exs[0].name != "HELLO"})

	// The version-2 examples adjusted to the setup: valid frames of every type.
	adj := func(name string, fix func(d *wire.Decoded)) []byte {
		fs, err := wire.DecodeMessage(ex[name], wire.DefaultMaxMessage, wire.MaxFrameBody)
		if err != nil || len(fs) != 1 {
			tb.Fatalf("protocol/SPEC.md's %s example: %d frames, %v", name, len(fs), err)
		}
		fix(&fs[0])
		b, aerr := wire.AppendFrame(nil, fs[0].Flags, fs[0].Channel, fs[0].Value)
		if aerr != nil {
			tb.Fatalf("protocol/SPEC.md's %s example adjusted: %v", name, aerr)
		}
		return b
	}
	p3, err := wire.ParseTxn(sessChainP[2].Raw)
	if err != nil {
		tb.Fatal(err)
	}
	var (
		ping  = ex["PING"]
		pong  = adj("PONG", func(d *wire.Decoded) { d.Value.(*wire.Pong).ID = 1 })
		orig  = ex["ORIGIN"] // a new origin: the vector holds 2 of 8
		heads = adj("HEADS", func(d *wire.Decoded) {
			h := d.Value.(*wire.Heads)
			h.Heads[0].Origin, h.Heads[0].Seq, h.Heads[0].HLC = pOrigin, 129, hlcOf(129)
			h.Withdrawn = []wire.OriginID{rOrigin}
		})
		data = adj("DATA", func(d *wire.Decoded) { // 2:3 on channel 1
			d.Value = &wire.Data{Hash: sessChainP[2].Hash, Txn: p3.Txn()}
		})
		dataR  = dataFrame(2, sessChainR[1]) // 9:2 on channel 2
		cursor = adj("CURSOR", func(d *wire.Decoded) {
			d.Value.(*wire.Cursor).Entries[0] = wire.CursorEntry{Channel: 1, Seq: 2, Hash: sessChainS[1].Hash}
		})
		credit    = ex["CREDIT"]                             // the connection and the peer's channel 1
		resend    = ex["RESEND"]                             // channel 1 from 3: acknowledged 1, sent 3
		subscribe = adj("SUBSCRIBE", func(d *wire.Decoded) { // channels 2 and 3: origin 9 and origin 10
			s := d.Value.(*wire.Subscribe)
			s.Entries[0].Channel, s.Entries[0].Origin = 2, rOrigin
			s.Entries[1].Channel, s.Entries[1].Origin = 3, prototest.Origin(10)
		})
		unsubscribe  = adj("UNSUBSCRIBE", func(d *wire.Decoded) { d.Value.(*wire.Unsubscribe).Channels = []uint32{1} })
		unsubscribe2 = ex["UNSUBSCRIBE"]                         // channel 2, once opened
		divergence   = ex["DIVERGENCE"]                          // side 0: the peer's channel 1
		divergence1  = adj("DIVERGENCE", func(d *wire.Decoded) { // side 1: the session's channel 2
			*d.Value.(*wire.Divergence) = wire.Divergence{Channel: 2, Seq: 1, Hash: sessChainR[0].Hash, Side: wire.SideSender}
		})
		divergence3 = adj("DIVERGENCE", func(d *wire.Decoded) { d.Value.(*wire.Divergence).Channel = 3 })
		ignorable   = prototest.RawFrame(0x80, 0, 0, []byte("hint"))
	)
	add("v2-valid-one-message", "", evCount{protocol.EventTxn: 2, protocol.EventOriginNamed: 1, protocol.EventHeads: 1,
		protocol.EventCursor: 1, protocol.EventCredit: 2, protocol.EventResend: 1, protocol.EventSubscribed: 2,
		protocol.EventUnsubscribed: 1, protocol.EventDivergence: 3, protocol.EventIgnoredFrame: 1}, 1,
		prototest.Cat(ping, pong, orig, heads, data, dataR, cursor, credit, resend, subscribe, unsubscribe2, divergence3,
			divergence1, dataFrame(2, sessChainR[2]), ignorable, divergence))
	add("v2-valid-one-frame-each", "", evCount{protocol.EventTxn: 2, protocol.EventOriginNamed: 1, protocol.EventHeads: 1,
		protocol.EventCursor: 1, protocol.EventCredit: 2, protocol.EventResend: 1, protocol.EventSubscribed: 2,
		protocol.EventUnsubscribed: 1, protocol.EventDivergence: 2}, 1,
		ping, pong, orig, heads, data, dataR, cursor, credit, resend, subscribe, unsubscribe, divergence1, divergence3)
	for _, f := range []struct {
		name  string
		frame []byte
	}{{"ping", ping}, {"pong", pong}, {"origin", orig}, {"heads", heads}, {"data", data}, {"data-relayed", dataR},
		{"cursor", cursor}, {"credit", credit}, {"resend", resend}, {"subscribe", subscribe}, {"unsubscribe", unsubscribe},
		{"divergence-side-0", divergence}, {"divergence-side-1", divergence1}} {
		add("v2-"+f.name, "", nil, 0, f.frame)
	}

	// Streams of large entries, 2 to a channel's window: with acks the credit comes back;
	// without, the windows overrun.
	bigP := bigChain(pOrigin, 2, sessChainP[1].Hash, 3)
	big := bigChain(rOrigin, 1, sessChainR[0].Hash, 4)
	var stream [][]byte
	for i := range 3 {
		stream = append(stream, prototest.Cat(dataFrame(1, bigP[i]), dataFrame(2, big[i])))
	}
	add("stream-acked", "", evCount{protocol.EventTxn: 6}, 1, stream...)
	add("stream-unacked-credit-overrun", wire.CodeCreditOverrun, nil, 0, stream...)

	// Credit overruns: large entries past channel 2's window; stale entries on closed
	// channels past the connection's window (they count on the connection only).
	add("credit-overrun-channel", wire.CodeCreditOverrun, nil, 0, dataRun(2, big[:3]))
	closeBoth := adj("DIVERGENCE", func(d *wire.Decoded) {
		*d.Value.(*wire.Divergence) = wire.Divergence{Channel: 1, Seq: 2, Hash: sessChainP[1].Hash, Side: wire.SideSender}
	})
	add("credit-overrun-connection", wire.CodeCreditOverrun, nil, 0, prototest.Cat(closeBoth, divergence1, dataRun(2, big)))

	// Channels: DATA on channel 0, on a channel never opened, of another origin.
	add("data-channel-0", wire.CodeBadChannel, nil, 0, dataFrame(0, sessChainP[2]))
	add("data-unopened-channel", wire.CodeBadChannel, nil, 0, dataFrame(3, sessChainP[2]))
	add("data-wrong-origin", wire.CodeUnexpectedFrame, nil, 0, dataFrame(1, sessChainR[1]))
	add("data-stale", "", evCount{protocol.EventDivergence: 1}, 0, prototest.Cat(divergence1, dataR))

	// Gaps: RESEND, entries discarded until the resend arrives; a resent stream that skips
	// again is a new gap.
	add("gap-resend", "", evCount{protocol.EventGap: 1, protocol.EventTxn: 3}, 1,
		dataRun(1, sessChainP[3:5]), dataRun(1, sessChainP[2:5]))
	add("gap-twice", "", evCount{protocol.EventGap: 2, protocol.EventTxn: 0}, 1,
		dataRun(1, sessChainP[4:6]), dataFrame(1, sessChainP[3]))

	// Divergence: a corrupted entry, a corrupted hash, a broken chain, another entry at the
	// same seq; the channel closes, later entries on it are stale, the others flow.
	corrupt := dataFrame(1, sessChainP[2])
	corrupt[len(corrupt)-1] ^= 1
	badHash := dataFrame(1, sessChainP[2])
	badHash[wire.HeaderSize] ^= 1
	add("divergence-corrupted-data", "", evCount{protocol.EventDivergence: 1, protocol.EventTxn: 1}, 0,
		prototest.Cat(corrupt, dataFrame(1, sessChainP[3]), dataR))
	add("divergence-corrupted-hash", "", evCount{protocol.EventDivergence: 1}, 0, badHash)
	add("divergence-broken-chain", "", evCount{protocol.EventDivergence: 1}, 0,
		dataFrame(1, prototest.ChainFrom(pOrigin, 2, wire.Hash{1}, 1, 1, 8)[0]))
	add("divergence-same-seq", "", evCount{protocol.EventDivergence: 1}, 0,
		dataFrame(1, prototest.ChainFrom(pOrigin, 1, sessChainP[0].Hash, 1, 2, 8)[0]))
	add("duplicates", "", evCount{protocol.EventDuplicate: 3}, 0,
		dataRun(1, sessChainP[:2]), dataFrame(2, sessChainR[0]))

	// DATA bodies the wire rejects.
	format2 := dataFrame(1, sessChainP[2])
	format2[wire.HeaderSize+wire.DataHeader] = 2
	add("data-unsupported-txn", wire.CodeUnsupportedTxn, nil, 0, format2)
	add("data-bad-txn", wire.CodeBadTxn, nil, 0, prototest.RawFrame(wire.TypeData, 0, 1, make([]byte, 40)))
	add("data-flags", wire.CodeBadFlags, nil, 0, prototest.RawFrame(wire.TypeData, 1, 1, data[wire.HeaderSize:]))

	// Heads and origins.
	frame := prototest.Frame
	add("heads-unnamed-origin", wire.CodeUnexpectedFrame, nil, 0,
		frame(&wire.Heads{Heads: []wire.Head{{Origin: prototest.Origin(10), Seq: 1, HLC: hlcOf(1)}}}))
	add("heads-going-back", wire.CodeOutOfOrder, nil, 0, frame(&wire.Heads{Heads: []wire.Head{{Origin: pOrigin, Seq: 5, HLC: hlcOf(5)}}}))
	var origins []byte
	for i := range 7 {
		origins = append(origins, frame(&wire.Origin{Origin: prototest.Origin(byte(10 + i)), Name: fmt.Sprintf("o%d", 10+i)})...)
	}
	add("origin-too-many", wire.CodeTooManyOrigins, nil, 0, origins)

	// The channels the session sends on.
	add("pong-twice", wire.CodeUnexpectedFrame, nil, 0, pong, pong)
	add("resend-acknowledged", wire.CodeBadField, nil, 0, frame(&wire.Resend{Channel: 1, From: 1}))
	add("resend-past-sent", wire.CodeBadField, nil, 0, frame(&wire.Resend{Channel: 1, From: 5}))
	add("cursor-past-sent", wire.CodeBadField, nil, 0, frame(&wire.Cursor{Entries: []wire.CursorEntry{{Channel: 1, Seq: 4, Hash: sessChainS[3].Hash}}}))
	add("cursor-back", wire.CodeOutOfOrder, nil, 0,
		frame(&wire.Cursor{Entries: []wire.CursorEntry{{Channel: 1, Seq: 3, Hash: sessChainS[2].Hash}}}),
		frame(&wire.Cursor{Entries: []wire.CursorEntry{{Channel: 1, Seq: 2, Hash: sessChainS[1].Hash}}}))
	sub := func(ch uint32, o wire.OriginID) wire.SubscribeEntry {
		return wire.SubscribeEntry{Channel: ch, Origin: o, Credit: 8192}
	}
	add("subscribe-peer-origin", wire.CodeBadField, nil, 0, frame(&wire.Subscribe{Entries: []wire.SubscribeEntry{sub(2, pOrigin)}}))
	add("subscribe-open-origin", wire.CodeBadField, nil, 0, frame(&wire.Subscribe{Entries: []wire.SubscribeEntry{sub(2, sOrigin)}}))
	add("subscribe-channel-reused", wire.CodeBadChannel, nil, 0, frame(&wire.Subscribe{Entries: []wire.SubscribeEntry{sub(1, rOrigin)}}))
	add("subscribe-too-many-channels", wire.CodeTooManyChannels, nil, 0, frame(&wire.Subscribe{Entries: []wire.SubscribeEntry{
		sub(2, rOrigin), sub(3, prototest.Origin(10)), sub(4, prototest.Origin(11)), sub(5, prototest.Origin(12))}}))
	add("unsubscribe-never-opened", wire.CodeBadChannel, nil, 0, unsubscribe2)
	add("unsubscribe-twice", "", evCount{protocol.EventUnsubscribed: 1}, 0, unsubscribe, unsubscribe)
	add("divergence-never-opened", wire.CodeBadChannel, nil, 0, adj("DIVERGENCE", func(d *wire.Decoded) {
		*d.Value.(*wire.Divergence) = wire.Divergence{Channel: 3, Side: wire.SideSender}
	}))
	add("credit-never-opened", wire.CodeBadChannel, nil, 0, frame(&wire.Credit{Entries: []wire.CreditEntry{{Channel: 2, Limit: 1 << 20}}}))

	// The peer's CLOSE: a code newer than this build travels with its class; a local
	// class is acted on as protocol.
	out = append(out,
		sessSeed{name: "close-newer-code", data: sessionInput(0, frame(&wire.Close{Code: "x-newer-code", Class: wire.ClassTransient})),
			code: "x-newer-code", byPeer: true},
		sessSeed{name: "close-local-class", data: sessionInput(0, frame(&wire.Close{Code: "x-newer-code", Class: wire.ClassLocal})),
			code: "x-newer-code", byPeer: true})

	// Framing.
	add("malformed-empty-message", wire.CodeMalformedFrame, nil, 0, []byte{})
	add("malformed-truncated-header", wire.CodeMalformedFrame, nil, 1, ping, []byte{0x04, 0x00, 0x00})
	out = append(out, sessSeed{name: "malformed-message-too-large", code: wire.CodeMessageTooLarge, testOnly: true,
		data: sessionInput(0, bytes.Repeat([]byte("a"), sessLimits.MaxMessage+1))})
	add("malformed-frame-too-large", wire.CodeFrameTooLarge, nil, 0, prototest.RawFrame(wire.TypePing, 0, 0, bytes.Repeat([]byte("a"), 2049)))
	add("malformed-unknown-critical", wire.CodeUnknownFrame, nil, 0, prototest.RawFrame(0x7e, 0, 0, nil))
	add("ignorable-frames", "", evCount{protocol.EventIgnoredFrame: 2}, 1,
		prototest.Cat(ignorable, ping, prototest.RawFrame(0xff, 3, 7, nil)), prototest.RawFrame(0x90, 0, 0, nil))
	return out
}

// TestSessionSeedOutcomes: each seed of FuzzSession passes every check of the target, and
// does what its name says to the session under test.
func TestSessionSeedOutcomes(t *testing.T) {
	for _, sd := range sessionSeeds(t) {
		t.Run(sd.name, func(t *testing.T) {
			x := runSession(t, sd.data)
			err := x.s.Err()
			switch {
			case sd.anyOutcome:
			case sd.code == "" && err != nil:
				t.Fatalf("closed with %v, want established", err)
			case sd.code != "" && (err == nil || err.Code != sd.code):
				t.Fatalf("err %v, want %s", err, sd.code)
			case sd.code != "" && x.byPeer != sd.byPeer:
				t.Fatalf("err %v: closed by the peer %v, want %v", err, x.byPeer, sd.byPeer)
			}
			for k, n := range sd.events {
				if x.counts[k] != n {
					t.Errorf("%d %s events, want %d (all: %v)", x.counts[k], k, n, x.counts)
				}
			}
		})
	}
}

var writeSessionSeeds = flag.Bool("write-session-seeds", false, "TestWriteSessionSeedCorpus: write FuzzSession's seeds to testdata/fuzz/FuzzSession")

// TestWriteSessionSeedCorpus writes the seeds of FuzzSession as corpus files, so that the
// committed corpus holds them too. Run it after protocol/SPEC.md's examples or the setup change:
//
//	go test ./fuzz -run=TestWriteSessionSeedCorpus -write-session-seeds
func TestWriteSessionSeedCorpus(t *testing.T) {
	if !*writeSessionSeeds {
		t.Skip("writes the seed corpus only with -write-session-seeds")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzSession")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range sessionSeeds(t) {
		if s.testOnly {
			continue
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s.data)
		if err := os.WriteFile(filepath.Join(dir, "seed-"+s.name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkSessionSetup: the per-input setup of FuzzSession (a copy of the session set up
// once) against building the established pair from scratch.
func BenchmarkSessionSetup(b *testing.B) {
	su := sessionSetup(b)
	b.Run("clone", func(b *testing.B) {
		for b.Loop() {
			if _, err := su.newExec(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pair", func(b *testing.B) { // establishing the pair anew (recording it too)
		for b.Loop() {
			if _, _, err := recordSessionSetup(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSessionInputs: the whole cost of one input (the copy and the checks), for a small and
// a large seed.
func BenchmarkSessionInputs(b *testing.B) {
	for _, sd := range sessionSeeds(b) {
		if sd.name != "v2-data" && sd.name != "v2-valid-one-message" && sd.name != "stream-acked" {
			continue
		}
		b.Run(sd.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := runSessionInput(sd.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
