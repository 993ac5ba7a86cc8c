// Package credit owns the flow control of versions 2 and 3, one window at a time, as QUIC
// does: credit is an absolute offset in the stream of DATA bytes (and, on version 3, the
// CHUNK bytes of a copy channel), headers included, that a receiver has allowed.
// Grants are idempotent and never decrease, an overrun is an error, and a
// receiver grants again as soon as the sender has used half of what it could be allowed
// now, so a sender never waits for a "blocked" signal. "What it could be allowed" is the
// window less what the receiver still holds, not the whole window: bytes held by a stalled
// consumer (a starved channel, within the connection's window) must not stop the grants the
// others need. Frames are atomic (a transaction is never split), so a receiver also grants
// whenever less than one largest frame of credit is left: the sender may be waiting for room
// for its next frame, whatever its size. A session keeps one window per channel and one for
// the connection, and asks for a grant after every change (bytes received or released).
//
// Version 1 has no credit: its receiver bounds memory by not reading (protocol's
// ReadPaused).
//
// # The jobs, by file
//
// credit.go holds them both: the receiving side of a window (Receiver: what it allowed,
// received and released, and when to grant again) and the sending side (Sender: what it
// may still send).
package credit
