package protocol_test

import (
	"strconv"
	"testing"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// chainCache bounds the memory of the receive benchmarks: a chain this long is generated
// once, and the session is replaced (timer stopped) each time it is used up.
const chainCache = 50_000

type receiveBench struct {
	msgs [][]byte // one TXN1 frame per message, positions 1..len
	recv *protocol.Session
}

func newReceiveBench(b *testing.B, records, perMessage int) *receiveBench {
	b.Helper()
	chain := prototest.Chain(prototest.Origin(7), chainCache, records, 100)
	rb := &receiveBench{}
	var msg []byte
	for i, e := range chain {
		msg = wire.AppendHeader(msg, wire.Header{Type: wire.TypeTxn1, Length: uint32(8 + len(e.Raw))})
		msg = append(msg, byte(0), 0, 0, 0, 0, 0, 0, 0)
		pos := uint64(i + 1)
		for k := 0; k < 8; k++ {
			msg[len(msg)-1-k] = byte(pos >> (8 * k))
		}
		msg = append(msg, e.Raw...)
		if (i+1)%perMessage == 0 {
			rb.msgs = append(rb.msgs, msg)
			msg = nil
		}
	}
	return rb
}

// session returns a fresh established receiver, subscribed from position 0, to which the
// sender named the chain's origin.
func (rb *receiveBench) session(b *testing.B) *protocol.Session {
	dc := prototest.ConfigV1(wire.RoleDialer, "r", 1)
	dc.Limits.MaxUnackedBytes = 1 << 30
	p, err := prototest.NewPair(dc, prototest.ConfigV1(wire.RoleListener, "s", 2))
	if err != nil {
		b.Fatal(err)
	}
	p.Pump(10)
	if err := p.D.S.V1().Subscribe(0, nil); err != nil {
		b.Fatal(err)
	}
	if err := p.D.S.Receive(p.Now, prototest.Frame(&wire.Origin{Origin: prototest.Origin(7), Name: "seven"})); err != nil {
		b.Fatal(err)
	}
	if rd := p.D.S.Ready(); len(rd.Events) != 1 || rd.Events[0].Kind != protocol.EventOriginNamed {
		b.Fatalf("naming the origin: %v", p.D.S.Err())
	}
	return p.D.S
}

// BenchmarkSessionReceive is the session step per received data frame: Receive (header,
// checks against the receive vector, chain hash), Ready, and an Ack every 1000 frames.
func BenchmarkSessionReceive(b *testing.B) {
	for _, c := range []struct{ records, perMessage int }{{1, 1}, {1, 100}, {100, 1}} {
		b.Run("records="+strconv.Itoa(c.records)+"/frames-per-message="+strconv.Itoa(c.perMessage), func(b *testing.B) {
			rb := newReceiveBench(b, c.records, c.perMessage)
			s := rb.session(b)
			b.SetBytes(int64(len(rb.msgs[0]) / c.perMessage))
			b.ReportAllocs()
			b.ResetTimer()
			now := prototest.Epoch
			m := 0
			for i := 0; i < b.N; i += c.perMessage {
				if m == len(rb.msgs) {
					b.StopTimer()
					s, m = rb.session(b), 0
					b.StartTimer()
				}
				if err := s.Receive(now, rb.msgs[m]); err != nil {
					b.Fatal(err)
				}
				m++
				rd := s.Ready()
				if len(rd.Events) != c.perMessage || rd.Events[0].Kind != protocol.EventTxn {
					b.Fatalf("events %d, first %v, err %v", len(rd.Events), rd.Events[0].Kind, s.Err())
				}
				if pos := uint64(m * c.perMessage); pos%1000 < uint64(c.perMessage) {
					if err := s.V1().Ack(pos); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkSessionOffer is the sending side: Offer of a stored transaction encoding into
// messages packed up to the peer's limit, and Ready handing them over (Release recycles).
func BenchmarkSessionOffer(b *testing.B) {
	chain := prototest.Chain(prototest.Origin(7), 1000, 1, 100)
	p, err := prototest.NewPair(prototest.ConfigV1(wire.RoleDialer, "r", 1), prototest.ConfigV1(wire.RoleListener, "s", 2))
	if err != nil {
		b.Fatal(err)
	}
	p.Pump(10)
	_ = p.D.S.V1().Subscribe(0, nil)
	p.Pump(10)
	s := p.L.S
	if err := s.SetOriginName(prototest.Origin(7), "seven"); err != nil {
		b.Fatal(err)
	}
	s.Ready()
	b.SetBytes(int64(wire.HeaderSize + 8 + len(chain[0].Raw)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.V1().Offer(uint64(i+1), chain[i%len(chain)].Raw); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			for _, m := range s.Ready().Messages {
				s.Release(m)
			}
		}
	}
}

// BenchmarkSessionReceiveV2 is the version-2 session step per received DATA frame with 16
// channels active: each message holds one entry of every origin; the subscriber
// acknowledges every channel once per 64 messages (1,024 frames), and Ready sends the
// CURSOR and CREDIT frames that follow.
func BenchmarkSessionReceiveV2(b *testing.B) {
	const channels = 16
	for _, records := range []int{1, 100} {
		perChain := 4096 / records * 4 // bounds the cached messages to ~16 MB for 100 records
		perChain -= perChain % 64
		b.Run("channels=16/records="+strconv.Itoa(records), func(b *testing.B) {
			origins := make([]wire.OriginID, channels)
			chains := make([][]prototest.Entry, channels)
			for c := range origins {
				origins[c] = prototest.Origin(byte(100 + c))
				chains[c] = prototest.Chain(origins[c], perChain, records, 100)
			}
			var named []byte
			for c, o := range origins {
				named = append(named, prototest.Frame(&wire.Origin{Origin: o, Name: "o" + strconv.Itoa(c)})...)
			}
			// Message k carries entry k of every origin, on channels 1..16.
			msgs := make([][]byte, perChain)
			for k := range msgs {
				for c := range origins {
					h := wire.AppendHeader(nil, wire.Header{Type: wire.TypeData, Channel: uint32(c + 1), Length: uint32(wire.DataHeader + len(chains[c][k].Raw))})
					msgs[k] = append(append(append(msgs[k], h...), chains[c][k].Hash[:]...), chains[c][k].Raw...)
				}
			}
			fresh := func() *protocol.Session {
				p, err := prototest.NewPair(prototest.Config(wire.RoleDialer, "r", 1), prototest.Config(wire.RoleListener, "s", 2))
				if err != nil {
					b.Fatal(err)
				}
				p.Pump(10)
				vec := make([]vector.Entry, channels)
				for c, o := range origins {
					vec[c] = vector.Entry{Origin: o}
				}
				if err := p.D.S.V2().Subscribe(vec); err != nil {
					b.Fatal(err)
				}
				if err := p.D.S.Receive(p.Now, named); err != nil {
					b.Fatal(err)
				}
				p.D.S.Ready()
				return p.D.S
			}
			s := fresh()
			b.SetBytes(int64(len(msgs[0]) / channels))
			b.ReportAllocs()
			b.ResetTimer()
			now := prototest.Epoch
			k := 0
			for i := 0; i < b.N; i += channels {
				if k == perChain {
					b.StopTimer()
					s, k = fresh(), 0
					b.StartTimer()
				}
				if err := s.Receive(now, msgs[k]); err != nil {
					b.Fatal(err)
				}
				if rd := s.Ready(); len(rd.Events) != channels || rd.Events[0].Kind != protocol.EventTxn {
					b.Fatalf("%d events, err %v", len(rd.Events), s.Err())
				}
				k++
				if k%64 == 0 {
					for _, o := range origins {
						if err := s.V2().Ack(o, uint64(k)); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		})
	}
}
