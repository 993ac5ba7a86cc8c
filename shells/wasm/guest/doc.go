//go:build wasip1

// Command guest is plait's protocol core as a WASM reactor module (GOOS=wasip1,
// -buildmode=c-shared): one instance runs one Session, driven through the batch ABI of
// shells/wasm/ABI.md. Hosts run _initialize first, then call the exports of main.go.
//
// # Versions
//
// Built from this tree, the module exports ABI version 5 (abi.Version, a draft) and its
// sessions offer protocol versions 1 to 4. A frozen release's module is this command built at the
// release's commit (conformance/RELEASES.md): 0.1's exports ABI 1 and speaks protocol
// version 1, 0.2's ABI 2 and versions 1 and 2, 0.3's ABI 4 and versions 1 to 3.
//
// # The jobs, by file
//
// main.go holds them all: the exports abi_version, alloc and step, which run each batch in
// one abi.Driver; and the import plait.sha256 (ABI 4), the host's SHA-256, which computes
// every chain hash because Go's SHA-256 compiled to WASM has no hardware instructions.
package main
