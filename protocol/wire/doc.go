// Package wire owns plait's bytes on the wire: the frame header and the registry of frame
// types, the CBOR control bodies (Core Deterministic Encoding, strict decoding), the binary
// transaction encoding with its per-origin hash chain, and the error codes with their classes.
//
// Everything here is frozen once released (protocol/SPEC.md, "Compatibility"): types, field
// keys, codes and layouts change only by additions. The package is pure: no I/O, no clock,
// no randomness; decoding never panics and reports every rejection as an *Error naming the
// frame type, the byte offset of the frame in its message and the error class.
//
// # Versions
//
// One build decodes the frames of every version it implements, so that a session speaks
// whichever one its handshake negotiates: the registry records each frame type's version
// (Version; 0 for frames of every version), and the session refuses a frame that does not
// belong on its connection's version. A version-3 connection keeps version 2's frames, and
// a version-4 connection those of versions 2 and 3; a key that version 3 adds to a
// version-2 body (HEADS' floors, PONG's time) is one an older build keeps as unknown.
// Version 4 is a draft until release 0.4 freezes it.
//
// # The jobs, by file
//
//   - frame.go: the frame header, the Reader of a message's frames and the registry of
//     frame types; message.go: a whole message decoded or encoded at once.
//   - cbor.go: the deterministic encoding and strict decoding of control bodies, their
//     nesting bounds, and the unknown keys a body keeps (Extra) so that a later version
//     may add keys.
//   - bodies.go: Body and the frames of every version: HELLO and AUTH (the handshake),
//     CLOSE, PING, PONG (its time on version 3) and ORIGIN; and version 1's SUBSCRIBE1,
//     TXN1 and ACK1.
//   - v2.go: version 2's per-origin channels (SUBSCRIBE, UNSUBSCRIBE, CURSOR, DATA, HEADS,
//     CREDIT, RESEND, DIVERGENCE), which version 3 keeps; v3.go: version 3's floors (HEADS
//     key 3) and PURGED; basecopy.go: version 3's base copy (COPY, COPYBEGIN, CHUNK,
//     COPYEND, COPYABORT); antientropy.go: version 3's RANGEDIGEST and RANGERECORDS behind
//     the capability anti-entropy; v4.go: version 4's cluster map, member entries and
//     requests (MAP, MEMBERS, REQUEST, RESPONSE), the canonical form of a map's JSON
//     document and the body that answers a request of kind map.
//   - txn.go: the transaction encoding every version carries, its zero-copy view and the
//     HLC timestamp; sum.go: the chain hash, SHA-256, which a shell may make faster.
//   - ids.go: origin ids, chain hashes and node names; errors.go: the error codes, their
//     classes and *Error (version 4's request codes among them, which never travel in a
//     CLOSE).
package wire
