package protocol_test

import (
	"fmt"
	"time"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Example is a session's life on both ends of one connection, joined by memory: the
// handshake (version 3, the newest), a channel from the subscriber's position, one entry sent, received,
// acknowledged after it is "durable", and an orderly close.
func Example() {
	now := time.Unix(1_800_000_000, 0).UTC()
	a := prototest.Origin(1)
	dialer, _ := protocol.New(protocol.Config{Role: wire.RoleDialer, Name: "B", Origin: prototest.Origin(2), Secret: []byte("s")})
	listener, _ := protocol.New(protocol.Config{Role: wire.RoleListener, Name: "A", Origin: a, Secret: []byte("s")})
	_ = dialer.Start(now, prototest.Nonce(1))
	_ = listener.Start(now, prototest.Nonce(2))

	// deliver moves each side's output to the other while either has some, and prints the
	// events: what a shell's loop does with a socket.
	deliver := func() {
		for dialer.HasReady() || listener.HasReady() {
			for _, p := range []struct {
				name     string
				from, to *protocol.Session
			}{{"B", dialer, listener}, {"A", listener, dialer}} {
				rd := p.from.Ready()
				for _, ev := range rd.Events {
					switch ev.Kind {
					case protocol.EventHandshake:
						fmt.Printf("%s: %s, version %d with %s\n", p.name, ev.Kind, ev.Handshake.Version, ev.Handshake.PeerName)
					case protocol.EventTxn:
						fmt.Printf("%s: %s seq %d\n", p.name, ev.Kind, ev.Txn.Seq)
						// Apply it durably here, then acknowledge (persist before ack).
						_ = p.from.V2().Ack(ev.Txn.Origin, ev.Txn.Seq)
					case protocol.EventSubscribed, protocol.EventCursor:
						fmt.Printf("%s: %s origin %s at seq %d\n", p.name, ev.Kind, ev.Origin.String()[:4], ev.Seq)
					case protocol.EventClosed:
						fmt.Printf("%s: %s: %s (by peer %v)\n", p.name, ev.Kind, ev.Err.Code, ev.ByPeer)
					}
				}
				for _, m := range rd.Messages {
					_ = p.to.Receive(now, m)
				}
			}
		}
	}
	deliver()

	// B subscribes to A's origin from seq 0; A names its origin and sends its first entry.
	_ = dialer.V2().Subscribe([]vector.Entry{{Origin: a}})
	deliver()
	entry := prototest.Chain(a, 1, 1, 8)[0]
	_ = listener.SetOriginName(a, "A")
	_ = listener.V2().Send(entry.Raw)
	deliver()

	_ = dialer.Close(wire.CodeGoingAway, "done")
	deliver()
	// Output:
	// B: handshake, version 4 with A
	// A: handshake, version 4 with B
	// A: subscribed origin 0013 at seq 0
	// B: txn seq 1
	// A: cursor origin 0013 at seq 1
	// B: closed: going-away (by peer false)
	// A: closed: going-away (by peer true)
}
