package replica

import (
	"slices"
	"time"

	"plait/protocol"
	"plait/protocol/handshake"
	"plait/protocol/wire"
)

// Status is every field of /v1/status (docs/contract.md §8) that is not about sockets: the shell
// adds each peer's URL, its dialing state (connecting, backoff) and reconnects.
type Status struct {
	Node     NodeStatus
	Origins  []OriginStatus // sorted by origin id, the local origin included
	Peers    []PeerStatus   // open connections, by ConnID
	Counters Counters
	// Refusals are the newest refusals, oldest first (at most MaxRefusals); RefusedByCode
	// and ErrorsByCode count refusals and connection errors by code, sorted by code.
	Refusals      []Refusal
	RefusedByCode []CodeCount
	ErrorsByCode  []CodeCount
	// AntiEntropyConflicts are the newest equal-version conflicts anti-entropy flagged,
	// oldest first (at most MaxAntiEntropyConflicts).
	AntiEntropyConflicts []AntiEntropyConflict
	// ClusterMap is the cluster map this node holds and what it knows of members'
	// versions (clustermap.go).
	ClusterMap MapStatus
	// NamedFeeds are the named feeds, sorted by name (namedfeeds.go).
	NamedFeeds []NamedFeedStatus
	// Hub is this node's hub when it is a leaf (Config.Hub; nil otherwise), and Leaves its
	// leaves when it is a hub (Config.MaxLeaves > 0; nil otherwise): hub.go.
	Hub    *HubStatus
	Leaves *LeavesStatus
	// Traffic is every peer's traffic since the replica started, over all its
	// connections, sorted by peer name (traffic.go).
	Traffic []PeerTraffic
}

// NodeStatus is the node part of the status.
type NodeStatus struct {
	Name          string
	Origin        wire.OriginID
	ProtocolMin   uint64
	ProtocolMax   uint64
	Authenticated bool // a cluster secret keys every handshake, or every peer link is mutual TLS
	// Clock is this node's clock as its measured peers see it, and whether local writes
	// are refused for it (clock.go).
	Clock ClockStatus
	// Storage is whether the storage is degraded, and why (storage.go).
	Storage StorageStatus
	// Rewound is the evidence that this node's own origin is rewound (rewind.go), nil
	// while none was seen: local writes are refused with origin-rewound.
	Rewound *RewindStatus
	// RetainHold is how long a peer's hold keeps entries back without advancing before it
	// lapses (Config.RetainHold).
	RetainHold time.Duration
}

// OriginStatus is one origin as this node knows it.
type OriginStatus struct {
	Origin        wire.OriginID
	Name          string
	AppliedSeq    uint64
	HeadSeq       uint64 // the highest seq known, from any peer's heads or applied
	LagSeq        uint64 // HeadSeq - AppliedSeq
	LagMs         uint64 // HLC milliseconds between the newest known and the newest applied entry
	SourcePeer    string // the peer it is taken from now; empty for the local origin or none
	SourceChanges uint64 // moves from one source to another since start
	Diverged      bool   // a divergence was seen and no later entry applied since
	FloorSeq      uint64 // the highest seq purged from the log here (0: none)
	LogBytes      uint64 // the bytes of transaction encodings the log holds here
	// Stuck says why the origin's next entry is held back ("": it is not); StuckUntil is
	// when the hold ends, for the clock.
	Stuck      StuckReason
	StuckUntil time.Time
	// ApplyFailures is how many times in a row the origin's next entry, ApplyFailedSeq,
	// failed to apply for a reason of its own (retry.go), ApplyError the last failure and
	// ApplyFailedAt its time; 0 and "" while none fails.
	ApplyFailures  int
	ApplyFailedSeq uint64
	ApplyError     string
	ApplyFailedAt  time.Time
	// Rewound: the origin's own node was found rewound on a connection to it since start
	// (rewind.go); this node keeps its entries and relays them.
	Rewound bool
	// Health is how the origin is doing here (health.go).
	Health Health
}

// PeerStatus is one open connection.
type PeerStatus struct {
	Conn         ConnID
	Name         string // the peer's name once the handshake told it (or the one dialed)
	Origin       wire.OriginID
	Dialed       bool      // this node dialed the connection
	State        PeerState // PeerHandshaking, PeerStreaming or PeerClosed
	Connected    bool      // streaming with fresh liveness (Session.Connected)
	Version      uint64
	Capabilities []string
	RTT          time.Duration
	// ClockOffset is the peer's clock minus this node's, as the session estimates it
	// (positive: the peer is ahead); nil while the peer is not measured (before its first
	// PONG with a time, and always for versions 1 and 2).
	ClockOffset *time.Duration
	HeldBytes   int
	// LastContact is when the connection last received a message or part of one (zero:
	// nothing yet).
	LastContact time.Time
	Stats       protocol.Stats
	LastError   *PeerError
	// RetentionHeldEntries and RetentionHeldBytes are what the peer's retention holds kept
	// from the last retention step: entries it would have purged but for them.
	RetentionHeldEntries uint64
	RetentionHeldBytes   uint64
	// RetentionHoldAge is how long the peer's oldest hold that keeps entries back has not
	// advanced (RetentionHoldAge); its hold lapses at NodeStatus.RetainHold.
	RetentionHoldAge time.Duration
	// Copy is the base copy this node takes from, or serves to, the peer (nil: none).
	Copy *CopyProgress
	// Behind is how far the peer is behind this node's own origin (PeerBehindOf).
	Behind PeerBehind
	// Health is how the peer is doing (PeerHealth; the shell decides it for the peers it
	// adds).
	Health Health
	// Link is this node's settings for the link to the peer (Link; the zero value: both
	// ways, nothing excluded).
	Link LinkSettings
	// Filled by the shell, which dials: the configured URL, how many times it dialed the
	// peer after the first dial since start (successful or not), and why its last dial
	// that opened no connection failed (nil: none did since start).
	URL           string
	Reconnects    uint64
	LastDialError *DialError
}

// DialError is why a dial of a peer opened no connection: the shell's code for it
// (docs/contract.md §8.3: dial-refused, dial-timeout, dns, ...), its message and when.
type DialError struct {
	Code    string
	Message string
	At      time.Time
}

// PeerState is where a peer stands, as /v1/status's peers[].state says it
// (docs/contract.md). The replica reports the states of a connection; the shell, which
// dials, reports the two of a configured peer that has none.
type PeerState string

// The peer states.
const (
	PeerHandshaking PeerState = "handshaking" // connected, the handshake not yet complete
	PeerStreaming   PeerState = "streaming"   // the handshake completed
	PeerClosed      PeerState = "closed"      // the session ended; the socket is going
	PeerConnecting  PeerState = "connecting"  // the shell dials the peer (no connection yet)
	PeerBackoff     PeerState = "backoff"     // the shell waits before dialing again
)

// PeerError is the last error of a peer's connections.
type PeerError struct {
	Err *wire.Error
	At  time.Time
}

// Counters are totals since the replica started (docs/contract.md §8.4). Each field is
// declared once, here: its tag gives its name in the status document (status) and the help
// of its metric (help), and the shell derives the document's counters, their order (this
// one, the contract's), plait status's lines and the metrics plait_NAME_total from them. A
// counter whose metric has one series per error code says so (status:"NAME,by-code"). A new
// counter is a field here and its rows in the contract's §8.4 and §9.
type Counters struct {
	TxnsApplied        uint64 `status:"txns_applied" help:"Transactions applied."`
	DuplicatesReceived uint64 `status:"duplicates_received" help:"Entries received that were applied already."`
	GapsDetected       uint64 `status:"gaps_detected" help:"Gaps detected in received streams."`
	ResendsRequested   uint64 `status:"resends_requested" help:"Resends asked of peers."`
	ProtocolErrors     uint64 `status:"protocol_errors" help:"Connections closed for a protocol error."`
	Divergences        uint64 `status:"divergences" help:"Divergences found."`
	PurgedAnswers      uint64 `status:"purged_answers" help:"Peers answered that what they asked for is purged."`
	EntriesPurged      uint64 `status:"entries_purged" help:"Log entries retention purged."`
	TombstonesDropped  uint64 `status:"tombstones_dropped" help:"Tombstones retention dropped."` // docs/design.md §14

	// Base copies (docs/design.md §15).
	CopiesStarted   uint64 `status:"copies_started" help:"Base copies this node began taking."`
	CopiesResumed   uint64 `status:"copies_resumed" help:"Base copies this node went on with after they stopped early."`
	CopiesCompleted uint64 `status:"copies_completed" help:"Base copies this node took whole."`
	CopyRecords     uint64 `status:"copy_records" help:"Records received in base copies."` // merged or not
	CopyBytes       uint64 `status:"copy_bytes" help:"Chunk bytes received in base copies."`
	CopiesServed    uint64 `status:"copies_served" help:"Base copies this node began serving."`
	// CopyHeldBack: versions its logs do not cover yet (readAhead).
	CopyHeldBack  uint64 `status:"copy_records_held_back" help:"Records left out of base copies served: versions this node's logs did not cover yet, or leaf writes a taker below protocol version 4 cannot take."`
	CopiesBusy    uint64 `status:"copies_busy" help:"Copy requests refused at --max-copies (copy-busy)."`
	CopiesRefused uint64 `status:"copies_refused" help:"Base copies this node refused to take (its own origin ahead of its log)."`
	// CopySourcesBelowV4: once per connection (passOverBelowV4).
	CopySourcesBelowV4 uint64 `status:"copy_sources_below_v4" help:"Connections to a peer below protocol version 4 passed over as this node's base copy source while its cluster map names lock homes or fences a table."`
	BadChunks          uint64 `status:"bad_chunks" help:"Base copies stopped by a chunk that broke the copy's rules (bad-chunk)."`

	// OriginRewinds counts the times this node found an origin rewound (rewind.go): its
	// own, by a peer's position, or a peer's own, on the connection to it.
	OriginRewinds uint64 `status:"origin_rewinds" help:"Times this node found an origin rewound: its own, by a peer's position of it, or a peer's own, on the connection to it."`
	// Anti-entropy (antientropy.go, docs/design.md §19).
	AntiEntropyRangesCompared  uint64 `status:"antientropy_ranges_compared" help:"Key ranges this node asked a peer about and had answered (anti-entropy)."`
	AntiEntropyRangesDiffering uint64 `status:"antientropy_ranges_differing" help:"Key ranges whose digests differed from the peer's."`
	AntiEntropyRecordsRepaired uint64 `status:"antientropy_records_repaired" help:"Records anti-entropy wrote here from a peer's version."`
	AntiEntropyInFlight        uint64 `status:"antientropy_in_flight" help:"Differing peer versions not yet applied here, left to the log."`
	AntiEntropyBelowHorizon    uint64 `status:"antientropy_below_horizon" help:"Records this node lacks at or below its tombstone horizon, not written (they may have been deleted here)."`
	AntiEntropyPeerBehind      uint64 `status:"antientropy_peer_behind" help:"Records this node lacks from a peer that has not applied as far as this node, not written (they may have been deleted here by an entry the peer lacks)."`
	// AntiEntropyConflicts: each flagged once while listed.
	AntiEntropyConflicts     uint64 `status:"antientropy_conflicts" help:"Records held at one version with two contents and no log entry left: flagged in status, never chosen."`
	AntiEntropyPasses        uint64 `status:"antientropy_passes" help:"Anti-entropy passes over this node's records that reached the last record (one pass for all peers)."`
	AntiEntropyAsksAbandoned uint64 `status:"antientropy_asks_abandoned" help:"Anti-entropy ranges asked and not answered within the stall timeout: the pass went on with the next peer."`

	// Connections that ended in an error (refusals.go); their metrics have one series per
	// code (RefusedByCode, ErrorsByCode), whose sum is the counter.
	ConnectionsRefused uint64 `status:"connections_refused,by-code" help:"Connections closed before their handshake completed, by code."`
	ConnectionErrors   uint64 `status:"connection_errors,by-code" help:"Connections closed for an error after their handshake, by code."`

	// ApplyFailures counts received entries that failed to apply for a reason of their own
	// (retry.go): every failed try, storage errors not included.
	ApplyFailures uint64 `status:"apply_failures" help:"Tries of received entries that failed to apply for a reason of their own (storage errors not included)."`
	// RecordsDamaged counts the damaged records (DamagedRecordError) this node's scans
	// passed over (anti-entropy, retention, a copy's check), each time met.
	RecordsDamaged uint64 `status:"records_damaged" help:"Damaged records (undecodable in the store) this node's scans passed over: anti-entropy writes a peer's version over them."`
	// The cluster map (clustermap.go): maps adopted, conflicts met (once per distinct
	// other map of the current generation), maps a peer sent and this node refused to
	// adopt (each time met), member entries refused past MaxMembers.
	ClusterMapAdopted   uint64 `status:"cluster_map_adopted" help:"Cluster maps this node adopted (published here or received with a higher generation)."`
	ClusterMapConflicts uint64 `status:"cluster_map_conflicts" help:"Different cluster maps of this node's generation met (each counted once); publish a higher generation to end a conflict."`
	ClusterMapRefused   uint64 `status:"cluster_map_refused" help:"Cluster maps of a higher generation a peer sent that this node refused: they do not fence a table its map fences (unfenced), or they lower or drop its leaf window (leaf-window-lowered)."`
	MembersRefused      uint64 `status:"members_refused" help:"Member version entries refused because this node holds its bound of them."`
	// Requests between nodes (requests.go): started here, served here, passed on,
	// refused here (no route, a full connection, the session's bound), and answers that
	// came after their request was given up or answered.
	RequestsSent      uint64 `status:"requests_sent" help:"Requests between nodes this node started."`
	RequestsServed    uint64 `status:"requests_served" help:"Requests between nodes this node answered as their target."`
	RequestsForwarded uint64 `status:"requests_forwarded" help:"Requests between nodes this node passed on toward their target."`
	RequestsRefused   uint64 `status:"requests_refused" help:"Requests between nodes this node refused: no route, or too many in flight."`
	RequestsLate      uint64 `status:"requests_late" help:"Answers to requests between nodes that came after the request was given up."`
	// Placement (write.go): local writes refused because their tables are not placed
	// alike; the client was answered mixed-placement, and nothing was written.
	WritesRefusedMixedPlacement uint64 `status:"writes_refused_mixed_placement" help:"Local writes refused because their tables are not placed alike in the cluster map (mixed-placement)."`
	WritesRefusedNotCarried     uint64 `status:"writes_refused_not_carried" help:"Local writes refused because this node does not carry their tables (not-carried)."`
	WritesRefusedLockRequired   uint64 `status:"writes_refused_lock_required" help:"Local writes without a lock's token refused because they write a table the cluster map fences (lock-required)."`
	SkipsSent                   uint64 `status:"skips_sent" help:"Runs of entries left out of a stream to a peer that does not carry their tables, sent as one SKIP each."`
	SkipsReceived               uint64 `status:"skips_received" help:"Runs of entries a peer left out of a stream to this node, stored as one row each."`
	SkipsRefused                uint64 `status:"skips_refused" help:"Runs refused because they left out a table this node carries (the origin is taken from another source)."`
	TablesRemoved               uint64 `status:"tables_removed" help:"Tables this node deleted the records of once it no longer carried them and their carriers held what it held."`
	RecordsFreed                uint64 `status:"records_freed" help:"Records deleted with the tables this node no longer carries."`
	BytesFreed                  uint64 `status:"bytes_freed" help:"Bytes of the records deleted with the tables this node no longer carries, as its store held them."`
	TablesFilled                uint64 `status:"tables_filled" help:"Tables this node was added to and filled by a copy of that table from a carrier."`
	FillRecords                 uint64 `status:"fill_records" help:"Record versions written by those copies (newer than this node's)."`
	FillBytes                   uint64 `status:"fill_bytes" help:"Chunk bytes received in those copies, chunks of neighbouring tables passed over included."`
	// API requests for a table this node does not carry (forward.go): answered by a
	// carrier, answered no-carrier (none reachable, or the request found no way to it or
	// back), answered not-carried (not to be forwarded); and, on a carrier, those it
	// served for another node.
	ForwardsAnswered   uint64 `status:"forwards_answered" help:"API requests for a table this node does not carry forwarded to a carrier and answered other than no-carrier (the carrier's answer, or a refusal on the way)."`
	ForwardsNoCarrier  uint64 `status:"forwards_no_carrier" help:"API requests for a table this node does not carry answered no-carrier: no carrier reachable, or the request found no way to it."`
	ForwardsNotCarried uint64 `status:"forwards_not_carried" help:"API requests for a table this node does not carry answered not-carried instead of forwarded (Plait-Forward: no, or a request forwarded here)."`
	ForwardsServed     uint64 `status:"forwards_served" help:"API requests another node forwarded to this node as a carrier, run through this node's API."`
	// Links (links.go): an entry with an operation of a table this node carries, come over
	// a link that excludes that table, is not applied, and the origin is taken over another
	// link. A run the link left out counts in SkipsRefused: refused the same way, but an
	// entry sent whole over a link that excludes one of its tables is the ordinary case
	// (its other tables cross), which the operator reads apart from a run.
	EntriesRefusedExcluded uint64 `status:"entries_refused_excluded" help:"Entries refused because they came over a link that excludes a table of theirs this node carries (the origin is taken over another link)."`
	// WritesUntokenedFenced: operations of applied entries, counted whether their version
	// won or not (lww).
	WritesUntokenedFenced uint64 `status:"writes_untokened_fenced" help:"Operations applied without a lock's token in a table the cluster map fences (written by a node below version 4, or before the table was fenced): they order below every token."`
	// Named feeds (namedfeeds.go): feeds refused past MaxNamedFeeds, holds lapsed (each
	// time a feed's bytes went over its cap), acks that moved a position, acks refused
	// above this node's applied positions.
	NamedFeedsRefused    uint64 `status:"named_feeds_refused" help:"Named feeds refused because this node keeps --max-named-feeds of them (too-many-named-feeds)."`
	NamedFeedHoldsLapsed uint64 `status:"named_feed_holds_lapsed" help:"Times a named feed's hold lapsed: the log bytes above its position went over its hold_bytes, and retention went on as without it, or a base copy raised a log's floor past its position."`
	NamedFeedAcks        uint64 `status:"named_feed_acks" help:"Acks that moved a named feed's position."`
	NamedFeedAcksAhead   uint64 `status:"named_feed_acks_ahead" help:"Acks of a named feed refused because they were above this node's applied positions (ahead)."`
	// Fan-in hubs (hub.go, docs/design.md §27). At a hub: leaf entries re-originated as
	// its own, leaf entries at or below the leaf's mark (a resend), format-3 entries of
	// another hub for a leaf seq at or below this node's mark (a leaf that moved), leaf
	// entries not re-originated (by reason: LeavesStatus.WritesRefusedByReason), leaves
	// refused (by close code: LeavesStatus.LeavesRefusedByCode). At a leaf: operations of
	// its own writes come back through the hub (no-ops), and its writes the hub refused.
	LeafWritesReoriginated uint64 `status:"leaf_writes_reoriginated" help:"Leaf entries this hub re-originated as entries of its own origin."`
	LeafWritesDuplicate    uint64 `status:"leaf_writes_duplicate" help:"Leaf entries received at or below the leaf's mark here (re-originated already), not re-originated again."`
	LeafWritesTwice        uint64 `status:"leaf_writes_twice" help:"Entries of another hub that carry a leaf write at or below this node's mark of the leaf (re-originated by two hubs across a move): applied, their versions equal."`
	LeafWritesRefused      uint64 `status:"leaf_writes_refused,by-code" help:"Leaf entries this hub did not re-originate, by reason (too-old, not-carried, fenced, too-large); the leaf was told."`
	LeavesRefused          uint64 `status:"leaves_refused,by-code" help:"Leaf connections this node refused, by code."`
	LeafOwnWritesBack      uint64 `status:"leaf_own_writes_back" help:"Operations of this leaf's own writes that came back through its hub: no-ops, not conflicts."`
	HubWritesRefused       uint64 `status:"hub_writes_refused" help:"This leaf's writes its hub refused to re-originate (they stay on this leaf only)."`
}

// Counters returns the counters.
func (r *Replica) Counters() Counters { return r.counters }

// LastError is the last error recorded for a peer name, or nil.
func (r *Replica) LastError(peer string) *PeerError {
	if e, ok := r.lastErrors[peer]; ok {
		return &e
	}
	return nil
}

// Status reports the node's state at now.
func (r *Replica) Status(now time.Time) Status {
	rng, err := handshake.Clamp(r.cfg.MinVersion, r.cfg.MaxVersion)
	if err != nil {
		rng = handshake.Implemented()
	}
	s := Status{Node: NodeStatus{Name: r.id.Name, Origin: r.id.Origin, ProtocolMin: rng.Min, ProtocolMax: rng.Max,
		Authenticated: len(r.cfg.Secret) > 0 || r.cfg.TLSAuthenticated, Clock: r.Clock(), Storage: r.storageStatus(), Rewound: r.Rewound(), RetainHold: r.cfg.RetainHold}, Counters: r.counters}
	s.Refusals, s.RefusedByCode, s.ErrorsByCode = r.Refusals()
	s.AntiEntropyConflicts = r.AntiEntropyConflicts()
	s.ClusterMap = r.MapStatus()
	s.NamedFeeds = r.NamedFeeds()
	s.Hub, s.Leaves = r.HubStatus(now), r.LeavesStatus(now)
	s.Traffic = r.Traffic()
	for _, o := range r.originOrder {
		s.Origins = append(s.Origins, r.originStatus(r.origins[o], now))
	}
	for _, c := range r.connList {
		if c.leaf {
			continue // a hub's leaves are no peers: Leaves shows them, bounded (hub.go)
		}
		p := PeerStatus{Conn: c.id, Name: c.peerName, Origin: c.peerOrigin, Dialed: c.role == wire.RoleDialer, Connected: c.sess.Connected(now),
			Version: c.version, RTT: c.sess.RTT(), HeldBytes: c.sess.HeldBytes(), LastContact: c.lastHeard, Stats: c.sess.Stats()}
		if p.Name == "" {
			p.Name = c.expect
		}
		switch c.sess.State() {
		case protocol.StateEstablished:
			p.State = PeerStreaming
			p.Capabilities = slices.Clone(c.sess.Handshake().Caps)
		case protocol.StateClosed:
			p.State = PeerClosed
		default:
			p.State = PeerHandshaking
		}
		if off, ok := c.sess.ClockOffset(); ok && c.established {
			p.ClockOffset = &off
		}
		p.LastError = r.LastError(p.Name)
		p.RetentionHeldEntries, p.RetentionHeldBytes = r.RetentionHeld(p.Name)
		p.RetentionHoldAge = r.RetentionHoldAge(p.Name, now)
		p.Copy = r.copyProgress(c.id)
		p.Behind = r.PeerBehindOf(p.Name, now)
		p.Health = PeerHealth(p, s.Origins)
		p.Link = r.Link(p.Name)
		p.Link.Exclude = slices.Clone(p.Link.Exclude) // the status leaves the loop
		s.Peers = append(s.Peers, p)
	}
	return s
}

// Origin reports one origin's status at the last input (the zero value with the id when
// unknown).
func (r *Replica) Origin(o wire.OriginID) OriginStatus {
	if st := r.origins[o]; st != nil {
		return r.originStatus(st, r.now)
	}
	return OriginStatus{Origin: o}
}

func (r *Replica) originStatus(st *originState, now time.Time) OriginStatus {
	l := r.ret.logs[st.id]
	os := OriginStatus{Origin: st.id, Name: st.name, AppliedSeq: st.applied.Seq, HeadSeq: max(st.headSeq, st.applied.Seq),
		SourceChanges: st.changes, Diverged: st.diverged, FloorSeq: l.Floor.Seq, LogBytes: l.Bytes, Rewound: st.rewound}
	if st.stuck != "" { // until the next input after StuckUntil releases it
		os.Stuck, os.StuckUntil = st.stuck, st.stuckUntil
	}
	if rs := st.retry; rs.failures > 0 {
		os.ApplyFailures, os.ApplyFailedSeq, os.ApplyError, os.ApplyFailedAt = rs.failures, rs.seq, rs.err, rs.at
	}
	os.LagSeq, os.LagMs = r.lagOf(st)
	if c := r.conns[st.source]; c != nil {
		os.SourcePeer = c.peerName
	} else if st.id != r.id.Origin {
		os.SourcePeer = st.legacySource
	}
	os.Health = r.originHealth(st, os, now)
	return os
}

// Vector is the applied cursor vector, sorted by origin.
func (r *Replica) Vector() []OriginStatus {
	var out []OriginStatus
	for _, o := range r.originOrder {
		st := r.origins[o]
		out = append(out, OriginStatus{Origin: o, Name: st.name, AppliedSeq: st.applied.Seq})
	}
	return out
}
