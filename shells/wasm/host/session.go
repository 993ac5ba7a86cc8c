package host

import (
	"context"
	"errors"
	"strconv"
	"time"

	"plait/protocol"
	"plait/protocol/abi"
	"plait/protocol/replica"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// DefaultCallTimeout bounds every call into an instance: a guest that runs longer is
// stopped (the runtime closes the module on the context's end) and discarded.
const DefaultCallTimeout = 10 * time.Second

// Session is one protocol session run by an instance of a core module: the replica's
// Session interface, so that a node or the simulator can run any build of the core that
// speaks a released ABI. Every method is one command batch; the batch's STATUS record
// answers the queries (State, Credit, HeldBytes, ...) until the next call. After a trap, a
// deadline or any failed call the instance is discarded and every later call fails with
// an internal error; the session then reports state closed with that error.
type Session struct {
	in      stepper
	abi     uint32
	timeout time.Duration
	batch   abi.Batch
	st      abi.StatusMsg
	ready   protocol.Ready
	dead    *wire.Error
	// id is the id the last command's RESULT carried: what OpRequest's session gave the
	// request (ABI 5).
	id uint64
	// deferred: the guest keeps its output until an OpReady (ABI 2's DeferReady), as a
	// native session keeps it until Ready, so frames of several calls share messages
	// exactly as natively. ABI 1 hands the output over after every command.
	deferred bool
	// noDeadline: the module was loaded WithoutCallDeadline.
	noDeadline bool
}

var _ replica.Session = (*Session)(nil)

// stepper runs batches: an instance of a module, or the native driver.
type stepper interface {
	Step(ctx context.Context, batch []byte) ([]byte, error)
	Close(ctx context.Context) error
}

// NewSession instantiates the module and configures a session in it. timeout bounds each
// call (0: DefaultCallTimeout).
func (m *Module) NewSession(cfg protocol.Config, timeout time.Duration) (*Session, error) {
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	in, err := m.Instantiate(ctx)
	if err != nil {
		return nil, err
	}
	s, err := newSession(in, in.abiVersion, cfg, timeout)
	if s != nil {
		s.noDeadline = m.noDeadline
	}
	return s, err
}

// NewDriverSession is a Session whose batches run in this process's abi.Driver: the ABI's
// own cost without WASM (benchmarks), and a reference the WASM build must equal.
func NewDriverSession(cfg protocol.Config) (*Session, error) {
	return newSession(&nativeStepper{}, abi.Version, cfg, DefaultCallTimeout)
}

// nativeStepper runs batches in an abi.Driver; the reply is copied, as a host copies an
// instance's.
type nativeStepper struct{ d abi.Driver }

func (n *nativeStepper) Step(_ context.Context, batch []byte) ([]byte, error) {
	return append([]byte(nil), n.d.Step(batch)...), nil
}

func (n *nativeStepper) Close(context.Context) error { return nil }

func newSession(in stepper, abiVersion uint32, cfg protocol.Config, timeout time.Duration) (*Session, error) {
	s := &Session{in: in, abi: abiVersion, timeout: timeout, deferred: abiVersion >= 2}
	if len(cfg.ChannelBinding) > 0 && abiVersion < 3 {
		_ = in.Close(context.Background()) // a discarded instance; the refusal is the one to report
		return nil, wire.NewError(wire.CodeBadArgument, "a guest of ABI "+strconv.FormatUint(uint64(abiVersion), 10)+
			" does not bind handshakes to a TLS channel (ABI 3 does)")
	}
	msg := abi.ConfigMsg{Role: uint8(cfg.Role), Name: cfg.Name, Origin: cfg.Origin, Secret: cfg.Secret,
		MinVersion: cfg.MinVersion, MaxVersion: cfg.MaxVersion, Capabilities: cfg.Capabilities, ExpectedPeer: cfg.ExpectedPeer,
		Limits: abi.LimitsOf(cfg.Limits), DeferReady: s.deferred, ChannelBinding: cfg.ChannelBinding, Compact: abiVersion >= 4, Leaf: cfg.Leaf}
	if err := s.call(func(b *abi.Batch) error { return b.Configure(msg) }); err != nil {
		_ = in.Close(context.Background()) // a discarded instance; the configure error is the one to report
		return nil, err
	}
	return s, nil
}

// NewSessionFunc is a replica.Config.NewSession that runs every session in an instance of
// m.
func (m *Module) NewSessionFunc(timeout time.Duration) func(protocol.Config) (replica.Session, error) {
	return func(cfg protocol.Config) (replica.Session, error) { return m.NewSession(cfg, timeout) }
}

// ABIVersion is the ABI version of the instance.
func (s *Session) ABIVersion() uint32 { return s.abi }

// call runs one command and takes in what the batch answered. It returns the command's
// error, or an internal error when the instance failed.
func (s *Session) call(fill func(b *abi.Batch) error) error {
	if s.dead != nil {
		return s.dead
	}
	s.batch.Reset()
	if err := fill(&s.batch); err != nil {
		return wire.NewError(wire.CodeBadArgument, err.Error())
	}
	out, err := s.step()
	if err != nil {
		return s.die(err)
	}
	recs, err := abi.Split(out)
	if err != nil {
		return s.die(err)
	}
	var cmdErr *wire.Error
	results := 0
	s.id = 0
	for _, r := range recs {
		switch r.Kind.Base() {
		case abi.KindResult:
			m, err := abi.ParseResult(r)
			if err != nil {
				return s.die(err)
			}
			if m.Err != nil && cmdErr == nil {
				cmdErr = m.Err.Wire()
			}
			if results == 0 {
				s.id = m.ID
			}
			results++
		case abi.KindMessage:
			s.ready.Messages = append(s.ready.Messages, r.Payload) // out is the host's own copy
		case abi.KindEvent:
			m, err := abi.ParseEvent(r)
			if err != nil {
				return s.die(err)
			}
			ev, err := m.Event()
			if err != nil {
				return s.die(err)
			}
			s.ready.Events = append(s.ready.Events, ev)
		case abi.KindStatus:
			st, err := abi.ParseStatus(r) // fresh: absent keys must not keep the previous values
			if err != nil {
				return s.die(err)
			}
			s.st = st
		}
	}
	if results == 0 {
		return s.die(errors.New("the batch was answered without a RESULT"))
	}
	if cmdErr != nil {
		return cmdErr
	}
	return nil
}

// send runs one session command: c's row of protocol/abi appends the arguments, and the
// guest's driver runs the same row. Every command method below is one send.
func send[A any](s *Session, c *abi.Cmd[A], a A) error {
	return s.call(func(b *abi.Batch) error { return abi.Append(b, c, a) })
}

// step runs the batch with the call's deadline; an instance compiled without termination
// checks (WithoutCallDeadline) would not see it, and gets no context to watch.
func (s *Session) step() ([]byte, error) {
	if s.noDeadline {
		return s.in.Step(context.Background(), s.batch.Bytes())
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	return s.in.Step(ctx, s.batch.Bytes())
}

// die discards the instance after a failed call.
func (s *Session) die(err error) error {
	s.dead = wire.NewError(wire.CodeInternal, "wasm core: "+err.Error())
	s.st.State = uint8(protocol.StateClosed)
	s.st.Err = abi.ErrorOf(s.dead)
	_ = s.in.Close(context.Background()) // discarded after a failed call: err is what the caller learns
	return s.dead
}

// Start sends the HELLO.
func (s *Session) Start(now time.Time, nonce []byte) error {
	return send(s, abi.CmdStart, abi.TimedMsg{Now: now, Data: nonce})
}

// Receive takes one message from the peer.
func (s *Session) Receive(now time.Time, msg []byte) error {
	return send(s, abi.CmdReceive, abi.TimedMsg{Now: now, Data: msg})
}

// Tick runs the timers.
func (s *Session) Tick(now time.Time) error {
	return send(s, abi.CmdTick, abi.TimedMsg{Now: now})
}

// Ready hands over what the session produced since the last Ready.
func (s *Session) Ready() protocol.Ready {
	if s.deferred && s.st.HasReady {
		_ = s.call(func(b *abi.Batch) error { b.Ready(); return nil }) // a failure is the session's state
	}
	rd := s.ready
	s.ready = protocol.Ready{}
	return rd
}

// HasReady reports whether Ready would return anything.
func (s *Session) HasReady() bool {
	return len(s.ready.Messages) > 0 || len(s.ready.Events) > 0 || (s.deferred && s.st.HasReady)
}

// Release does nothing: every message is the host's own copy.
func (s *Session) Release([]byte) {}

// NextDeadline is the time of the next timer (zero: none).
func (s *Session) NextDeadline() time.Time {
	if s.st.Deadline == 0 {
		return time.Time{}
	}
	return time.Unix(0, s.st.Deadline).UTC()
}

// State is the session's state.
func (s *Session) State() protocol.State { return protocol.State(s.st.State) }

// Handshake is the handshake's outcome (the version alone before it completed).
func (s *Session) Handshake() protocol.HandshakeInfo {
	if s.st.Handshake != nil {
		return s.st.Handshake.Info()
	}
	return protocol.HandshakeInfo{Version: s.st.Version}
}

// Connected answers as the native session does, from the status: established, and reads
// paused or resumed (ABI 2 says so), or a byte received within the liveness timeout.
func (s *Session) Connected(now time.Time) bool {
	return protocol.State(s.st.State) == protocol.StateEstablished &&
		(s.st.ReadPaused || s.st.Resumed || now.Sub(time.Unix(0, s.st.LastReceive)) < time.Duration(s.st.Liveness))
}

// RTT is the round trip of the latest sample (the last PING's below version 4).
func (s *Session) RTT() time.Duration { return time.Duration(s.st.RTT) }

// ClockOffset is the peer's estimated clock offset (status key 22), and whether it was
// measured: never by a guest older than ABI 3, which does not report it.
func (s *Session) ClockOffset() (time.Duration, bool) {
	if s.st.ClockOffset == nil {
		return 0, false
	}
	return time.Duration(*s.st.ClockOffset), true
}

// HeldBytes is what the session holds received and not yet acknowledged.
func (s *Session) HeldBytes() int { return int(s.st.HeldBytes) }

// ReadPaused reports whether the caller should stop reading (version 1).
func (s *Session) ReadPaused() bool { return s.st.ReadPaused }

// Err is why the session closed.
func (s *Session) Err() *wire.Error { return s.st.Err.Wire() }

// Stats are the session's counters.
func (s *Session) Stats() protocol.Stats {
	return s.st.Stats.Stats()
}

// Limits are the limits in effect.
func (s *Session) Limits() protocol.Limits {
	l := s.st.Limits
	if l == nil {
		return protocol.Limits{}.WithDefaults()
	}
	return l.Limits()
}

// Close closes the session with a CLOSE frame.
func (s *Session) Close(code wire.Code, message string) error {
	return send(s, abi.CmdClose, abi.CloseMsg{Code: string(code), Message: message})
}

// SetOriginName names an origin for the peer.
func (s *Session) SetOriginName(origin wire.OriginID, name string) error {
	return send(s, abi.CmdName, abi.NameMsg{Origin: origin, Name: name})
}

// SendBudget is how many bytes Offer or Send may still queue.
func (s *Session) SendBudget() int { return int(s.st.SendBudget) }

// V1 returns the version-1 commands, each one command batch.
func (s *Session) V1() protocol.V1Commands { return (*v1Commands)(s) }

// V2 returns the version-2 commands, each one command batch (Credit and Credits answer
// from the last status).
func (s *Session) V2() protocol.V2Commands { return (*v2Commands)(s) }

// V3 returns the version-3 commands, each one command batch (a module of ABI 3 or later:
// an older one never negotiates version 3).
func (s *Session) V3() protocol.V3Commands { return (*v3Commands)(s) }

// V4 returns the version-4 commands, each one command batch (a module of ABI 5 or later: an
// older one never negotiates version 4, and answers their opcodes unknown-command).
func (s *Session) V4() protocol.V4Commands { return (*v4Commands)(s) }

type (
	v1Commands Session
	v2Commands Session
	v3Commands Session
	v4Commands Session
)

func (c *v4Commands) SendMap(m wire.Map) error {
	return send((*Session)(c), abi.CmdSendMap, m)
}

func (c *v4Commands) SendMembers(entries []wire.Member) error {
	return send((*Session)(c), abi.CmdSendMembers, wire.Members{Entries: entries})
}

// Request answers the id its RESULT carries (ResultMsg.ID).
func (c *v4Commands) Request(r wire.Request) (uint64, error) {
	s := (*Session)(c)
	if err := send(s, abi.CmdRequest, r); err != nil {
		return 0, err
	}
	return s.id, nil
}

func (c *v4Commands) Respond(id uint64, r wire.Response) error {
	r.ID = id
	return send((*Session)(c), abi.CmdRespond, r)
}

func (c *v4Commands) Forget(id uint64) error {
	return send((*Session)(c), abi.CmdForget, id)
}

func (c *v4Commands) Skip(origin wire.OriginID, to uint64, hash wire.Hash, hlc wire.HLC, tables [][]byte, generation uint64) error {
	return send((*Session)(c), abi.CmdSkip, abi.SkipMsg{Origin: origin, To: to, Hash: hash, HLC: hlc, Tables: tables, Generation: generation})
}

func (c *v4Commands) Quiet(quiet, loud []wire.OriginID) error {
	return send((*Session)(c), abi.CmdQuiet, wire.Quiet{Quiet: quiet, Loud: loud})
}

func (c *v4Commands) Link(l wire.Link) error {
	return send((*Session)(c), abi.CmdLink, l)
}

func (c *v4Commands) LeafState(l wire.LeafState) error {
	return send((*Session)(c), abi.CmdLeafState, l)
}

func (c *v4Commands) CopyHolds(table []byte, seqs []wire.OriginSeq, since uint64) error {
	return send((*Session)(c), abi.CmdCopyHolds, abi.CopyHoldsMsg{Table: table, Seqs: seqs, Since: since})
}

func (c *v3Commands) AdvertiseFloors(floors []wire.Floor) error {
	return send((*Session)(c), abi.CmdAdvertiseFloors, abi.HeadsMsg{Floors: floors})
}

func (c *v3Commands) Purged(origin wire.OriginID, seq uint64, hash wire.Hash) error {
	return send((*Session)(c), abi.CmdPurged, abi.CursorMsg{Origin: origin, Seq: seq, Hash: hash})
}

func (c *v3Commands) RequestCopy(table, key []byte) error {
	return send((*Session)(c), abi.CmdRequestCopy, abi.CopyMsg{Table: table, Key: key})
}

func (c *v3Commands) AckChunk() error {
	return send((*Session)(c), abi.CmdAckChunk, struct{}{})
}

func (c *v3Commands) AbortCopy(outgoing bool, code wire.Code, msg string) error {
	return send((*Session)(c), abi.CmdAbortCopy, abi.AbortCopyMsg{Outgoing: outgoing, Code: string(code), Message: msg})
}

func (c *v3Commands) BeginCopy(positions []wire.CopyPosition, tables, records, size uint64) error {
	return send((*Session)(c), abi.CmdBeginCopy, abi.CopyBeginMsg{Positions: positions, Tables: tables, Records: records, Bytes: size})
}

func (c *v3Commands) SendChunk(body []byte) error {
	return send((*Session)(c), abi.CmdSendChunk, body)
}

// CopyCredit answers from the last status.
func (c *v3Commands) CopyCredit() int { return int(c.st.CopyCredit) }

func (c *v3Commands) EndCopy() error {
	return send((*Session)(c), abi.CmdEndCopy, struct{}{})
}

func (c *v3Commands) AskRange(d *wire.RangeDigest) error {
	return send((*Session)(c), abi.CmdAskRange, d)
}

// RangeAsked answers from the last status.
func (c *v3Commands) RangeAsked() bool { return c.st.RangeAsked }

func (c *v3Commands) AnswerRange(body []byte) error {
	return send((*Session)(c), abi.CmdAnswerRange, body)
}

func (c *v1Commands) Subscribe(from uint64, vec []vector.Entry) error {
	return send((*Session)(c), abi.CmdSubscribe, abi.SubscribeMsg{From: from, Vector: abi.CursorsOf(vec)})
}

func (c *v1Commands) Offer(position uint64, txn []byte) error {
	return send((*Session)(c), abi.CmdOffer, abi.OfferMsg{Position: position, Txn: txn})
}

func (c *v1Commands) Ack(position uint64) error {
	return send((*Session)(c), abi.CmdAck, position)
}

func (c *v1Commands) Observe(e vector.Entry) error {
	return send((*Session)(c), abi.CmdObserve, abi.CursorMsg(e))
}

func (c *v2Commands) Subscribe(cursors []vector.Entry) error {
	return send((*Session)(c), abi.CmdSubscribeOrigins, abi.SubscribeMsg{Vector: abi.CursorsOf(cursors)})
}

func (c *v2Commands) Unsubscribe(origins []wire.OriginID) error {
	return send((*Session)(c), abi.CmdUnsubscribeOrigins, abi.OriginsMsg{Origins: origins})
}

func (c *v2Commands) Ack(origin wire.OriginID, seq uint64) error {
	return send((*Session)(c), abi.CmdAckOrigin, abi.AckOriginMsg{Origin: origin, Seq: seq})
}

func (c *v2Commands) Send(txn []byte) error {
	return send((*Session)(c), abi.CmdSend, txn)
}

func (c *v2Commands) Credit(origin wire.OriginID) int {
	for _, cr := range c.st.Credits {
		if cr.Origin == origin {
			return int(cr.Credit)
		}
	}
	return 0
}

func (c *v2Commands) Credits() []protocol.OriginCredit {
	var out []protocol.OriginCredit
	for _, cr := range c.st.Credits { // sorted by origin, as the session lists them
		out = append(out, protocol.OriginCredit{Origin: cr.Origin, Credit: int(cr.Credit)})
	}
	return out
}

func (c *v2Commands) AdvertiseHeads(heads []wire.Head) error {
	return send((*Session)(c), abi.CmdAdvertiseHeads, abi.HeadsMsg{Heads: heads})
}

func (c *v2Commands) WithdrawHeads(origins []wire.OriginID) error {
	return send((*Session)(c), abi.CmdWithdrawHeads, abi.OriginsMsg{Origins: origins})
}
