// Package mutate owns the test-only switches that break one decision of the core on
// purpose, so that the simulator can show its invariants catch the breakage (a mutation
// check). Every switch is false in every build; only tests set them, and they must set
// them back.
package mutate

// BreakGapDetection makes a session accept an entry beyond the next expected seq as if it
// extended the chain: a receiver that no longer detects gaps.
var BreakGapDetection bool

// BreakRouting makes a replica resubscribe a moved origin from seq 0 instead of its own
// applied position: the legacy engine's re-streamed tail after a relay failover.
var BreakRouting bool

// ServeUnsynced makes a replica ignore Config.HoldUnsynced: it serves entries a power
// loss can still take back, so the origin may reissue their seqs with other content.
var ServeUnsynced bool

// BreakFailoverIsolation makes a replica that loses a connection resubscribe every other
// origin too: one origin's failover resetting the others' streams.
var BreakFailoverIsolation bool
