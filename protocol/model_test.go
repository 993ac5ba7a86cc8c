package protocol_test

// A state-machine model (gopter commands) of a version-2 connection between two nodes:
//
//   - a model "sender node" holding several origin logs — its own, relayed ones, and a few
//     entries of the receiver's own origin, which it must never send back — that advertises
//     its heads and serves every channel the peer opens, in seq order, within Credit;
//   - a model "receiver node" with a store (per origin: the applied entries, in order) that
//     subscribes with its store's vector, applies EventTxn, acknowledges applied entries
//     with AckOrigin (except for starved origins, whose entries it holds without applying
//     or acknowledging), and resubscribes an origin from its store after a divergence.
//
// Both are real sessions (prototest.Config, newest version) over an in-memory pipe on a
// virtual clock. The pipe is the model's own (messages in flight per direction, delivered
// one by one), so that it can drop or corrupt single DATA frames in flight and discard
// what is in flight on a disconnect.
//
// Commands (random, with preconditions; the last of every sequence is quiesce): write
// entries to an origin's log, deliver (both ways with the clock moving and PINGs, or one
// way), settle, reconnect (in-flight messages discarded; resume from the store's vector),
// starve / unstarve an origin, drop or corrupt the origin's next DATA frame in flight,
// subscribe / unsubscribe one origin, quiesce (unstarve all, stop injecting, settle).
//
// Checked on the way and after every command: no entry handed over or applied twice, each
// origin's store contiguous and byte for byte its log; every drop the receiver would have
// applied detected as a gap (EventGap at that seq, Stats().Gaps counted) by the next entry of
// its channel, and no gap without such a drop; every corruption handled as SPEC.md's receive
// checks say (a divergence, never applied, then a fresh channel from the store; or stale on a
// closed channel; or the session closed when the encoding breaks), and no divergence without
// one; every DATA the sender emits above the subscriber's position as the sender knows it
// (SUBSCRIBE, CURSOR), starting right after it, the log's exact bytes and hash; HeldBytes
// within the limits before output is taken, and afterwards exactly what the receiver node
// holds back unacknowledged (at most a channel window per starved origin); the sessions'
// counters equal to the events; no unexpected event or close. After a settle, every
// subscribed origin that is not starved holds its whole log (a starved channel blocks no
// other), and after quiesce the store equals the sender's logs.
//
// Dropped frames: a frame removed in flight never reaches the receiver, so the credit it
// took from the sender is never released by the receiver (over TCP a frame cannot vanish;
// a real gap comes from a sender that skipped an entry, whose bytes do arrive). The pipe
// therefore compensates, as a middlebox would: every CREDIT on its way to the sender is
// raised by the bytes dropped on that channel and on the connection, and a drop re-sends the
// receiver's latest grants so raised. Without that, each drop would shrink the windows for
// the rest of the connection, and the model could not demand progress after one.
//
// A drop is undetectable when nothing follows it on its channel (a tail drop): the core
// does not compare the peer's HEADS with a channel's position. The final quiesce then
// reconnects once, which resumes from the store.
//
// Running: the default is the CI seed, 400 sequences of up to 60 commands. Replay another
// seed with go test ./protocol/ -run 'TestModel$' -model.seed=N (or PLAIT_MODEL_SEED=N;
// "random" picks one from the clock and logs it); explore further with -model.runs /
// PLAIT_MODEL_RUNS and -model.size / PLAIT_MODEL_SIZE. A failure prints the seed and the
// shrunk sequence (ARG_0: "initialState=init(...) sequential=[...]"); pasted into a file
// of testdata/model/ (gopter's line breaks may stay), TestModelRegressions replays it.

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// modelCISeed is the seed TestModel uses unless told otherwise.
const modelCISeed = 20260514

var (
	flagModelSeed = flag.String("model.seed", "", "seed of TestModel (default: the fixed CI seed; \"random\": from the clock); env PLAIT_MODEL_SEED")
	flagModelRuns = flag.Int("model.runs", 0, "command sequences TestModel runs (default 400); env PLAIT_MODEL_RUNS")
	flagModelSize = flag.Int("model.size", 0, "most commands of one sequence (default 60); env PLAIT_MODEL_SIZE")
)

// modelLimits are both sessions' limits: small, so that credit, windows and message
// packing matter with a few entries.
var modelLimits = protocol.Limits{
	MaxFrameBody:     2048,
	MaxMessage:       65536,
	MaxChannelBuffer: 8192,
	MaxSessionBuffer: 24576,
	MaxSendBuffer:    65536,
}

// modelHeldBound is what HeldBytes may reach: the connection window, the send buffer, one
// message, and the control frames of one input.
const modelHeldBound = 24576 + 65536 + 65536 + 8192

// modelMaxLog bounds an origin's log.
const modelMaxLog = 150

// modelMaxStarved is how many origins the receiver may starve at once (of the four it may
// subscribe to). Each holds at most its channel window (8192) of the connection's (24576):
// three can fill it.
const modelMaxStarved = 3

// The origins. The sender node holds a log of each; the receiver never subscribes to its
// own (oRecv).
const (
	oRecv = iota // the receiver node's own origin
	oSend        // the sender node's own origin
	oA           // relayed: neither side's own
	oB
	oC
	nOrigins
)

var (
	mOrigin = [nOrigins]wire.OriginID{prototest.Origin(1), prototest.Origin(2), prototest.Origin(10), prototest.Origin(11), prototest.Origin(12)}
	mName   = [nOrigins]string{"recv", "send", "relay-a", "relay-b", "relay-c"}
)

func originIndex(o wire.OriginID) int {
	for i, x := range mOrigin {
		if x == o {
			return i
		}
	}
	return -1
}

// ---- the abstract state ----

type originInit struct {
	Len, Ops, VLen int  // the sender's log: Len entries of Ops puts of VLen-byte values
	Store          int  // the receiver's store holds the first Store entries
	Sub            bool // the receiver subscribes to the origin
}

type modelInit struct {
	RecvDialer bool
	O          [nOrigins]originInit
}

func (in modelInit) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "init(d=%d", b2i(in.RecvDialer))
	for o, oi := range in.O {
		fmt.Fprintf(&b, ",o%d=%d/%d/%d/%d/%d", o, oi.Len, oi.Ops, oi.VLen, oi.Store, b2i(oi.Sub))
	}
	b.WriteString(")")
	return b.String()
}

// modelState is what the generator and the preconditions know.
type modelState struct {
	Init    modelInit
	Step    int
	LogLen  [nOrigins]int
	Sub     [nOrigins]bool
	Starved [nOrigins]bool
}

func (s modelState) String() string { return s.Init.String() }

func initialModelState(in modelInit) modelState {
	st := modelState{Init: in}
	for o, oi := range in.O {
		st.LogLen[o] = oi.Len
		st.Sub[o] = oi.Sub
	}
	return st
}

func (s modelState) starvedCount() int {
	n := 0
	for _, x := range s.Starved {
		n += b2i(x)
	}
	return n
}

// ---- commands ----

const (
	cmdWrite       = "write"       // append an entry to an origin's log at the sender; advertise it
	cmdDeliver     = "deliver"     // N rounds of delivery: both ways (the clock advances) or one way
	cmdSettle      = "settle"      // deliver until nothing moves; non-starved origins must catch up
	cmdQuiesce     = "quiesce"     // unstarve, stop injecting, settle: the store must equal the logs
	cmdReconnect   = "reconnect"   // drop the connection and what is in flight; resume from the store
	cmdStarve      = "starve"      // stop acknowledging an origin
	cmdUnstarve    = "unstarve"    // apply and acknowledge what was held back
	cmdDrop        = "drop"        // remove the origin's next DATA frame in flight
	cmdCorrupt     = "corrupt"     // flip a bit of the transaction of the origin's next DATA frame in flight
	cmdSubscribe   = "subscribe"   // open a channel for one more origin
	cmdUnsubscribe = "unsubscribe" // close an origin's channel
)

type modelCmd struct {
	Kind string
	O    int
	Ops  int    // write
	Len  int    // write: value length
	N    int    // write: entries; deliver: rounds
	Dir  string // deliver: both, up (receiver to sender), down
	Safe bool   // corrupt: flip a bit of the HLC (always a divergence) rather than anywhere
	Pos  int    // corrupt: byte offset in the transaction (modulo its length)
	Bit  int    // corrupt
}

func (c modelCmd) String() string {
	switch c.Kind {
	case cmdWrite:
		return fmt.Sprintf("write(o=%d,ops=%d,len=%d,n=%d)", c.O, c.Ops, c.Len, c.N)
	case cmdDeliver:
		return fmt.Sprintf("deliver(n=%d,dir=%s)", c.N, c.Dir)
	case cmdStarve, cmdUnstarve, cmdDrop, cmdSubscribe, cmdUnsubscribe:
		return fmt.Sprintf("%s(o=%d)", c.Kind, c.O)
	case cmdCorrupt:
		return fmt.Sprintf("corrupt(o=%d,safe=%d,pos=%d,bit=%d)", c.O, b2i(c.Safe), c.Pos, c.Bit)
	}
	return c.Kind + "()"
}

func (c modelCmd) PreCondition(s commands.State) bool {
	st := s.(modelState)
	relayable := c.O >= oSend && c.O < nOrigins
	switch c.Kind {
	case cmdWrite:
		return relayable && c.Ops >= 1 && c.Ops <= 3 && c.Len >= 1 && c.Len <= 500 && c.N >= 1 && st.LogLen[c.O]+c.N <= modelMaxLog
	case cmdDeliver:
		return c.N >= 1 && (c.Dir == "both" || c.Dir == "up" || c.Dir == "down")
	case cmdStarve:
		return relayable && st.Sub[c.O] && !st.Starved[c.O] && st.starvedCount() < modelMaxStarved
	case cmdUnstarve:
		return relayable && st.Starved[c.O]
	case cmdDrop:
		return relayable
	case cmdCorrupt:
		return relayable && c.Pos >= 0 && c.Bit >= 0 && c.Bit < 8
	case cmdSubscribe:
		return relayable && !st.Sub[c.O]
	case cmdUnsubscribe:
		return relayable && st.Sub[c.O]
	case cmdSettle, cmdQuiesce, cmdReconnect:
		return true
	}
	return false
}

func (c modelCmd) NextState(s commands.State) commands.State {
	st := s.(modelState)
	st.Step++
	switch c.Kind {
	case cmdWrite:
		st.LogLen[c.O] += c.N
	case cmdStarve:
		st.Starved[c.O] = true
	case cmdUnstarve:
		st.Starved[c.O] = false
	case cmdSubscribe:
		st.Sub[c.O] = true
	case cmdUnsubscribe:
		st.Sub[c.O], st.Starved[c.O] = false, false
	case cmdQuiesce:
		st.Starved = [nOrigins]bool{}
	}
	return st
}

func (c modelCmd) Run(sut commands.SystemUnderTest) commands.Result {
	m := sut.(*modelSystem)
	m.step++
	m.cmd = c.String()
	m.exec(c)
	m.checkAccounting()
	r := &modelResult{viol: m.viol, logLen: m.logLens(), sub: m.sub, starved: m.starved}
	m.viol = nil
	return r
}

func (c modelCmd) PostCondition(s commands.State, res commands.Result) *gopter.PropResult {
	st, r := s.(modelState), res.(*modelResult)
	labels := r.viol
	if r.logLen != st.LogLen || r.sub != st.Sub || r.starved != st.Starved {
		labels = append(labels, fmt.Sprintf("the system disagrees with the model after %s: logs %v/%v subscribed %v/%v starved %v/%v",
			c, r.logLen, st.LogLen, r.sub, st.Sub, r.starved, st.Starved))
	}
	if len(labels) == 0 {
		return &gopter.PropResult{Status: gopter.PropTrue}
	}
	return &gopter.PropResult{Status: gopter.PropFalse, Labels: labels}
}

type modelResult struct {
	viol    []string
	logLen  [nOrigins]int
	sub     [nOrigins]bool
	starved [nOrigins]bool
}

// ---- generators ----

func genModelInit(p *gopter.GenParameters) *gopter.GenResult {
	r := p.Rng
	var in modelInit
	in.RecvDialer = r.Intn(2) == 0
	for o := range in.O {
		oi := originInit{Len: r.Intn(7), Ops: 1 + r.Intn(2), VLen: 1 + r.Intn(300)}
		if o == oRecv {
			oi.Len = r.Intn(3)
		} else {
			oi.Store = r.Intn(oi.Len + 1)
			oi.Sub = r.Intn(4) != 0
		}
		in.O[o] = oi
	}
	return gopter.NewGenResult(initialModelState(in), gopter.NoShrinker)
}

func genModelCmd(s commands.State) gopter.Gen {
	st := s.(modelState)
	return func(p *gopter.GenParameters) *gopter.GenResult {
		r := p.Rng
		// The last command of every generated sequence is the final quiesce.
		if st.Step >= p.MaxSize-1 {
			return gopter.NewGenResult(modelCmd{Kind: cmdQuiesce}, gopter.NoShrinker)
		}
		relayed := func() int { return oSend + r.Intn(nOrigins-oSend) }
		pick := func(ok func(o int) bool) (int, bool) {
			var os []int
			for o := oSend; o < nOrigins; o++ {
				if ok(o) {
					os = append(os, o)
				}
			}
			if len(os) == 0 {
				return 0, false
			}
			return os[r.Intn(len(os))], true
		}
		type choice struct {
			w int
			f func() (modelCmd, bool)
		}
		choices := []choice{
			{26, func() (modelCmd, bool) {
				o := relayed()
				ops := 1
				if x := r.Intn(10); x >= 8 {
					ops = 3
				} else if x >= 5 {
					ops = 2
				}
				n := 1 + r.Intn(64)
				if x := r.Intn(20); x >= 15 {
					n = 401 + r.Intn(100)
				} else if x >= 8 {
					n = 65 + r.Intn(336)
				}
				k := 1
				if x := r.Intn(20); x >= 17 {
					k = 5 + r.Intn(8)
				} else if x >= 12 {
					k = 2 + r.Intn(3)
				}
				return modelCmd{Kind: cmdWrite, O: o, Ops: ops, Len: n, N: k}, st.LogLen[o]+k <= modelMaxLog
			}},
			{26, func() (modelCmd, bool) {
				dir := "both"
				if x := r.Intn(10); x == 8 {
					dir = "up"
				} else if x == 9 {
					dir = "down"
				}
				return modelCmd{Kind: cmdDeliver, N: 1 + r.Intn(4), Dir: dir}, true
			}},
			{6, func() (modelCmd, bool) {
				// A big burst to a starved origin: starved channels fill their windows,
				// and together most of the connection's.
				o, ok := pick(func(o int) bool { return st.Starved[o] })
				k := 3 + r.Intn(6)
				return modelCmd{Kind: cmdWrite, O: o, Ops: 3, Len: 380 + r.Intn(121), N: k}, ok && st.LogLen[o]+k <= modelMaxLog
			}},
			{5, func() (modelCmd, bool) { return modelCmd{Kind: cmdSettle}, true }},
			{2, func() (modelCmd, bool) { return modelCmd{Kind: cmdQuiesce}, true }},
			{4, func() (modelCmd, bool) { return modelCmd{Kind: cmdReconnect}, true }},
			{6, func() (modelCmd, bool) {
				o, ok := pick(func(o int) bool { return st.Sub[o] && !st.Starved[o] })
				return modelCmd{Kind: cmdStarve, O: o}, ok && st.starvedCount() < modelMaxStarved
			}},
			{5, func() (modelCmd, bool) {
				o, ok := pick(func(o int) bool { return st.Starved[o] })
				return modelCmd{Kind: cmdUnstarve, O: o}, ok
			}},
			{6, func() (modelCmd, bool) { return modelCmd{Kind: cmdDrop, O: relayed()}, true }},
			{6, func() (modelCmd, bool) {
				return modelCmd{Kind: cmdCorrupt, O: relayed(), Safe: r.Intn(2) == 0, Pos: r.Intn(4096), Bit: r.Intn(8)}, true
			}},
			{3, func() (modelCmd, bool) {
				o, ok := pick(func(o int) bool { return !st.Sub[o] })
				return modelCmd{Kind: cmdSubscribe, O: o}, ok
			}},
			{2, func() (modelCmd, bool) {
				o, ok := pick(func(o int) bool { return st.Sub[o] })
				return modelCmd{Kind: cmdUnsubscribe, O: o}, ok
			}},
		}
		total := 0
		for _, c := range choices {
			total += c.w
		}
		for {
			x := r.Intn(total)
			for _, c := range choices {
				if x < c.w {
					if cmd, ok := c.f(); ok {
						return gopter.NewGenResult(cmd, gopter.NoShrinker)
					}
					break
				}
				x -= c.w
			}
		}
	}
}

var modelCommands = &commands.ProtoCommands{
	NewSystemUnderTestFunc: func(s commands.State) commands.SystemUnderTest { return newModelSystem(s.(modelState).Init) },
	InitialStateGen:        genModelInit,
	GenCommandFunc:         genModelCmd,
}

// ---- the system: two nodes and the pipe ----

type pendingDrop struct {
	o   int
	ch  uint32
	seq uint64
}

type corruptArm struct {
	safe     bool
	pos, bit int
}

type expectedDivergence struct {
	armed bool
	seq   uint64
}

// modelConn is one connection: a pair of sessions, what is in flight, and what each node
// and the pipe know about its channels.
type modelConn struct {
	p        *prototest.Pair
	r, s     *prototest.Side // the receiver node's and the sender node's sessions
	toS, toR [][]byte        // in flight: receiver to sender, sender to receiver
	rEv, sEv int             // events the nodes handled

	// The receiver node's channels (numbered as the session numbers them: 1, 2, ... in
	// subscription order).
	nextCh uint32
	openIn [nOrigins]uint32

	// What the sender session was told (SUBSCRIBE, CURSOR delivered to it): per channel,
	// its origin and the subscriber's highest position. No DATA at or below may follow.
	known       map[uint32]uint64
	knownOrigin map[uint32]int
	lastSent    map[uint32]uint64 // the last DATA seq sent on each channel

	// The sender node's serve loop.
	serveOpen [nOrigins]bool
	serveNext [nOrigins]uint64

	// The pipe: the receiver's latest grants (channel 0: the connection), the bytes dropped
	// in flight, and drops the receiver must detect as a gap.
	grant   map[uint32]uint64
	leak    map[uint32]uint64
	pending []pendingDrop

	// Injected corruptions in progress.
	expectClose wire.Code
	expectDiv   [nOrigins]expectedDivergence

	// Events counted, to compare with the sessions' Stats.
	rGaps, rDivs, sResends, sDivs uint64
}

type modelSystem struct {
	init       modelInit
	logs       [nOrigins][]prototest.Entry // the sender node's logs
	applied    [nOrigins][]prototest.Entry // the receiver node's store
	backlog    [nOrigins][]prototest.Entry // handed over on a starved channel: not applied, not acknowledged
	sub        [nOrigins]bool
	starved    [nOrigins]bool
	armDrop    [nOrigins]bool
	armCorrupt [nOrigins]*corruptArm
	c          *modelConn
	conns      int

	step int
	cmd  string
	viol []string
}

// modelCoverage counts what the runs of a test exercised.
type modelCoverageCounts struct {
	sequences, commands, conns, reconnects                     int
	writes, delivered, dataFrames                              int
	drops, dropsConsequential, dropsDetected, tailDropHeals    int
	corruptions, corruptDivergence, corruptStale, corruptClose int
	starvedSettles, settles, quiesces, converged, maxHeld      int
	maxHeldBack, twoStarvedSettles, fullWindowSettles          int
}

var modelCoverage modelCoverageCounts

func newModelSystem(in modelInit) *modelSystem {
	m := &modelSystem{init: in}
	modelCoverage.sequences++
	for o, oi := range in.O {
		m.logs[o] = prototest.Chain(mOrigin[o], oi.Len, oi.Ops, oi.VLen)
		if o != oRecv {
			m.applied[o] = append([]prototest.Entry(nil), m.logs[o][:oi.Store]...)
			m.sub[o] = oi.Sub
		}
	}
	m.connect()
	return m
}

func (m *modelSystem) violate(format string, args ...any) {
	conn := 0
	if m.c != nil {
		conn = m.conns
	}
	m.viol = append(m.viol, fmt.Sprintf("step %d %s, connection %d: ", m.step, m.cmd, conn)+fmt.Sprintf(format, args...))
}

func (m *modelSystem) logLens() [nOrigins]int {
	var n [nOrigins]int
	for o := range m.logs {
		n[o] = len(m.logs[o])
	}
	return n
}

// position is the receiver node's durable position in an origin: its store.
func (m *modelSystem) position(o int) vector.Entry {
	e := vector.Entry{Origin: mOrigin[o], Seq: uint64(len(m.applied[o]))}
	if n := len(m.applied[o]); n > 0 {
		e.Hash = m.applied[o][n-1].Hash
	}
	return e
}

// handed is the receiver's channel position: applied plus held back.
func (m *modelSystem) handed(o int) uint64 { return uint64(len(m.applied[o]) + len(m.backlog[o])) }

func backlogBytes(es []prototest.Entry) int {
	n := 0
	for _, e := range es {
		n += protocol.DataFrameSize(len(e.Raw))
	}
	return n
}

func hlcOf(e prototest.Entry) wire.HLC {
	v, err := wire.ParseTxn(e.Raw)
	if err != nil {
		panic(err)
	}
	return v.HLC
}

func errCode(err error) wire.Code {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return ""
}

// ---- connecting ----

func (m *modelSystem) connect() {
	rc := prototest.ConfigV2(wire.RoleDialer, "recv", 1)
	sc := prototest.ConfigV2(wire.RoleListener, "send", 2)
	rc.Limits, sc.Limits = modelLimits, modelLimits
	c := &modelConn{known: map[uint32]uint64{}, knownOrigin: map[uint32]int{}, lastSent: map[uint32]uint64{},
		grant: map[uint32]uint64{}, leak: map[uint32]uint64{}}
	var err error
	if m.init.RecvDialer {
		c.p, err = prototest.NewPair(rc, sc)
		if err == nil {
			c.r, c.s = c.p.D, c.p.L
		}
	} else {
		rc.Role, sc.Role = wire.RoleListener, wire.RoleDialer
		c.p, err = prototest.NewPair(sc, rc)
		if err == nil {
			c.r, c.s = c.p.L, c.p.D
		}
	}
	if err != nil {
		m.violate("NewPair: %v", err)
		return
	}
	m.c = c
	m.conns++
	modelCoverage.conns++
	c.p.Pump(10)
	for _, sd := range []*prototest.Side{c.r, c.s} {
		if sd.S.State() != protocol.StateEstablished || sd.S.Handshake().Version != 2 {
			m.violate("handshake: state %v version %d err %v", sd.S.State(), sd.S.Handshake().Version, sd.S.Err())
		}
	}
	c.rEv, c.sEv = len(c.r.Events), len(c.s.Events)
	var heads []wire.Head
	for o := range mOrigin {
		if err := c.s.S.SetOriginName(mOrigin[o], mName[o]); err != nil {
			m.violate("SetOriginName: %v", err)
		}
		if n := len(m.logs[o]); n > 0 {
			heads = append(heads, wire.Head{Origin: mOrigin[o], Seq: uint64(n), HLC: hlcOf(m.logs[o][n-1])})
		}
	}
	if len(heads) > 0 {
		if err := c.s.S.V2().AdvertiseHeads(heads); err != nil {
			m.violate("AdvertiseHeads: %v", err)
		}
	}
	var vec []vector.Entry
	var os []int
	for o := oSend; o < nOrigins; o++ {
		if m.sub[o] {
			vec = append(vec, m.position(o))
			os = append(os, o)
		}
	}
	m.subscribe(vec, os)
	m.runSender()
	m.runReceiver()
}

// subscribe opens channels from the store's positions.
func (m *modelSystem) subscribe(vec []vector.Entry, os []int) {
	if len(vec) == 0 {
		return
	}
	c := m.c
	if err := c.r.S.V2().Subscribe(vec); err != nil {
		m.violate("SubscribeOrigins(%v): %v", os, err)
		return
	}
	for _, o := range os {
		c.nextCh++
		c.openIn[o] = c.nextCh
	}
}

// closeIn forgets the receiver's channel of an origin: what it held back is not durable and
// is dropped; drops on it can no longer be detected.
func (m *modelSystem) closeIn(o int) {
	c := m.c
	ch := c.openIn[o]
	c.openIn[o] = 0
	m.backlog[o] = nil
	c.pending = dropPending(c.pending, func(pd pendingDrop) bool { return pd.ch == ch })
}

func dropPending(ps []pendingDrop, f func(pendingDrop) bool) []pendingDrop {
	out := ps[:0]
	for _, p := range ps {
		if !f(p) {
			out = append(out, p)
		}
	}
	return out
}

func (m *modelSystem) reconnect() {
	modelCoverage.reconnects++
	for o := range m.backlog {
		m.backlog[o] = nil
	}
	m.c = nil
	m.connect()
}

// ---- the nodes ----

// runReceiver takes the receiver session's output and runs the receiver node on its events
// until it has nothing more to do.
func (m *modelSystem) runReceiver() {
	c := m.c
	for {
		m.drainReceiver()
		if c.rEv == len(c.r.Events) {
			return
		}
		evs := c.r.Events[c.rEv:]
		c.rEv = len(c.r.Events)
		m.receiverNode(evs)
	}
}

func (m *modelSystem) receiverNode(evs []protocol.Event) {
	c := m.c
	closedLater := func(i, o int) bool {
		for _, e := range evs[i+1:] {
			if e.Kind == protocol.EventClosed || (e.Kind == protocol.EventDivergence && originIndex(e.Origin) == o) {
				return true
			}
		}
		return false
	}
	for i, e := range evs {
		o := originIndex(e.Origin)
		switch e.Kind {
		case protocol.EventTxn:
			m.handOver(o, e, closedLater(i, o))
		case protocol.EventGap:
			c.rGaps++
			if o < 0 || c.openIn[o] == 0 {
				m.violate("gap on origin %v without an open channel", e.Origin)
				continue
			}
			if e.Expected != m.handed(o)+1 {
				m.violate("gap on %s expects %d, the channel is at %d", mName[o], e.Expected, m.handed(o))
			}
			found := false
			c.pending = dropPending(c.pending, func(pd pendingDrop) bool {
				hit := pd.o == o && pd.ch == c.openIn[o] && pd.seq == e.Expected
				found = found || hit
				return hit
			})
			if !found {
				m.violate("gap on %s at %d (entry %d arrived) without a dropped entry", mName[o], e.Expected, e.Txn.Seq)
				continue
			}
			modelCoverage.dropsDetected++
		case protocol.EventDivergence:
			c.rDivs++
			if o < 0 {
				m.violate("divergence of unknown origin %v", e.Origin)
				continue
			}
			switch exp := c.expectDiv[o]; {
			case e.ByPeer:
				m.violate("the honest sender reported a divergence on %s at %d: %v", mName[o], e.Seq, e.Err)
			case !exp.armed || exp.seq != e.Txn.Seq:
				m.violate("divergence on %s at %d not caused by an injected corruption (%v)", mName[o], e.Txn.Seq, e.Err)
			default:
				c.expectDiv[o] = expectedDivergence{}
				modelCoverage.corruptDivergence++
			}
			m.closeIn(o)
			if m.sub[o] { // a fresh channel from the store's position
				m.subscribe([]vector.Entry{m.position(o)}, []int{o})
			}
		case protocol.EventHeads:
			for _, h := range e.Heads.Heads {
				x := originIndex(h.Origin)
				if x < 0 || h.Seq > uint64(len(m.logs[x])) || h.HLC != hlcOf(m.logs[x][h.Seq-1]) {
					m.violate("head %v/%d/%d is not one of the sender's", h.Origin, h.Seq, h.HLC)
				}
			}
			if len(e.Heads.Withdrawn) > 0 {
				m.violate("heads withdrawn: %v", e.Heads.Withdrawn)
			}
		case protocol.EventOriginNamed:
			if o < 0 || e.Name != mName[o] {
				m.violate("origin %v named %q", e.Origin, e.Name)
			}
		case protocol.EventClosed:
			if c.expectClose == "" || e.Err == nil || e.Err.Code != c.expectClose {
				m.violate("the receiver's session closed: %v (expected: %q)", e.Err, c.expectClose)
			}
		default:
			m.violate("unexpected receiver event %v (origin %v)", e.Kind, e.Origin)
		}
	}
}

// handOver is the receiver node's apply loop for one EventTxn.
func (m *modelSystem) handOver(o int, e protocol.Event, closedLater bool) {
	c := m.c
	v := e.Txn
	if o < 0 || c.openIn[o] == 0 {
		m.violate("entry of origin %v without an open channel", e.Origin)
		return
	}
	if v.Seq != m.handed(o)+1 {
		m.violate("entry %s:%d handed over at channel position %d (applied twice, or out of order)", mName[o], v.Seq, m.handed(o))
		return
	}
	for _, pd := range c.pending {
		if pd.o == o && v.Seq >= pd.seq {
			m.violate("entry %s:%d handed over past the dropped, undetected entry %d", mName[o], v.Seq, pd.seq)
		}
	}
	if v.Seq > uint64(len(m.logs[o])) || !bytes.Equal(v.Raw(), m.logs[o][v.Seq-1].Raw) {
		m.violate("entry %s:%d handed over with bytes that are not the origin's", mName[o], v.Seq)
		return
	}
	ent := prototest.Entry{Seq: v.Seq, Raw: bytes.Clone(v.Raw()), Hash: v.Hash()}
	if m.starved[o] {
		m.backlog[o] = append(m.backlog[o], ent)
		return
	}
	m.apply(o, ent)
	if err := c.r.S.V2().Ack(mOrigin[o], v.Seq); err != nil && !closedLater {
		m.violate("AckOrigin(%s, %d): %v", mName[o], v.Seq, err)
	}
}

// apply puts an entry in the store: it must extend it.
func (m *modelSystem) apply(o int, e prototest.Entry) {
	pos := m.position(o)
	if e.Seq != pos.Seq+1 {
		m.violate("store of %s at %d applies %d", mName[o], pos.Seq, e.Seq)
		return
	}
	if v, err := wire.ParseTxn(e.Raw); err != nil || v.Prev != pos.Hash {
		m.violate("entry %s:%d does not extend the store (%v)", mName[o], e.Seq, err)
		return
	}
	m.applied[o] = append(m.applied[o], e)
}

// runSender runs the sender node: its events, then its serve loop, until it has nothing
// more to do; its output goes in flight.
func (m *modelSystem) runSender() {
	c := m.c
	for {
		m.drainSender() // collects the session's events too
		if c.sEv < len(c.s.Events) {
			evs := c.s.Events[c.sEv:]
			c.sEv = len(c.s.Events)
			m.senderNode(evs)
		}
		m.serve()
		m.drainSender()
		if c.sEv == len(c.s.Events) {
			return
		}
	}
}

func (m *modelSystem) senderNode(evs []protocol.Event) {
	c := m.c
	for _, e := range evs {
		o := originIndex(e.Origin)
		switch e.Kind {
		case protocol.EventSubscribed:
			switch {
			case o < 0 || o == oRecv:
				m.violate("the peer subscribed to origin %v", e.Origin)
			case c.serveOpen[o]:
				m.violate("%s subscribed twice", mName[o])
			case e.Seq > uint64(len(m.logs[o])) || (e.Seq > 0 && e.Hash != m.logs[o][e.Seq-1].Hash):
				m.violate("%s subscribed at %d, which the log does not hold", mName[o], e.Seq)
			default:
				c.serveOpen[o], c.serveNext[o] = true, e.Seq+1
			}
		case protocol.EventResend:
			c.sResends++
			if o < 0 || !c.serveOpen[o] {
				m.violate("resend of origin %v on no channel", e.Origin)
				continue
			}
			c.serveNext[o] = e.From
		case protocol.EventDivergence:
			c.sDivs++
			if !e.ByPeer {
				m.violate("the sender found its log diverged from the subscriber's: %v", e.Err)
			}
			if o >= 0 {
				c.serveOpen[o] = false
			}
		case protocol.EventUnsubscribed:
			if o >= 0 {
				c.serveOpen[o] = false
			}
		case protocol.EventCursor:
			if o < 0 || e.Seq == 0 || e.Seq > uint64(len(m.logs[o])) || e.Hash != m.logs[o][e.Seq-1].Hash {
				m.violate("cursor %v/%d is not a position of the log", e.Origin, e.Seq)
			}
		case protocol.EventCredit:
		default:
			m.violate("unexpected sender event %v (origin %v, err %v)", e.Kind, e.Origin, e.Err)
		}
	}
}

// serve sends, origin by origin, the entries each channel needs next, within its credit.
func (m *modelSystem) serve() {
	c := m.c
	for o := range mOrigin {
		for c.serveOpen[o] && c.serveNext[o] <= uint64(len(m.logs[o])) {
			e := m.logs[o][c.serveNext[o]-1]
			if c.s.S.V2().Credit(mOrigin[o]) < protocol.DataFrameSize(len(e.Raw)) {
				break
			}
			if err := c.s.S.V2().Send(e.Raw); err != nil {
				if errCode(err) == wire.CodeSendBufferFull {
					m.drainSender()
					continue
				}
				m.violate("Send(%s:%d) within credit: %v", mName[o], e.Seq, err)
				break
			}
			c.serveNext[o]++
		}
	}
}

// ---- the pipe ----

func decodeModelMessage(msg []byte) ([]wire.Decoded, *wire.Error) {
	return wire.DecodeMessage(msg, modelLimits.MaxMessage, modelLimits.MaxFrameBody)
}

// drainReceiver puts the receiver's output in flight, noting the credit it grants.
func (m *modelSystem) drainReceiver() {
	c := m.c
	for _, msg := range c.r.Drain() {
		frames, err := decodeModelMessage(msg)
		if err != nil {
			m.violate("the receiver sent a malformed message: %v", err)
		}
		for _, f := range frames {
			switch b := f.Value.(type) {
			case *wire.Subscribe:
				for _, e := range b.Entries {
					if o := originIndex(e.Origin); o < 0 || c.openIn[o] != e.Channel {
						m.violate("SUBSCRIBE of %v on channel %d, the node expected %v", e.Origin, e.Channel, c.openIn)
					}
					c.grant[e.Channel] = max(c.grant[e.Channel], e.Credit)
				}
			case *wire.Credit:
				for _, e := range b.Entries {
					c.grant[e.Channel] = max(c.grant[e.Channel], e.Limit)
				}
			case *wire.Data, *wire.Heads:
				m.violate("the receiver sent %T", b)
			}
		}
		c.toS = append(c.toS, msg)
	}
}

// drainSender puts the sender's output in flight, checking every DATA frame: on a channel
// the subscriber opened, above the subscriber's position as the sender knows it, the bytes
// of the origin's log with their chain hash.
func (m *modelSystem) drainSender() {
	c := m.c
	for _, msg := range c.s.Drain() {
		frames, err := decodeModelMessage(msg)
		if err != nil {
			m.violate("the sender sent a malformed message: %v", err)
		}
		for _, f := range frames {
			if _, ok := f.Value.(*wire.Data); !ok {
				continue
			}
			modelCoverage.dataFrames++
			o, ok := c.knownOrigin[f.Channel]
			txn := f.Body[wire.DataHeader:]
			v, perr := wire.ParseTxn(txn)
			switch {
			case !ok:
				m.violate("DATA on channel %d, which the sender was never told about", f.Channel)
			case perr != nil || v.Origin != mOrigin[o]:
				m.violate("DATA on the channel of %s carries another origin's entry (%v)", mName[o], perr)
			case v.Seq <= c.known[f.Channel]:
				m.violate("DATA %s:%d sent at or below the subscriber's position %d", mName[o], v.Seq, c.known[f.Channel])
			case v.Seq > uint64(len(m.logs[o])) || !bytes.Equal(txn, m.logs[o][v.Seq-1].Raw):
				m.violate("DATA %s:%d is not the log's entry", mName[o], v.Seq)
			case sha256.Sum256(txn) != wire.Hash(f.Body[:wire.DataHeader]):
				m.violate("DATA %s:%d carries a wrong chain hash", mName[o], v.Seq)
			}
			// A channel starts right after the subscriber's position, then goes on in seq
			// order or starts again lower (a resend).
			if last, ok := c.lastSent[f.Channel]; (!ok && v.Seq != c.known[f.Channel]+1) || (ok && v.Seq > last+1) {
				m.violate("DATA %s:%d on channel %d after %d (position %d)", mName[o], v.Seq, f.Channel, last, c.known[f.Channel])
			}
			c.lastSent[f.Channel] = v.Seq
		}
		c.toR = append(c.toR, msg)
	}
}

// toSender delivers the next message in flight to the sender, raising the CREDIT it carries
// by the bytes dropped in flight.
func (m *modelSystem) toSender() {
	c := m.c
	msg := c.toS[0]
	c.toS = c.toS[1:]
	modelCoverage.delivered++
	frames, err := decodeModelMessage(msg)
	if err != nil {
		m.violate("a malformed message to the sender: %v", err)
	}
	rewrite := false
	for _, f := range frames {
		switch b := f.Value.(type) {
		case *wire.Subscribe:
			for _, e := range b.Entries {
				c.known[e.Channel], c.knownOrigin[e.Channel] = e.Seq, originIndex(e.Origin)
			}
		case *wire.Cursor:
			for _, e := range b.Entries {
				c.known[e.Channel] = max(c.known[e.Channel], e.Seq)
			}
		case *wire.Credit:
			if len(c.leak) > 0 {
				for i := range b.Entries {
					b.Entries[i].Limit += c.leak[b.Entries[i].Channel]
				}
				rewrite = true
			}
		}
	}
	if rewrite {
		out, err := wire.EncodeMessage(frames)
		if err != nil {
			m.violate("re-encoding: %v", err)
		}
		msg = out
	}
	if err := c.s.S.Receive(c.p.Now, msg); err != nil {
		m.violate("sender Receive: %v", err)
	}
	m.checkHeld(c.s.S, "sender")
	m.runSender()
}

// toReceiver delivers the next message in flight to the receiver. A DATA frame of an origin
// with an armed drop or corruption is cut out of it: the frames before it are delivered,
// then it is dropped or delivered corrupted alone, then the rest (a message split
// between frames means the same to the receiver).
func (m *modelSystem) toReceiver() {
	c := m.c
	msg := c.toR[0]
	c.toR = c.toR[1:]
	modelCoverage.delivered++
	frames, err := decodeModelMessage(msg)
	if err != nil {
		m.violate("a malformed message to the receiver: %v", err)
	}
	target := func(f wire.Decoded) (int, bool) {
		d, ok := f.Value.(*wire.Data)
		if !ok {
			return 0, false
		}
		o := originIndex(d.Txn.Origin)
		return o, o >= 0 && (m.armDrop[o] || m.armCorrupt[o] != nil)
	}
	cut := false
	for _, f := range frames {
		_, t := target(f)
		cut = cut || t
	}
	if !cut {
		m.receive(msg, frames)
		return
	}
	var seg []byte
	var segFrames []wire.Decoded
	flush := func() bool {
		if len(seg) > 0 {
			m.receive(seg, segFrames)
			seg, segFrames = nil, nil
		}
		return m.c == c
	}
	for _, f := range frames {
		raw := msg[f.Offset : f.Offset+wire.HeaderSize+len(f.Body)]
		if o, t := target(f); t {
			if !flush() {
				return
			}
			if m.armDrop[o] {
				m.dropFrame(f, o)
			} else {
				m.corruptFrame(f, raw, o)
			}
			if m.c != c {
				return
			}
			continue
		}
		seg = append(seg, raw...)
		segFrames = append(segFrames, f)
	}
	flush()
}

// receive hands one input to the receiver and runs the receiver node.
func (m *modelSystem) receive(msg []byte, frames []wire.Decoded) {
	c := m.c
	if err := c.r.S.Receive(c.p.Now, msg); err != nil {
		m.violate("receiver Receive: %v", err)
	}
	m.checkHeld(c.r.S, "receiver")
	m.runReceiver()
	// A drop the receiver would have applied is detected by the next entry of its channel.
	for _, pd := range c.pending {
		for _, f := range frames {
			if d, ok := f.Value.(*wire.Data); ok && f.Channel == pd.ch && d.Txn.Seq > pd.seq {
				m.violate("dropped entry %s:%d not detected as a gap when %d arrived", mName[pd.o], pd.seq, d.Txn.Seq)
			}
		}
	}
	if c.r.S.State() == protocol.StateClosed || c.s.S.State() == protocol.StateClosed {
		if c.expectClose == "" || c.r.S.Err() == nil || c.r.S.Err().Code != c.expectClose {
			m.violate("a session closed: receiver %v, sender %v", c.r.S.Err(), c.s.S.Err())
		}
		m.reconnect()
		return
	}
	if c.expectClose != "" {
		m.violate("the receiver did not close with %s", c.expectClose)
		c.expectClose = ""
	}
	m.checkAccounting()
}

// dropFrame removes a DATA frame in flight. The receiver must detect it as a gap if it would
// have applied it, as soon as a later entry of its channel arrives. The pipe compensates the
// credit the frame took (see the file comment).
func (m *modelSystem) dropFrame(f wire.Decoded, o int) {
	c := m.c
	m.armDrop[o] = false
	modelCoverage.drops++
	d := f.Value.(*wire.Data)
	size := uint64(wire.HeaderSize + len(f.Body))
	open := c.openIn[o] == f.Channel
	c.leak[0] += size
	es := []wire.CreditEntry{{Channel: 0, Limit: c.grant[0]}}
	if open {
		c.leak[f.Channel] += size
		es = append(es, wire.CreditEntry{Channel: f.Channel, Limit: c.grant[f.Channel]})
		if d.Txn.Seq == m.handed(o)+1 {
			c.pending = append(c.pending, pendingDrop{o: o, ch: f.Channel, seq: d.Txn.Seq})
			modelCoverage.dropsConsequential++
		}
	}
	c.toS = append(c.toS, prototest.Frame(&wire.Credit{Entries: es})) // raised by toSender
}

// corruptFrame flips one bit of the transaction in a DATA frame and delivers it alone. The
// outcome follows SPEC.md's receive checks: an encoding that no longer parses closes the
// session (bad-txn or unsupported-txn); on a channel closed since, it is stale; an entry of
// another origin closes the session (unexpected-frame); otherwise the hash does not match:
// a divergence, never applied.
func (m *modelSystem) corruptFrame(f wire.Decoded, raw []byte, o int) {
	c := m.c
	arm := m.armCorrupt[o]
	m.armCorrupt[o] = nil
	modelCoverage.corruptions++
	b := bytes.Clone(raw)
	txnOff := wire.HeaderSize + wire.DataHeader
	off := arm.pos % (len(b) - txnOff)
	if arm.safe {
		off = 25 + arm.pos%8 // the HLC
	}
	b[txnOff+off] ^= 1 << arm.bit
	v, perr := wire.ParseTxn(b[txnOff:])
	open := c.openIn[o] == f.Channel
	before := c.r.S.Stats()
	start := len(c.r.Events)
	want := "divergence"
	switch {
	case perr != nil:
		want, c.expectClose = "close", wire.TxnErrorCode(perr)
	case !open:
		want = "stale"
	case v.Origin != mOrigin[o]:
		want, c.expectClose = "close", wire.CodeUnexpectedFrame
	default:
		c.expectDiv[o] = expectedDivergence{armed: true, seq: v.Seq}
	}
	m.receive(b, nil)
	switch want {
	case "close":
		modelCoverage.corruptClose++
		if m.c == c {
			m.violate("corrupted %s:%d (byte %d) did not close the session with %s", mName[o], v.Seq, off, c.expectClose)
		}
	case "stale":
		modelCoverage.corruptStale++
		if m.c == c && (c.r.S.Stats().Stale != before.Stale+1 || len(c.r.Events) != start) {
			m.violate("corrupted %s:%d on closed channel %d: stale %d->%d, events %v", mName[o], v.Seq, f.Channel,
				before.Stale, c.r.S.Stats().Stale, c.r.Events[start:])
		}
	default:
		if m.c == c && c.expectDiv[o].armed {
			m.violate("corrupted %s:%d (byte %d) was not reported as a divergence", mName[o], v.Seq, off)
			c.expectDiv[o] = expectedDivergence{}
		}
	}
}

// ---- checks ----

func (m *modelSystem) checkHeld(s *protocol.Session, who string) {
	h := s.HeldBytes()
	modelCoverage.maxHeld = max(modelCoverage.maxHeld, h)
	if h > modelHeldBound {
		m.violate("the %s holds %d bytes, above %d", who, h, modelHeldBound)
	}
}

// checkAccounting: with every output taken, the receiver holds exactly what its node holds
// back unacknowledged, each starved channel at most its window; the sender holds nothing;
// the sessions' counters agree with the events.
func (m *modelSystem) checkAccounting() {
	c := m.c
	if c == nil {
		return
	}
	m.drainReceiver()
	m.drainSender()
	want := 0
	for o := range m.backlog {
		n := backlogBytes(m.backlog[o])
		if n > modelLimits.MaxChannelBuffer {
			m.violate("%s holds back %d bytes, above its channel window", mName[o], n)
		}
		if n > 0 && (c.openIn[o] == 0 || !m.starved[o]) {
			m.violate("%s holds back entries without a starved, open channel", mName[o])
		}
		want += n
	}
	if h := c.r.S.HeldBytes(); h != want {
		m.violate("the receiver holds %d bytes; its node holds back %d unacknowledged", h, want)
	}
	if h := c.s.S.HeldBytes(); h != 0 {
		m.violate("the sender holds %d bytes with its output taken", h)
	}
	rs, ss := c.r.S.Stats(), c.s.S.Stats()
	if rs.Duplicates != 0 || rs.Gaps != c.rGaps || rs.ResendsRequested != c.rGaps || rs.Divergences != c.rDivs {
		m.violate("receiver stats %+v; events: gaps %d divergences %d", rs, c.rGaps, c.rDivs)
	}
	if ss.ResendsReceived != c.sResends || ss.Divergences != c.sDivs {
		m.violate("sender stats %+v; events: resends %d divergences %d", ss, c.sResends, c.sDivs)
	}
}

// settle delivers until nothing is in flight; the clock does not move.
func (m *modelSystem) settle() {
	for i := 0; ; i++ {
		if i > 50000 {
			m.violate("no quiescence after %d deliveries", i)
			return
		}
		moved := false
		if len(m.c.toS) > 0 {
			m.toSender()
			moved = true
		}
		if len(m.c.toR) > 0 {
			m.toReceiver()
			moved = true
		}
		if !moved {
			return
		}
	}
}

// tailDrop reports a drop the receiver cannot detect: nothing followed it on its channel.
func (m *modelSystem) tailDrop(o int) bool {
	for _, pd := range m.c.pending {
		if pd.o == o {
			return true
		}
	}
	return false
}

// checkCaughtUp: after a settle, every subscribed origin that is not starved holds the
// whole log, whatever the starved ones hold back — unless they hold so much of the
// connection window that the origin's next frame cannot fit in what is left.
func (m *modelSystem) checkCaughtUp() {
	starved, held, n := false, 0, 0
	for o := oSend; o < nOrigins; o++ {
		starved = starved || m.starved[o]
		held += backlogBytes(m.backlog[o])
		n += b2i(m.starved[o])
	}
	room := modelLimits.MaxSessionBuffer - held
	for o := oSend; o < nOrigins; o++ {
		if !m.sub[o] || m.starved[o] || m.tailDrop(o) {
			continue
		}
		if n := len(m.applied[o]); n != len(m.logs[o]) {
			if room < protocol.DataFrameSize(len(m.logs[o][n].Raw)) {
				modelCoverage.fullWindowSettles++
				continue
			}
			m.violate("%s is at %d of %d after a settle (starved: %v, channel %d, in flight %d/%d)",
				mName[o], n, len(m.logs[o]), m.starved, m.c.openIn[o], len(m.c.toS), len(m.c.toR))
		}
	}
	if starved {
		modelCoverage.starvedSettles++
	}
	if n > 1 {
		modelCoverage.twoStarvedSettles++
	}
	modelCoverage.maxHeldBack = max(modelCoverage.maxHeldBack, held)
}

func (m *modelSystem) converged() bool {
	for o := oSend; o < nOrigins; o++ {
		if m.sub[o] && len(m.applied[o]) != len(m.logs[o]) {
			return false
		}
	}
	return true
}

func (m *modelSystem) checkConverged() {
	for o := oSend; o < nOrigins; o++ {
		if !m.sub[o] {
			continue
		}
		if len(m.applied[o]) != len(m.logs[o]) {
			m.violate("not converged: %s at %d of %d", mName[o], len(m.applied[o]), len(m.logs[o]))
			continue
		}
		for i, e := range m.applied[o] {
			if e.Seq != uint64(i+1) || !bytes.Equal(e.Raw, m.logs[o][i].Raw) {
				m.violate("store of %s differs from the log at %d", mName[o], i+1)
				break
			}
		}
	}
	modelCoverage.converged++
}

// ---- executing commands ----

func (m *modelSystem) unstarve(o int) {
	m.starved[o] = false
	bl := m.backlog[o]
	m.backlog[o] = nil
	for _, e := range bl {
		m.apply(o, e)
	}
	if len(bl) > 0 {
		if err := m.c.r.S.V2().Ack(mOrigin[o], bl[len(bl)-1].Seq); err != nil {
			m.violate("AckOrigin(%s) on unstarve: %v", mName[o], err)
		}
	}
	m.runReceiver()
}

func (m *modelSystem) exec(cmd modelCmd) {
	modelCoverage.commands++
	if m.c == nil {
		m.violate("no connection")
		return
	}
	c := m.c
	o := cmd.O
	switch cmd.Kind {
	case cmdWrite:
		modelCoverage.writes += cmd.N
		n := len(m.logs[o])
		var prev wire.Hash
		if n > 0 {
			prev = m.logs[o][n-1].Hash
		}
		m.logs[o] = append(m.logs[o], prototest.ChainFrom(mOrigin[o], uint64(n), prev, cmd.N, cmd.Ops, cmd.Len)...)
		e := m.logs[o][len(m.logs[o])-1]
		if err := c.s.S.V2().AdvertiseHeads([]wire.Head{{Origin: mOrigin[o], Seq: e.Seq, HLC: hlcOf(e)}}); err != nil {
			m.violate("AdvertiseHeads: %v", err)
		}
		m.runSender()
	case cmdDeliver:
		for i := 0; i < cmd.N && m.c != nil; i++ {
			c := m.c
			if cmd.Dir == "both" {
				c.p.Now = c.p.Now.Add(100 * time.Millisecond)
				for _, s := range []*protocol.Session{c.r.S, c.s.S} {
					if err := s.Tick(c.p.Now); err != nil {
						m.violate("Tick: %v", err)
					}
				}
				m.runSender()
				m.runReceiver()
			}
			nS, nR := len(c.toS), len(c.toR)
			for j := 0; j < nS && cmd.Dir != "down" && m.c == c && len(c.toS) > 0; j++ {
				m.toSender()
			}
			for j := 0; j < nR && cmd.Dir != "up" && m.c == c && len(c.toR) > 0; j++ {
				m.toReceiver()
			}
		}
	case cmdSettle:
		modelCoverage.settles++
		m.settle()
		m.checkCaughtUp()
	case cmdQuiesce:
		modelCoverage.quiesces++
		m.armDrop, m.armCorrupt = [nOrigins]bool{}, [nOrigins]*corruptArm{}
		for x := range m.starved {
			if m.starved[x] {
				m.unstarve(x)
			}
		}
		m.settle()
		m.checkCaughtUp()
		if !m.converged() && len(m.c.pending) > 0 {
			// Only a reconnect resumes after an undetectable (tail) drop.
			modelCoverage.tailDropHeals++
			m.reconnect()
			m.settle()
		}
		m.checkConverged()
	case cmdReconnect:
		m.reconnect()
	case cmdStarve:
		m.starved[o] = true
	case cmdUnstarve:
		m.unstarve(o)
	case cmdDrop:
		m.armDrop[o] = true
	case cmdCorrupt:
		m.armCorrupt[o] = &corruptArm{safe: cmd.Safe, pos: cmd.Pos, bit: cmd.Bit}
	case cmdSubscribe:
		m.sub[o] = true
		m.subscribe([]vector.Entry{m.position(o)}, []int{o})
		m.runReceiver()
	case cmdUnsubscribe:
		if err := c.r.S.V2().Unsubscribe([]wire.OriginID{mOrigin[o]}); err != nil {
			m.violate("UnsubscribeOrigins(%s): %v", mName[o], err)
		}
		m.sub[o], m.starved[o] = false, false
		m.closeIn(o)
		m.runReceiver()
	default:
		m.violate("unknown command %q", cmd.Kind)
	}
}

// ---- parsing scripts (for regressions) ----

var modelTokenRE = regexp.MustCompile(`([a-z]+)\(([^)]*)\)`)

// parseModelScript reads an initial state and commands written as their String forms, in
// any surrounding text (such as gopter's report); lines starting with # are comments.
func parseModelScript(text string) (modelState, []commands.Command, error) {
	var b strings.Builder
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(strings.Join(strings.Fields(l), "")) // gopter breaks lines anywhere
		}
	}
	var st modelState
	var cmds []commands.Command
	seenInit := false
	for _, tok := range modelTokenRE.FindAllStringSubmatch(b.String(), -1) {
		args := map[string]string{}
		for _, kv := range strings.Split(tok[2], ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				args[k] = v
			}
		}
		num := func(k string) int {
			n, _ := strconv.Atoi(args[k])
			return n
		}
		if tok[1] == "init" {
			if seenInit {
				return st, nil, errors.New("two init(...): paste only ARG_0")
			}
			in := modelInit{RecvDialer: args["d"] == "1"}
			for o := range in.O {
				var oi originInit
				var sub int
				if _, err := fmt.Sscanf(args["o"+strconv.Itoa(o)], "%d/%d/%d/%d/%d", &oi.Len, &oi.Ops, &oi.VLen, &oi.Store, &sub); err != nil {
					return st, nil, fmt.Errorf("%s: origin %d: %v", tok[0], o, err)
				}
				oi.Sub = sub == 1
				in.O[o] = oi
			}
			st, seenInit = initialModelState(in), true
			continue
		}
		c := modelCmd{Kind: tok[1], O: num("o"), Ops: num("ops"), Len: num("len"), N: num("n"), Dir: args["dir"],
			Safe: args["safe"] == "1", Pos: num("pos"), Bit: num("bit")}
		switch c.Kind {
		case cmdWrite, cmdDeliver, cmdSettle, cmdQuiesce, cmdReconnect, cmdStarve, cmdUnstarve, cmdDrop, cmdCorrupt, cmdSubscribe, cmdUnsubscribe:
		default:
			return st, nil, fmt.Errorf("unknown command %s", tok[0])
		}
		cmds = append(cmds, c)
	}
	if !seenInit {
		return st, nil, errors.New("no init(...)")
	}
	return st, cmds, nil
}

// replayModel runs a script and returns its violations.
func replayModel(t *testing.T, script string) []string {
	t.Helper()
	st, cmds, err := parseModelScript(script)
	if err != nil {
		t.Fatal(err)
	}
	res := commands.Replay(newModelSystem(st.Init), st, cmds...)
	if res.Success() {
		return nil
	}
	if len(res.Labels) == 0 {
		return []string{"a precondition does not hold"}
	}
	return res.Labels
}

// ---- the tests ----

func modelParams(t *testing.T) (seed int64, runs, size int) {
	seed, runs, size = modelCISeed, 400, 60
	s := *flagModelSeed
	if s == "" {
		s = os.Getenv("PLAIT_MODEL_SEED")
	}
	switch s {
	case "":
	case "random":
		seed = time.Now().UnixNano()
	default:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("model seed %q: %v", s, err)
		}
		seed = n
	}
	pick := func(flagV int, env string, v *int) {
		if flagV > 0 {
			*v = flagV
		} else if e := os.Getenv(env); e != "" {
			n, err := strconv.Atoi(e)
			if err != nil || n <= 0 {
				t.Fatalf("%s=%q", env, e)
			}
			*v = n
		}
	}
	pick(*flagModelRuns, "PLAIT_MODEL_RUNS", &runs)
	pick(*flagModelSize, "PLAIT_MODEL_SIZE", &size)
	return seed, runs, size
}

// TestModel runs the commands model with the CI seed (or the one given).
func TestModel(t *testing.T) {
	seed, runs, size := modelParams(t)
	t.Logf("model seed %d, %d sequences of up to %d commands (replay: -model.seed=%d or PLAIT_MODEL_SEED=%d)", seed, runs, size, seed, seed)
	modelCoverage = modelCoverageCounts{}
	params := gopter.DefaultTestParametersWithSeed(seed)
	params.MinSuccessfulTests = runs
	params.MinSize = min(8, size)
	params.MaxSize = size
	params.MaxShrinkCount = 400
	props := gopter.NewProperties(params)
	props.Property("v2 subscriber and sender sessions against the node model", commands.Prop(modelCommands))
	props.TestingRun(t)
	if t.Failed() {
		t.Logf("model seed %d failed; replay with -model.seed=%d", seed, seed)
	}
	t.Logf("coverage: %+v", modelCoverage)
}

// TestModelRegressions replays the sequences pinned in testdata/model.
func TestModelRegressions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "model", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no regressions in testdata/model (%v)", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if v := replayModel(t, string(b)); v != nil {
				t.Fatalf("violations:\n%s", strings.Join(v, "\n"))
			}
		})
	}
}

// TestModelHarness replays a hand-written script and checks that the injections took effect,
// so that the model cannot pass vacuously.
func TestModelHarness(t *testing.T) {
	modelCoverage = modelCoverageCounts{}
	script := `init(d=1,o0=1/1/10/0/0,o1=3/1/40/1/1,o2=2/2/30/0/1,o3=0/1/20/0/1,o4=4/1/50/4/0)
		drop(o=1) write(o=1,ops=1,len=100,n=1) write(o=1,ops=1,len=100,n=1) settle()
		corrupt(o=2,safe=1,pos=3,bit=0) write(o=2,ops=1,len=20,n=1) settle()
		starve(o=3) write(o=3,ops=3,len=500,n=1) write(o=3,ops=3,len=500,n=1) write(o=3,ops=3,len=500,n=1)
		write(o=3,ops=3,len=500,n=1) write(o=3,ops=3,len=500,n=1) write(o=3,ops=3,len=500,n=1)
		write(o=1,ops=2,len=300,n=1) write(o=2,ops=2,len=300,n=1) settle()
		reconnect() subscribe(o=4) write(o=4,ops=1,len=5,n=1) deliver(n=3,dir=both) unstarve(o=3)
		drop(o=2) write(o=2,ops=1,len=10,n=1) deliver(n=1,dir=down) quiesce()`
	if v := replayModel(t, script); v != nil {
		t.Fatalf("violations:\n%s", strings.Join(v, "\n"))
	}
	cv := modelCoverage
	if cv.drops != 2 || cv.dropsConsequential != 2 || cv.dropsDetected != 1 || cv.tailDropHeals != 1 ||
		cv.corruptions != 1 || cv.corruptDivergence != 1 || cv.starvedSettles != 1 || cv.converged != 1 {
		t.Fatalf("the injections did not all take effect: %+v", cv)
	}
}

// ---- regressions of the core, found by the model ----
//
// Each of these fails on a core that grants credit again only when something is released;
// the core re-evaluates the grants after every receipt and grants whenever less than one
// largest frame is left.

// TestModelGrantAfterStarvedReceipt: the connection's credit was granted again only when
// something was released, but under credit.Grant's rule (remaining <= (window -
// buffered)/2) a grant can become due without any release: when entries of starved
// channels arrive and eat the remaining credit. Here "send" streams 7 entries (11382 bytes,
// acknowledged: no grant yet, 13194 bytes remain); then the starved relay-a and relay-b take
// 13008 bytes of it, leaving 186; nothing is released again, so Grant was never asked
// again, and send's 8th entry (217 bytes) waited forever although 11568 bytes of the
// connection window were free and Grant would have granted (2*186 <= 11568). Reduced by
// hand from TestModelGrantAfterStarvedReceiptFound; no drop, corruption or reconnect.
func TestModelGrantAfterStarvedReceipt(t *testing.T) {
	v := replayModel(t, `init(d=1,o0=0/1/10/0/0,o1=0/1/40/0/1,o2=0/2/30/0/1,o3=0/1/20/0/1,o4=0/1/50/0/0)
		starve(o=2) starve(o=3)
		write(o=1,ops=3,len=496,n=7) settle()
		write(o=2,ops=3,len=496,n=5) write(o=3,ops=3,len=496,n=5) settle()
		write(o=1,ops=1,len=100,n=1) settle()
		quiesce()`)
	if v != nil {
		t.Fatalf("violations:\n%s", strings.Join(v, "\n"))
	}
}

// TestModelGrantAfterStarvedReceiptFound is the sequence TestModel found (-model.seed=1
// -model.runs=1000 -model.size=80), as gopter shrank it: relay-c stopped at 12 of 14 beside
// three starved channels holding 21164 bytes; its sender had 333 bytes of connection credit
// for a frame of 426, and the receiver, with 3412 bytes of window free, granted nothing.
func TestModelGrantAfterStarvedReceiptFound(t *testing.T) {
	v := replayModel(t, `initialState=init(d=1,o0=0/1/197/0/0,o1=3/1/11/3/1,o2=5/2/287/5/1,o3=4/1/2
  01/2/1,o4=0/2/195/0/1) sequential=[drop(o=4) starve(o=3) starve(o=2)
   write(o=3,ops=3,len=461,n=3) unsubscribe(o=4)
   write(o=2,ops=3,len=405,n=6) drop(o=3) write(o=3,ops=1,len=491,n=1)
   deliver(n=4,dir=both) write(o=4,ops=1,len=124,n=11)
   write(o=4,ops=2,len=148,n=3) starve(o=1)
   corrupt(o=1,safe=0,pos=3346,bit=4) subscribe(o=4) deliver(n=1,dir=both)
   write(o=1,ops=3,len=436,n=8) settle()]`)
	if v != nil {
		t.Fatalf("violations:\n%s", strings.Join(v, "\n"))
	}
}

// TestModelGrantBelowOneFrame: when starved channels hold all but less than one largest
// frame of the connection window, the receiver granted only once the sender had used half
// of what was left: its other rule (less than one largest frame left) wanted a grant that
// made room for a largest frame, which could no longer be. Three starved channels hold
// 22764 of 24576 bytes; send's first entry (518 bytes) leaves 1294 of credit, its second
// needs 1638, and the receiver, with 1812 bytes free, never granted: 2*1294 > 1812, and 1812
// is less than a largest frame (2058).
func TestModelGrantBelowOneFrame(t *testing.T) {
	v := replayModel(t, `init(d=1,o0=0/1/10/0/0,o1=0/1/40/0/1,o2=0/2/30/0/1,o3=0/1/20/0/1,o4=0/1/50/0/1)
		starve(o=2) starve(o=3) starve(o=4)
		write(o=2,ops=3,len=496,n=6) write(o=3,ops=3,len=496,n=6) write(o=4,ops=3,len=496,n=4) settle()
		write(o=1,ops=1,len=400,n=1) settle() write(o=1,ops=3,len=500,n=1) settle()
		quiesce()`)
	if v != nil {
		t.Fatalf("violations:\n%s", strings.Join(v, "\n"))
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
