// Package clustermap owns the cluster map's document and the decisions made on it
// (docs/design.md §23, §24 and §25.2, docs/contract.md §22 and §23): its canonical form,
// the checks of a map the API is given and of one a peer sends, which of two maps a node
// keeps, the version-4 gate every whole-cluster feature asks, who carries a table, and
// where a key's lock lives.
//
// A map is a decision, not a record: of two maps the higher generation wins, by generation
// alone (Decide), so that nodes meeting maps in any order adopt alike. A member entry is a
// report of a fact that changes, and of two the higher stamp wins (Newer). The package is
// pure like the rest of protocol/: no I/O, no clock, no randomness, no goroutine; the
// canonical form is encoding/json's, which is deterministic, so that the native and the
// WASM builds compute the same bytes.
//
// # Versions
//
// Protocol version 4 carries the map and the member entries (protocol/SPEC.md, "Version
// 4"); a node at version 3 or older neither holds nor relays them.
//
// # The jobs, by file
//
//   - canonical.go: Canonical, the one form a map is stored, sent and answered in (sorted
//     keys, no insignificant space, numbers as written), refusing duplicate keys.
//   - clustermap.go: Map, Node and Error with its codes; Parse, the API's strict check of a
//     published document, and Decode, the check of a document received from a peer, which
//     keeps the fields this build does not know.
//   - placement.go: the document's placement checked (checkPlacement), and the one answer
//     to who carries what: Carries, Placed, and CheckTables, the rule of what a
//     transaction may touch.
//   - locks.go: the document's lock_homes and fenced_tables checked; Home, a key's lock
//     home by rendezvous hash; Fenced; CheckSuccessor, which refuses a map that unfences
//     a table.
//   - leafwindow.go: the document's leaf_window checked, and the rule that a later map
//     never lowers it (part of CheckSuccessor).
//   - url.go: the rule of a node's `api` URL, without net/url (outside the purity rule).
//   - decide.go: Decide, of two maps the one a node keeps; Member and Newer, the member
//     entries of protocol versions; BelowV4 and RequireV4, the version-4 gate.
package clustermap
