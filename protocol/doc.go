// Package protocol owns one replication connection between two plait nodes: a Session is
// the pure state machine of its handshake, liveness and streams. It does no I/O, reads no
// clock and starts no goroutine; time, nonces and what the caller has made durable are
// inputs, so the same inputs always give byte-identical outputs.
//
// # The usage loop
//
// A shell (the native node, the WASM guest, the simulator) owns the socket and drives one
// Session per connection, the way etcd-raft's Node is driven through Ready:
//
//	s, err := protocol.New(cfg)              // role, name, origin id, secret, versions, limits
//	s.Start(now, nonce)                      // queues HELLO
//	for {
//		rd := s.Ready()                      // take what the session produced
//		for _, m := range rd.Messages {      // write each message as one binary WebSocket
//			conn.Write(m)                    // message, in order
//		}
//		for _, ev := range rd.Events {       // act on events before the next call: a
//			handle(ev)                       // txn event's view aliases the received message
//		}
//		select {                             // then feed exactly one input
//		case msg := <-incoming:              // (do not read the socket while ReadPaused())
//			s.Receive(now, msg)
//		case <-timer(s.NextDeadline()):
//			s.Tick(now)
//		case cmd := <-commands:              // s.V2().Subscribe, s.V2().Ack, s.V1().Offer,
//			cmd(s)                           // SetOriginName, Close, ...
//		}
//	}
//
// Example (in example_test.go) runs that loop for two sessions joined by memory.
//
// # Four versions, and the jobs of a session
//
// The handshake negotiates the highest version both sides offer (SPEC.md, "Handshake").
// Version 1 has a state of its own (v1State, v1.go); versions 2 to 4 share the per-origin
// channels (channelState, v2.go), which version 3 extends with floors, base copies and
// anti-entropy; version 4 adds the requests in flight (v4State, v4.go). The commands of
// each are reached through V1, V2, V3 and V4, so that a caller sees the version at the call
// site; V2's and V3's are taken on later connections too, and a command of a version the
// connection does not speak is refused with invalid-state.
//
// Version 1 streams one interleaved log per connection, positioned by one scalar cursor in
// the sender's arrival order. The receiver checks every entry against its receive vector
// (V1().Subscribe's, raised by V1().Observe): an entry at or below it is a counted
// duplicate, one past it must extend the hash chain (otherwise divergence), one further is
// a counted gap that closes the session so that the caller resumes from its durable
// cursor. It has no credits: memory is bounded by the caller not reading while ReadPaused.
//
// Version 2 opens one channel per origin (V2().Subscribe, from the subscriber's cursor
// vector), each with its own credit and the connection's, and checks every entry against
// its channel's chain position: a duplicate is skipped and counted, a gap asks the peer to
// resend from the next expected seq, a divergence closes only that channel. Heads
// (V2().AdvertiseHeads) tell the peer how far this side holds each origin.
//
// Version 3 adds bounded history: floors (V3().AdvertiseFloors) and the purged answer
// below them, the base copy of a node that fell below every floor (basecopy.go), and
// anti-entropy's comparison of key ranges (antientropy.go); its PONG carries a time, from
// which the clock offset is measured (clock.go).
//
// Version 4 (a draft until release 0.4) carries the cluster map (V4().SendMap, EventMap)
// and member entries (V4().SendMembers, EventMembers) without holding them, and requests
// between nodes (V4().Request, Respond, Forget; EventRequest, EventResponse,
// EventRequestRefused), of which it keeps the ids: each request is answered once, ids
// increase, and Limits.MaxRequestsInFlight bounds those in flight each way, the session
// answering a request past it too-many-requests itself. Which map to keep, where to
// forward a request and when to give up on one are the caller's.
//
// The files by job: session.go (the Session, its states and Ready), receive.go (a
// received message, the handshake and the one table that dispatches every frame type,
// receivers), v1.go and v1_commands.go, v2.go and v2_commands.go, v3_commands.go,
// basecopy.go, antientropy.go, v4.go and v4_commands.go, clock.go (liveness times and the offset), events.go (what
// a session reports), output.go (framing what it sends), limits.go (its bounds),
// ackqueue.go (what is held until acknowledged), commands.go (what every version takes),
// clone.go (a copy of a session, for fuzzing).
//
// # Persist before ack, errors, bounds
//
// A received transaction is acknowledged to the peer only when the caller calls V1().Ack
// or V2().Ack after making it durable. Errors are values (*wire.Error) with a code, a
// class and, for a received frame, its type and offset; a protocol error closes the
// session with a CLOSE frame naming the code, and surfaces as an EventClosed. What a
// session holds for its caller is bounded by its Limits and reported by HeldBytes.
package protocol
