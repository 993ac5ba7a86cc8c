// Package vector owns the cursor vector: for each origin, the highest sequence number a node
// applied and that entry's chain hash. A version-2 subscriber sends it whole when it
// (re)subscribes and as deltas afterwards; a sender resumes each origin's channel right
// after the subscriber's entry. The algebra here (merge, delta, apply) is what both sides
// and the replica rely on, and is proved by property tests.
//
// # Versions
//
// Versions 2 and 3 exchange it (SUBSCRIBE and CURSOR; on version 3 COPYBEGIN gives the
// vector a base copy's snapshot covers). Version 1 positions its stream by one scalar
// cursor instead, and keeps a vector on the receiving side only, to check each entry
// against what was applied of its origin. A store's cursors are a vector at every version.
//
// # The jobs, by file
//
// vector.go holds them all: Entry, one origin's position; Vector and its algebra (Advance,
// Merge, Delta, Apply, Equal); and Encode and Decode, a vector in CBOR.
package vector
