// Package host loads plait's protocol core compiled to WASM and runs it under wazero: it
// compiles a module once (with an optional compilation cache directory), gives each
// session its own instance, and moves batches across the ABI of shells/wasm/ABI.md.
//
// # Versions
//
// A host runs a module of every released ABI (1, 2 and 4; Module.ABIVersion) and this
// build's (5, a draft), so that the frozen releases of the core run beside this build:
// 0.1's speaks protocol version 1, 0.2's versions 1 and 2, 0.3's versions 1 to 3, this
// build's 1 to 4. Session adapts to the module's ABI: output after every command on ABI 1,
// kept until READY from ABI 2 (DeferReady), a TLS channel binding only from ABI 3, compact
// records from ABI 4. The protocol versions are the module's own: V1, V2, V3 and V4 pass
// their commands through (V4's Request answers the id its RESULT carries, ABI 5), and the
// module's session refuses a command of a version its connection does not speak; a module
// older than ABI 5 never negotiates version 4.
//
// # The jobs, by file
//
//   - host.go: Module, a core compiled once (Load), the imports every module is given
//     (WASI, and ABI 4's plait.sha256), and Instance, one instantiation that steps
//     batches, each call under a deadline (Call is that boundary, for hosts that
//     instantiate a core their own way).
//   - session.go: Session, a replica.Session whose every call is one batch to an instance
//     (or, NewDriverSession, to this process's abi.Driver), its queries answered from the
//     batch's STATUS record.
package host
