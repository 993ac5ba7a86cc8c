package replica_test

import (
	"bytes"
	"fmt"
	"time"

	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/store/memstore"
	"plait/protocol/store/storetest"
	"plait/protocol/wire"
)

// ExampleReplica is two nodes joined by memory, the way a shell joins them by a socket: A
// dials B, each replica's Output goes to the other's Receive until neither has anything to
// send, then a local write on A is read back from B's store.
func ExampleReplica() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := replica.Config{Secret: []byte("cluster secret")}
	// Each store holds its node's identity: an origin id (fixed here; a node draws a random
	// one when it creates its store) and a name.
	originA := storetest.Origin(1)
	storeA := memstore.New(store.Identity{Origin: originA, Name: "A"})
	storeB := memstore.New(store.Identity{Origin: storetest.Origin(2), Name: "B"})
	a, _ := replica.New(cfg, storeA)
	b, _ := replica.New(cfg, storeB)

	// One connection, a ConnID on each side: A dials B, B accepts.
	onA, _ := a.Open(now, wire.RoleDialer, "B", bytes.Repeat([]byte{1}, 16))
	onB, _ := b.Open(now, wire.RoleListener, "", bytes.Repeat([]byte{2}, 16))

	// deliver is the shell's socket loop: each message a replica has to send is received
	// by the other, until neither has anything left.
	deliver := func() {
		for moved := true; moved; {
			moved = false
			for _, out := range a.Output() {
				for _, m := range out.Messages {
					_ = b.Receive(now, onB, m)
					moved = true
				}
			}
			for _, out := range b.Output() {
				for _, m := range out.Messages {
					_ = a.Receive(now, onA, m)
					moved = true
				}
			}
		}
	}
	deliver()
	peer := b.Status(now).Peers[0]
	fmt.Printf("B: peer %s, version %d, %s\n", peer.Name, peer.Version, peer.State)

	// A local transaction on A: applied to A's store, then sent to B as one entry.
	put := wire.Op{Kind: wire.OpPut, Table: []byte("fruit"), Key: []byte("apple"), Value: []byte("red")}
	seq, _ := a.Write(now, []wire.Op{put})
	fmt.Printf("A: wrote seq %d\n", seq)
	deliver()

	rec, held, _ := storeB.Get([]byte("fruit"), []byte("apple"))
	fmt.Printf("B: fruit/apple held %v: %q, written on %s\n", held, rec.Value, b.Origin(rec.Origin).Name)
	fromA := b.Origin(originA)
	fmt.Printf("B: origin A applied to seq %d, taken from %s\n", fromA.AppliedSeq, fromA.SourcePeer)
	// Output:
	// B: peer A, version 4, streaming
	// A: wrote seq 1
	// B: fruit/apple held true: "red", written on A
	// B: origin A applied to seq 1, taken from A
}
