// Package sim owns the deterministic simulator: plait replica nodes (protocol/replica on
// the in-memory store) wired through an in-memory network on a virtual clock. Everything
// that varies (delays, nonces, faults, writes) comes from the events the caller schedules
// and from one seeded generator, so a run is reproduced exactly by its seed or script.
// Sessions are made through replica.Config.NewSession, so a cluster may run any build of
// the protocol core that implements replica.Session. The invariants it checks are in
// invariants.go.
//
// # Versions
//
// A node speaks protocol versions up to the one it is added or restarted with (AddNode,
// Restart; 0 is the newest, 3), and AddNodeBuild runs another build of the core, such as
// a frozen release under shells/wasm/host. Random mixes version-1 nodes with nodes at the
// newest version in a quarter of its runs, and restarts some of them at the other, as a
// rolling upgrade or downgrade does; runs with retention speak version 2 and later only,
// since a version-1 peer below a floor can take no base copy. The invariants tell the
// versions apart where the protocol does: a duplicate received fails a run only once
// every node is declared to speak version 2 or later (SetV2Only, which Random and Script
// call when no node ever spoke version 1).
//
// # The jobs, by file
//
//   - sim.go: Options, the Cluster, its nodes and links, the virtual clock and the event
//     queue, writes, crashes, power losses and restarts.
//   - invariants.go: the invariants, the store that records every apply to check them,
//     and the end state's checks (Converged, CheckConverged, Heal, Stabilize);
//     session.go: the sessions, watched inside a step.
//   - faults.go: links that drop or corrupt one entry; disk.go: a full disk and the
//     recovery after it; rewind.go: a backup restored and a reseed.
//   - random.go: Random, one seeded schedule over a drawn topology, and its Report;
//     script.go: Script, the commands of a scenario file.
//   - hubs.go: runs with fan-in hubs (a core, hubs, leaves that move between them) and
//     the oracle of their leaves' writes.
//   - placement.go: a table placed on some nodes; clustermap.go: cluster maps and requests
//     between nodes; links.go: links made one-way, a table excluded from one, a live
//     change, and the per-link checks of what crosses them.
package sim
