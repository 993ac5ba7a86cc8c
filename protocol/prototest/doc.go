// Package prototest holds what tests of the protocol core share: valid transaction chains,
// a pair of sessions joined by an in-memory pipe, and raw frames for playing a peer by hand.
// It is pure like the core, so that tests of every layer can use it.
//
// # The jobs, by file
//
//   - prototest.go: deterministic origins, nonces and epoch; transaction chains (Chain,
//     ChainFrom, ChainAt); session configs speaking every version this build implements
//     (Config) or only up to version 2 or 1 (ConfigV2, ConfigV1), so that a test of one
//     version's rules runs exactly that version; Pair, a dialer and a listener on a
//     virtual clock; and raw frames (Frame, HelloBody, AuthFor, RawFrame).
//   - examples.go: the frame examples of SPEC.md read back as bytes (ParseFrameExamples),
//     so that tests hold the spec's hex to what the code encodes.
package prototest
