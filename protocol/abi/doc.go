// Package abi owns the batch encoding of plait's WASM ABI (shells/wasm/ABI.md): commands to
// one Session go in as one batch, and everything the session answers comes back as one
// batch of records. The guest module and native hosts run the same Driver, so a native
// core and a WASM core fed identical batches return identical bytes.
//
// # Versions
//
// The ABI has versions of its own (Version; this build implements 5), frozen once
// released, which follow the protocol's: ABI 1 carries the commands every protocol version
// takes and those of protocol version 1 (SUBSCRIBE, OFFER, ACK, OBSERVE); ABI 2 adds protocol
// version 2's (0x0C–0x11) and READY; ABI 3 adds protocol version 3's (0x13–0x1A) and
// anti-entropy's (0x1B–0x1C); ABI 4 adds the compact records; ABI 5, a draft until release
// 0.4 with protocol version 4, adds version 4's commands (0x1D–0x21), the id a REQUEST
// was given in its RESULT, version 4's events and its bound on requests in flight. The ABI version says which
// commands a guest takes; which protocol versions its sessions offer is its build's
// (conformance/cmd/coreinfo prints both).
//
// # The jobs, by file
//
//   - abi.go: the opcodes, record kinds and limits; Batch, which a host writes commands
//     into; the messages of the CBOR payloads and records (ConfigMsg, ResultMsg, EventMsg,
//     StatusMsg and those they nest), which are the one table of the records' fields; and
//     Split, which cuts an output batch into records.
//   - commands.go: one row per session command, its payload's layout and the session
//     method it calls, shared by the host that writes it (Append) and the driver that
//     runs it.
//   - driver.go: Driver, which runs a batch against one Session and answers its records,
//     status last.
//   - event.go and mirror.go: the mappings, both ways, between the session's values
//     (Event, HandshakeInfo, Stats, Limits) and their messages.
//   - compact.go: the compact layout of RESULT, EVENT and STATUS (ABI 4) and its readers;
//     compact_gen.go: each message's writer and reader, generated from abi.go's structs by
//     tools/abigen (go generate).
package abi
