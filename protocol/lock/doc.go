// Package lock holds every lease decision of one lock home (docs/design.md §25): which
// request gets a key's lease and with which fencing token, who waits and in what order,
// when a lease ends at the home, whether a write's token is still the key's live lease, and
// when a restarted home or a home that newly homes a key may grant again. The replica only
// feeds it inputs and carries out its answers.
//
// Time is an input, read from the home's clock by the caller: the table never reads a clock,
// and it takes a reading earlier than one it was given as the later one, so nothing it
// ended comes back. Leases depend on clock rates, not offsets: the home keeps a lease of ttl
// for ttl·(1+ρ) from its grant (HomeTTL), and its holder stops at ttl·(1−ρ) from the moment
// its node sent the request (HolderDeadline), so within the drift bound ρ the holder has
// stopped before the home frees the key. Like the rest of protocol/, the package does no
// I/O, reads no clock, draws no random number and starts no goroutine; its outputs are a
// function of its inputs alone (a key's waiters, and the events of one input, come in a
// fixed order, never a map's), so the native and the WASM builds answer alike.
//
// # What it leaves to the replica
//
//   - which keys this node homes (the rendezvous hash over the map's lock_homes), and
//     routing a request to its key's home: the table answers only for keys the caller says
//     it homes, and is told at each new generation which keys it newly homes and their
//     previous homes (MoveHome), and which it no longer homes (MoveAway, which drops their
//     leases and waiters);
//   - asking the previous homes for their floors (FloorsWanted, Floor): a newly homed key
//     is granted only once the fence given covers its previous home's floor;
//   - the incarnation: raised and made durable in the store before New; the generation
//     given with each request: the adopted map's, which never goes down across a restart;
//   - the fence: the home's applied positions, given with every input that may grant;
//   - the version-4 gate, a map conflict (a home grants nothing while it knows of one),
//     the clock-offset guard being on, and the API's checks of names and sizes;
//   - acting on the answers: replying to requests (a queued one by the Event that carries
//     its Waiter id), calling Tick at Next, checking a write's token (Check, Confirm) when
//     it is taken and when the home applies it, and the release entry's replication;
//   - the counters' names outside (metrics, status).
//
// # The jobs, by file
//
//   - token.go: Token, its order (Compare), its text (String, ParseToken).
//   - config.go: Config and its bounds (Check), the codes, HomeTTL and HolderDeadline.
//   - table.go: Table: Acquire, Renew, Release, Confirm, Check, Tick, Next, MoveQuarantine,
//     MoveHome, Floor, FloorsWanted, PendingMoves, MoveAway, Stats.
//   - delegation.go: the home's side of a delegation (docs/design.md §25.9): Delegate,
//     RenewDelegation, Return, Delegations, DelegationOf (whose delegate answers for a
//     token), FloorOwed; an Acquire of a delegated key recalls it (Result.Recall).
//   - deputy.go: Deputy, the delegate's side: it grants, renews, releases and confirms the
//     leases of the keys delegated to its node, says when a delegation is due for renewal
//     (RenewDue), and gives a delegation back (Return).
//   - timers.go: the heap of the instants the table acts at (expiries and waits' ends).
package lock
