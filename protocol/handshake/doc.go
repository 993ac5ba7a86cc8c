// Package handshake owns the decisions of plait's handshake: which protocol versions this
// build implements, the negotiation of a version and capabilities from two HELLOs, and the
// MAC over both HELLOs that authenticates the peers and detects a tampered offer.
//
// It is pure: the session feeds it the HELLO bodies exactly as they crossed the wire.
//
// # Versions
//
// The handshake is the same at every version, so that the builds of any two releases
// learn which version they share: this build implements versions 1 to 4 (Implemented), a
// node advertises that range narrowed by its configuration (Clamp), and the connection
// runs the highest version both ranges hold (Negotiate). The capability tls-exporter,
// which binds the MAC to the TLS channel, is offered at any version.
//
// # The jobs, by file
//
// handshake.go holds them all: the version ranges (Range, Implemented, Clamp), the
// negotiation of the version and the capabilities (Negotiate, WithCap), and the MAC, plain
// or bound to a TLS channel (MAC, BoundMAC, Verify, VerifyBound, CapTLSExporter and the
// exporter's label).
package handshake
