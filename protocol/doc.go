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
//			handle(ev)                       // TxnReceived view aliases the received message
//		}
//		select {                             // then feed exactly one input
//		case msg := <-incoming:              // (do not read the socket while ReadPaused())
//			s.Receive(now, msg)
//		case <-timer(s.NextDeadline()):
//			s.Tick(now)
//		case cmd := <-commands:              // Subscribe, Offer, Ack, Observe, Close, ...
//			cmd(s)
//		}
//	}
//
// Persist before ack: a received transaction is acknowledged to the peer only when the
// caller calls Ack after making it durable. Errors are values (*wire.Error) with a code, a
// class and, for a received frame, its type and offset; a protocol error closes the session
// with a CLOSE frame naming the code, and surfaces as an EventClosed.
//
// Version 1 (this build) streams one interleaved log per connection, positioned by one
// scalar cursor in the sender's arrival order. The receiver checks every entry against
// its per-origin view (Subscribe's vector, raised by Observe): an entry at or below it is a
// counted duplicate, one past it must extend the hash chain (otherwise divergence), one
// further is a counted gap that closes the session so the caller resumes from its durable
// cursor. Version 1 has no credits: memory is bounded by the caller not reading while
// ReadPaused reports true.
package protocol
