package host_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/replica"
	"plait/protocol/vector"
	"plait/protocol/wire"
	"plait/shells/wasm/host"
)

// recording is what a version-2 receiver was given in a run with a native sender: the
// handshake's messages, then messages of 100 DATA frames each (one origin, 1 record of 100
// bytes per entry), with the acknowledgement the receiver made after each.
type recording struct {
	handshake [][]byte
	data      [][]byte
	lastSeq   []uint64 // the seq to acknowledge after data[i]
	origin    wire.OriginID
	at        time.Time
}

const framesPerMessage = 100

// record runs a native sender and receiver through their handshake and messages
// messages of framesPerMessage entries, and keeps what the receiver received.
func record(b testing.TB, messages int) *recording {
	b.Helper()
	now := prototest.Epoch
	sender, err := protocol.New(prototest.Config(wire.RoleListener, "sender", 1))
	if err != nil {
		b.Fatal(err)
	}
	receiver, err := protocol.New(prototest.Config(wire.RoleDialer, "receiver", 2))
	if err != nil {
		b.Fatal(err)
	}
	rec := &recording{origin: prototest.Origin(7), at: now}
	toReceiver := func() [][]byte {
		var got [][]byte
		for _, m := range sender.Ready().Messages {
			if err := receiver.Receive(now, m); err != nil {
				b.Fatal(err)
			}
			got = append(got, append([]byte(nil), m...))
		}
		return got
	}
	toSender := func() {
		for _, m := range receiver.Ready().Messages {
			if err := sender.Receive(now, m); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := receiver.Start(now, prototest.Nonce(1)); err != nil {
		b.Fatal(err)
	}
	if err := sender.Start(now, prototest.Nonce(2)); err != nil {
		b.Fatal(err)
	}
	for range 4 {
		toSender()
		rec.handshake = append(rec.handshake, toReceiver()...)
	}
	if err := receiver.SetOriginName(rec.origin, "seven"); err != nil { // not used: the sender names it
		b.Log(err)
	}
	if err := sender.SetOriginName(rec.origin, "seven"); err != nil {
		b.Fatal(err)
	}
	if err := receiver.V2().Subscribe([]vector.Entry{{Origin: rec.origin}}); err != nil {
		b.Fatal(err)
	}
	toSender()
	rec.handshake = append(rec.handshake, toReceiver()...)
	chain := prototest.Chain(rec.origin, messages*framesPerMessage, 1, 100)
	for i := range messages {
		for _, e := range chain[i*framesPerMessage : (i+1)*framesPerMessage] {
			if err := sender.V2().Send(e.Raw); err != nil {
				b.Fatal(err)
			}
		}
		msgs := toReceiver()
		if len(msgs) != 1 {
			b.Fatalf("message %d: the sender sent %d messages", i, len(msgs))
		}
		rec.data = append(rec.data, msgs[0])
		seq := uint64((i + 1) * framesPerMessage)
		rec.lastSeq = append(rec.lastSeq, seq)
		if err := receiver.V2().Ack(rec.origin, seq); err != nil {
			b.Fatal(err)
		}
		toSender()
	}
	return rec
}

// replay makes a receiver with newSession and gives it the handshake of rec.
func (rec *recording) replay(b testing.TB, newSession func(protocol.Config) (replica.Session, error)) replica.Session {
	b.Helper()
	s, err := newSession(prototest.Config(wire.RoleDialer, "receiver", 2))
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(rec.at, prototest.Nonce(1)); err != nil {
		b.Fatal(err)
	}
	s.Ready()
	for _, m := range rec.handshake {
		if err := s.Receive(rec.at, m); err != nil {
			b.Fatal(err)
		}
		s.Ready()
	}
	if err := s.V2().Subscribe([]vector.Entry{{Origin: rec.origin}}); err != nil {
		b.Fatal(err)
	}
	s.Ready()
	return s
}

// BenchmarkReceive100Frames: one message of 100 DATA frames received (Receive, the
// acknowledgement, Ready: what the replica does per message), by the native core, by the
// native core behind the ABI (host.NewDriverSession: batches and CBOR records, no WASM)
// and by the current core under wazero through host.Session, with each call's deadline
// enforced (as a node runs it) and without (host.WithoutCallDeadline, as the test suites
// run it). ns/op is per message; the frame
// rate is in the custom metric.
func BenchmarkReceive100Frames(b *testing.B) {
	const messages = 200
	rec := record(b, messages)
	mod, _ := load(b)
	fast, err := host.Load(context.Background(), coreWasm, cacheDir, host.WithoutCallDeadline())
	if err != nil {
		b.Fatal(err)
	}
	defer fast.Close(context.Background())
	for _, c := range []struct {
		name       string
		newSession func(protocol.Config) (replica.Session, error)
	}{
		{"native", replica.NativeSession},
		{"native driver", func(cfg protocol.Config) (replica.Session, error) { return host.NewDriverSession(cfg) }},
		{"wasm", mod.NewSessionFunc(0)},
		{"wasm without call deadline", fast.NewSessionFunc(0)},
	} {
		b.Run(c.name, func(b *testing.B) {
			var s replica.Session
			next := messages
			// The label lets a CPU profile split the receivers' CPU time (go tool pprof
			// -tags): on a shared machine CPU per op is steadier than wall time per op.
			pprof.Do(context.Background(), pprof.Labels("receiver", c.name), func(context.Context) {
				for b.Loop() {
					if next == messages {
						b.StopTimer()
						s, next = rec.replay(b, c.newSession), 0
						b.StartTimer()
					}
					if err := s.Receive(rec.at, rec.data[next]); err != nil {
						b.Fatal(err)
					}
					if err := s.V2().Ack(rec.origin, rec.lastSeq[next]); err != nil {
						b.Fatal(err)
					}
					rd := s.Ready()
					if len(rd.Events) < framesPerMessage {
						b.Fatalf("%d events for %d frames", len(rd.Events), framesPerMessage)
					}
					next++
				}
			})
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*framesPerMessage), "ns/frame")
		})
	}
}

// BenchmarkModule: compiling the core (cold, and from a compilation cache a previous load
// filled) and instantiating it (with _initialize).
func BenchmarkModule(b *testing.B) {
	ctx := context.Background()
	b.Run("compile cold", func(b *testing.B) {
		for b.Loop() {
			m, err := host.Load(ctx, coreWasm, "")
			if err != nil {
				b.Fatal(err)
			}
			m.Close(ctx)
		}
	})
	b.Run("compile cached", func(b *testing.B) {
		dir := filepath.Join(b.TempDir(), "cache")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		m, err := host.Load(ctx, coreWasm, dir) // fills the cache
		if err != nil {
			b.Fatal(err)
		}
		m.Close(ctx)
		for b.Loop() {
			m, err := host.Load(ctx, coreWasm, dir)
			if err != nil {
				b.Fatal(err)
			}
			m.Close(ctx)
		}
	})
	b.Run("instantiate", func(b *testing.B) {
		m, err := host.Load(ctx, coreWasm, cacheDir)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close(ctx)
		for b.Loop() {
			in, err := m.Instantiate(ctx)
			if err != nil {
				b.Fatal(err)
			}
			in.Close(ctx)
		}
	})
}
