package prototest

import (
	"strconv"
	"time"

	"plait/protocol"
	"plait/protocol/handshake"
	"plait/protocol/wire"
)

// Origin returns a deterministic origin id for test node n (never all zero).
func Origin(n byte) wire.OriginID {
	var o wire.OriginID
	for i := range o {
		o[i] = n ^ byte(i*17+1)
	}
	return o
}

// Nonce returns a deterministic 16-byte nonce.
func Nonce(n byte) []byte {
	b := make([]byte, 16)
	for i := range b {
		b[i] = n + byte(i)
	}
	return b
}

// Epoch is the virtual time tests start at.
var Epoch = time.Unix(1_800_000_000, 0).UTC()

// Entry is one transaction of a chain: its encoding and chain hash.
type Entry struct {
	Seq  uint64
	Raw  []byte
	Hash wire.Hash
}

// Chain builds n valid transactions of one origin, each with ops operations putting
// valueLen-byte values, linked by their chain hashes.
func Chain(origin wire.OriginID, n, ops, valueLen int) []Entry {
	return ChainFrom(origin, 0, wire.Hash{}, n, ops, valueLen)
}

// ChainFrom continues a chain after seq (whose chain hash is prev).
func ChainFrom(origin wire.OriginID, seq uint64, prev wire.Hash, n, ops, valueLen int) []Entry {
	return ChainAt(uint64(Epoch.UnixMilli()), origin, seq, prev, n, ops, valueLen)
}

// ChainAt is ChainFrom with entry seq stamped base+seq milliseconds: a chain a real node
// takes must be stamped near its clock, not at the tests' virtual Epoch (a node holds back
// entries stamped beyond its bound on clock offset).
func ChainAt(base uint64, origin wire.OriginID, seq uint64, prev wire.Hash, n, ops, valueLen int) []Entry {
	out := make([]Entry, 0, n)
	for i := 0; i < n; i++ {
		seq++
		t := wire.Txn{Origin: origin, Seq: seq, HLC: wire.MakeHLC(base+seq, 0), Prev: prev}
		for j := 0; j < ops; j++ {
			v := make([]byte, valueLen)
			for k := range v {
				v[k] = byte(seq) + byte(j) + byte(k)
			}
			t.Ops = append(t.Ops, wire.Op{Kind: wire.OpPut, Table: []byte("t"),
				Key: []byte("k" + strconv.FormatUint(seq, 10) + "." + strconv.Itoa(j)), Value: v})
		}
		raw, err := t.Encode()
		if err != nil {
			panic(err)
		}
		v, _ := wire.ParseTxn(raw)
		prev = v.Hash()
		out = append(out, Entry{Seq: seq, Raw: raw, Hash: prev})
	}
	return out
}

// Config returns a valid session config for test node n, speaking every version this build
// implements.
func Config(role wire.Role, name string, n byte) protocol.Config {
	return protocol.Config{Role: role, Name: name, Origin: Origin(n), Secret: []byte("test-secret")}
}

// ConfigV3 is Config limited to protocol version 3, as a node run with --protocol-max 3
// (and as release 0.3): what the tests of version 3's frames and rules use.
func ConfigV3(role wire.Role, name string, n byte) protocol.Config {
	c := Config(role, name, n)
	c.MaxVersion = 3
	return c
}

// ConfigV2 is Config limited to protocol version 2, as a node run with --protocol-max 2:
// what the tests of version 2's frames and rules use, so that they test exactly version 2.
func ConfigV2(role wire.Role, name string, n byte) protocol.Config {
	c := Config(role, name, n)
	c.MaxVersion = 2
	return c
}

// ConfigV1 is Config limited to protocol version 1, as a node run with --protocol-max 1.
func ConfigV1(role wire.Role, name string, n byte) protocol.Config {
	c := Config(role, name, n)
	c.MaxVersion = 1
	return c
}

// Side is one session of a Pair with everything it produced.
type Side struct {
	S      *protocol.Session
	Events []protocol.Event // copies; Txn views are re-pointed at retained message copies
	Sent   [][]byte         // every message it sent
	queue  [][]byte         // taken from the session, not yet delivered
}

// Pair is two sessions joined by an in-memory pipe on a virtual clock.
type Pair struct {
	D, L *Side
	Now  time.Time
	// Tap, when set, sees every message in flight and returns what is delivered instead
	// (nil drops it).
	Tap func(from *Side, msg []byte) []byte
}

// NewPair creates and starts a dialer and a listener.
func NewPair(dc, lc protocol.Config) (*Pair, error) {
	d, err := protocol.New(dc)
	if err != nil {
		return nil, err
	}
	l, err := protocol.New(lc)
	if err != nil {
		return nil, err
	}
	p := &Pair{D: &Side{S: d}, L: &Side{S: l}, Now: Epoch}
	if err := d.Start(p.Now, Nonce(1)); err != nil {
		return nil, err
	}
	if err := l.Start(p.Now, Nonce(2)); err != nil {
		return nil, err
	}
	return p, nil
}

// Pump delivers messages both ways until neither side has anything to say, at most
// rounds times. Events are collected on each side.
func (p *Pair) Pump(rounds int) {
	for i := 0; i < rounds; i++ {
		moved := p.step(p.D, p.L)
		moved = p.step(p.L, p.D) || moved
		if !moved {
			return
		}
	}
}

func (p *Pair) step(from, to *Side) bool {
	from.take()
	msgs := from.queue
	from.queue = nil
	moved := false
	for i, m := range msgs {
		if to.S.ReadPaused() && to.S.State() != protocol.StateClosed {
			from.queue = append(msgs[i:len(msgs):len(msgs)], from.queue...) // held back, as a shell stops reading
			return moved
		}
		if p.Tap != nil {
			if m = p.Tap(from, m); m == nil {
				continue
			}
		}
		moved = true
		if to.S.State() == protocol.StateClosed {
			continue
		}
		_ = to.S.Receive(p.Now, m) // refused only on a closed session, whose state the test reads
		to.take()
	}
	return moved
}

// take moves the session's output into the side: events collected, messages queued.
func (s *Side) take() {
	rd := s.S.Ready()
	s.collect(rd.Events)
	s.Sent = append(s.Sent, rd.Messages...)
	s.queue = append(s.queue, rd.Messages...)
}

// Drain takes the side's output and returns its undelivered messages, which are then not
// delivered by Pump.
func (s *Side) Drain() [][]byte {
	s.take()
	q := s.queue
	s.queue = nil
	return q
}

func (s *Side) collect(evs []protocol.Event) {
	for _, e := range evs {
		if raw := e.Txn.Raw(); raw != nil {
			v, err := wire.ParseTxn(append([]byte(nil), raw...))
			if err != nil {
				panic("prototest: event with an unparsable txn: " + err.Error())
			}
			e.Txn = v
		}
		s.Events = append(s.Events, e)
	}
}

// Count returns how many events of kind the side saw.
func (s *Side) Count(kind protocol.EventKind) int {
	n := 0
	for _, e := range s.Events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// Last returns the last event of kind, or nil.
func (s *Side) Last(kind protocol.EventKind) *protocol.Event {
	for i := len(s.Events) - 1; i >= 0; i-- {
		if s.Events[i].Kind == kind {
			return &s.Events[i]
		}
	}
	return nil
}

// Frame encodes one frame, panicking on an encoding error (test data is valid by
// construction).
func Frame(b wire.Body) []byte {
	out, err := wire.AppendFrame(nil, 0, 0, b)
	if err != nil {
		panic(err)
	}
	return out
}

// HelloBody encodes a HELLO body.
func HelloBody(h *wire.Hello) []byte {
	b, err := h.AppendBody(nil)
	if err != nil {
		panic(err)
	}
	return b
}

// AuthFor returns the AUTH frame the side of role sender sends over two HELLO bodies.
func AuthFor(secret []byte, sender wire.Role, dialerHello, listenerHello []byte) []byte {
	return Frame(&wire.Auth{MAC: handshake.MAC(secret, sender, dialerHello, listenerHello)})
}

// RawFrame builds a frame from raw parts, for malformed input.
func RawFrame(t wire.Type, flags uint8, channel uint32, body []byte) []byte {
	out := wire.AppendHeader(nil, wire.Header{Type: t, Flags: flags, Channel: channel, Length: uint32(len(body))})
	return append(out, body...)
}
