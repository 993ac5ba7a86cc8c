// Package wire owns plait's bytes on the wire: the frame header and the registry of frame
// types, the CBOR control bodies (Core Deterministic Encoding, strict decoding), the binary
// transaction encoding with its per-origin hash chain, and the error codes with their classes.
//
// Everything here is frozen once released (protocol/SPEC.md, "Compatibility"): types, field
// keys, codes and layouts change only by additions. The package is pure: no I/O, no clock,
// no randomness; decoding never panics and reports every rejection as an *Error naming the
// frame type, the byte offset of the frame in its message and the error class.
package wire
