package httpapi

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/node"
)

// StatusDoc is the GET /v1/status document (docs/contract.md, "GET /v1/status"): what the
// handler encodes and what plait status, the cluster harness and the tests decode.
//
// The fields of every part stand in the order of their JSON names, so that the encoding
// is, byte for byte, the one of the map this type replaced (encoding/json sorts map keys).
// Lists are never null: an empty one is [].
type StatusDoc struct {
	// AntiEntropyConflicts are the newest records anti-entropy found held at one version
	// with two contents and no log entry left to tell them apart, oldest first (at most
	// replica.MaxAntiEntropyConflicts; docs/contract.md §20).
	AntiEntropyConflicts []ConflictDoc `json:"antientropy_conflicts"`
	// ClusterMap is the cluster map this node holds and what it knows of the nodes'
	// protocol versions (docs/contract.md §22.4).
	ClusterMap ClusterMapDoc `json:"cluster_map"`
	Counters   CountersDoc   `json:"counters"`
	// Feeds is this node's change feeds (docs/contract.md §24.7); the API fills it.
	Feeds FeedsDoc `json:"feeds"`
	// Hub is this node's hub when it is a leaf (docs/contract.md §26.6); left out on any
	// other node.
	Hub *HubDoc `json:"hub,omitempty"`
	// Leaves is this node's leaves when it is a hub (docs/contract.md §26.6); left out on
	// a node with --max-leaves 0.
	Leaves *LeavesDoc `json:"leaves,omitempty"`
	// Locks is this node as a lock home and as a caller (docs/contract.md §8.9); the
	// shell's SetLocks fills it.
	Locks LocksDoc `json:"locks"`
	// NamedFeeds are the named feeds, sorted by name (docs/contract.md §24.7); [] when
	// none.
	NamedFeeds []NamedFeedDoc `json:"named_feeds"`
	Node       NodeDoc        `json:"node"`
	Origins    []OriginDoc    `json:"origins"`
	Peers      []PeerDoc      `json:"peers"`
	// Refusals are the newest connections refused before their handshake completed, oldest
	// first (at most replica.MaxRefusals).
	Refusals []RefusalDoc `json:"refusals"`
	// Snapshots is the listing's pinned snapshots (docs/contract.md §24.5); the shell's
	// status handler fills it.
	Snapshots SnapshotsDoc `json:"snapshots"`
}

// ClusterMapDoc is cluster_map (replica.MapStatus, docs/contract.md §22.4). The fields a
// node without a map has no value for are left out, not null: a map is a document an
// operator reads beside its JSON, whose absent fields are absent too.
type ClusterMapDoc struct {
	AppliedAt string `json:"applied_at,omitempty"` // when this node adopted it (RFC 3339, UTC, milliseconds)
	// Carried are the placed tables this node carries, sorted: [] when it carries none of
	// them, left out when no table is placed (docs/contract.md §23.1).
	Carried *[]string `json:"carried,omitempty"`
	// Conflict is the last different map of the current generation met, not adopted.
	Conflict *MapConflictDoc `json:"conflict,omitempty"`
	// Filling are the tables this node was added to and has not filled yet, sorted
	// (docs/contract.md §23.6); left out when none.
	Filling    []string `json:"filling,omitempty"`
	Generation uint64   `json:"generation"` // 0: no map
	// Members are the map's nodes' names, sorted; left out when it has no member list.
	Members []string `json:"members,omitempty"`
	// MembersBelowV4 are the members not known to speak protocol version 4, sorted
	// (docs/contract.md §22.6); left out when none.
	MembersBelowV4 []string `json:"members_below_v4,omitempty"`
	// Placement is each placed table's carriers, sorted; left out when no table is placed.
	Placement map[string][]string `json:"placement,omitempty"`
	Publisher string              `json:"publisher,omitempty"` // the node it was published on
	// Removals are the tables this node holds records of and no longer carries, each with
	// the carriers it waits for before it deletes them (docs/contract.md §23.5); left out
	// when none.
	Removals []RemovalDoc `json:"removals,omitempty"`
	// Versions is every node whose protocol version this node knows, sorted by name;
	// [] when none.
	Versions []MemberVersionDoc `json:"versions"`
}

// RemovalDoc is one of cluster_map.removals.
type RemovalDoc struct {
	Table      string   `json:"table"`
	WaitingFor []string `json:"waiting_for"`
}

// MapConflictDoc is cluster_map.conflict: the other map's generation and publisher.
type MapConflictDoc struct {
	Generation uint64 `json:"generation"`
	Publisher  string `json:"publisher"`
}

// MemberVersionDoc is one node's highest protocol version and the map generation it holds,
// as this node knows them.
type MemberVersionDoc struct {
	Generation uint64 `json:"generation"`
	MaxVersion uint64 `json:"max_version"`
	Name       string `json:"name"`
}

func clusterMapDoc(m replica.MapStatus) ClusterMapDoc {
	d := ClusterMapDoc{Generation: m.Generation, Publisher: m.Publisher, Members: m.Members, MembersBelowV4: m.MembersBelowV4,
		Versions: make([]MemberVersionDoc, 0, len(m.Versions))}
	if at := stamp(m.AppliedAt); at != nil {
		d.AppliedAt = *at
	}
	if c := m.Conflict; c != nil {
		d.Conflict = &MapConflictDoc{Generation: c.Generation, Publisher: c.Publisher}
	}
	if len(m.Placement) > 0 {
		carried := append([]string{}, m.Carried...)
		d.Placement, d.Carried = m.Placement, &carried
	}
	d.Filling = m.Filling
	for _, rm := range m.Removals {
		d.Removals = append(d.Removals, RemovalDoc{Table: rm.Table, WaitingFor: append([]string{}, rm.Waiting...)})
	}
	for _, v := range m.Versions {
		d.Versions = append(d.Versions, MemberVersionDoc{Generation: v.Generation, MaxVersion: v.MaxVersion, Name: v.Name})
	}
	return d
}

// HubDoc is hub (replica.HubStatus): a leaf's view of its hub, as the hub's last word on
// the link told it. A client that wrote at the leaf waits for core_seq at or above its
// write's origin_seq: every member of the core has the write then (the write checkpoint).
type HubDoc struct {
	Connected bool   `json:"connected"`
	CoreSeq   uint64 `json:"core_seq"`
	// Horizon is the tombstone horizon the hub advertises (RFC 3339, UTC, milliseconds):
	// a write of the leaf stamped before it is refused too-old. null until the hub told one.
	Horizon           *string `json:"horizon"`
	HubSeq            uint64  `json:"hub_seq"`
	LastRefusedReason string  `json:"last_refused_reason"` // "" when none was refused
	LastRefusedSeq    uint64  `json:"last_refused_seq"`    // 0 when none was refused
	Name              string  `json:"name"`
	ReoriginatedSeq   uint64  `json:"reoriginated_seq"`
	Refused           uint64  `json:"refused"`
}

// LeavesDoc is leaves (replica.LeavesStatus): a hub's leaves, bounded whatever their
// number: counts, the connected leaves by lag band, and the ten furthest behind.
type LeavesDoc struct {
	Connected int `json:"connected"`
	Held      int `json:"held"` // leaves' channels held back, for the clock or the gate
	// Lag is the connected leaves by how far this hub is behind each, a band a row: at
	// most le_ms milliseconds and more than the row before's; the last row's le_ms is null
	// (no bound).
	Lag     []LeafLagDoc    `json:"lag"`
	Marks   int             `json:"marks"`
	Max     int             `json:"max"`
	Slowest []LeafBehindDoc `json:"slowest"` // most behind first; [] when none
}

// LeafLagDoc is one band of leaves.lag.
type LeafLagDoc struct {
	LeMs   *uint64 `json:"le_ms"`
	Leaves int     `json:"leaves"`
}

// LeafBehindDoc is one of leaves.slowest: the leaf, the highest of its seqs this hub
// re-originated, and how far (HLC milliseconds) its newest advertised entry is ahead of it.
type LeafBehindDoc struct {
	BehindMs uint64 `json:"behind_ms"`
	Name     string `json:"name"`
	Seq      uint64 `json:"seq"`
}

func hubDoc(h *replica.HubStatus) *HubDoc {
	if h == nil {
		return nil
	}
	return &HubDoc{Connected: h.Connected, CoreSeq: h.CoreSeq, Horizon: stamp(h.Horizon), HubSeq: h.HubSeq, LastRefusedReason: h.LastRefusedReason,
		LastRefusedSeq: h.LastRefusedSeq, Name: h.Name, ReoriginatedSeq: h.ReoriginatedSeq, Refused: h.Refused}
}

func leavesDoc(l *replica.LeavesStatus) *LeavesDoc {
	if l == nil {
		return nil
	}
	d := &LeavesDoc{Connected: l.Connected, Held: l.Held, Marks: l.Marks, Max: l.Max,
		Lag: make([]LeafLagDoc, 0, len(l.Lag)), Slowest: make([]LeafBehindDoc, 0, len(l.Slowest))}
	for _, b := range l.Lag {
		row := LeafLagDoc{Leaves: b.Leaves}
		if b.LeMs != 0 {
			le := b.LeMs
			row.LeMs = &le
		}
		d.Lag = append(d.Lag, row)
	}
	for _, s := range l.Slowest {
		d.Slowest = append(d.Slowest, LeafBehindDoc{BehindMs: s.BehindMs, Name: s.Name, Seq: s.Seq})
	}
	return d
}

// ConflictDoc is one equal-version conflict anti-entropy flagged.
type ConflictDoc struct {
	At     string `json:"at"`     // RFC 3339, UTC, to the millisecond
	HLC    uint64 `json:"hlc"`    // the version's HLC timestamp
	Key    string `json:"key"`    // the key, hex
	Origin string `json:"origin"` // the version's origin id, hex
	Peer   string `json:"peer"`   // the peer whose record differs
	Table  string `json:"table"`
}

// RefusalDoc is one refused connection.
type RefusalDoc struct {
	At      string `json:"at"` // RFC 3339, UTC, to the millisecond
	Class   string `json:"class"`
	Code    string `json:"code"`
	Dialed  bool   `json:"dialed"` // this node dialed it
	Message string `json:"message"`
	Peer    string `json:"peer"`   // the name it gave or was dialed as; empty: none
	Remote  string `json:"remote"` // the remote address (a dialer's: the URL it dialed)
}

// TLSDoc is node.tls: the node's peer certificate.
type TLSDoc struct {
	AcceptPlaintext bool   `json:"accept_plaintext"` // ws:// served beside wss:// (moving to TLS)
	Expiry          string `json:"expiry"`           // RFC 3339, UTC
	LastReloadError string `json:"last_reload_error"`
	NodeName        string `json:"node_name"`
	ReloadFailures  uint64 `json:"reload_failures"`
	Reloads         uint64 `json:"reloads"`
	Subject         string `json:"subject"`
}

// SetTLS fills node.tls from the node's TLS status (nil: TLS off, null in the document).
func (d *StatusDoc) SetTLS(ts *node.TLSStatus) {
	if ts == nil {
		d.Node.TLS = nil
		return
	}
	d.Node.TLS = &TLSDoc{AcceptPlaintext: ts.AcceptPlaintext, Expiry: ts.Expiry.UTC().Format(time.RFC3339),
		LastReloadError: ts.LastReloadError, NodeName: ts.NodeName, ReloadFailures: ts.ReloadFailures,
		Reloads: ts.Reloads, Subject: ts.Subject}
}

// NodeDoc is the document's node.
type NodeDoc struct {
	// Authenticated: a cluster secret keys every handshake, or every peer link is mutual TLS.
	Authenticated bool          `json:"authenticated"`
	Clock         ClockDoc      `json:"clock"` // this node's clock as its measured peers see it
	Name          string        `json:"name"`
	Origin        string        `json:"origin"` // the origin id in hex
	Protocol      ProtocolRange `json:"protocol"`
	// RetainHoldS is --retain-hold in seconds: how long a peer's hold keeps entries back
	// without advancing before it lapses (§16).
	RetainHoldS float64 `json:"retain_hold_s"`
	// Rewound is the evidence that this node's own origin is rewound (docs/contract.md
	// §21); null while none was seen.
	Rewound *RewindDoc `json:"rewound"`
	Storage StorageDoc `json:"storage"` // whether the storage is degraded (docs/contract.md §8.1)
	TLS     *TLSDoc    `json:"tls"`     // null when the node runs without TLS
}

// RewindDoc is node.rewound (replica.RewindStatus): the peer whose position of this node's
// origin showed it rewound, that position (its hash in hex, empty for a head, which
// carries none), this node's own seq then, how it showed (subscribe, heads or copy) and
// when (RFC 3339, UTC, milliseconds).
type RewindDoc struct {
	At     string `json:"at"`
	Hash   string `json:"hash"`
	How    string `json:"how"`
	OwnSeq uint64 `json:"own_seq"`
	Peer   string `json:"peer"`
	Seq    uint64 `json:"seq"`
}

func rewindDoc(rw *replica.RewindStatus) *RewindDoc {
	if rw == nil {
		return nil
	}
	d := &RewindDoc{At: rw.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), How: rw.How, OwnSeq: rw.OwnSeq, Peer: rw.Peer, Seq: rw.Seq}
	if rw.Hash != (wire.Hash{}) {
		d.Hash = hex.EncodeToString(rw.Hash[:])
	}
	return d
}

// StorageDoc is node.storage (replica.StorageStatus): "ok", or "degraded" with the storage
// error's code and message, when it began (RFC 3339, UTC, milliseconds) and the recovery
// attempts since.
type StorageDoc struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	Retries uint64 `json:"retries"`
	Since   string `json:"since,omitempty"`
	State   string `json:"state"` // "ok" or "degraded"
}

func storageDoc(s replica.StorageStatus) StorageDoc {
	if !s.Degraded {
		return StorageDoc{State: "ok"}
	}
	return StorageDoc{State: "degraded", Code: string(s.Code), Message: s.Message, Retries: s.Retries,
		Since: s.Since.UTC().Format("2006-01-02T15:04:05.000Z07:00")}
}

// ClockDoc is node.clock (replica.ClockStatus): how far this node's clock is from its
// peers', and whether it refuses local writes for it (docs/contract.md §8.1).
type ClockDoc struct {
	BoundMs       int64 `json:"bound_ms"`       // --max-clock-offset; 0: no bound
	MeasuredPeers int   `json:"measured_peers"` // connected peers that measured the clock (version 3)
	OffPeers      int   `json:"off_peers"`      // of them, those that see it beyond the bound
	// OffsetMs is the median of this node's clock minus each measured peer's (positive:
	// this node is ahead); null when no peer measured it.
	OffsetMs       *float64 `json:"offset_ms"`
	RefusingWrites bool     `json:"refusing_writes"` // a majority of measured peers see it off
}

// ms is a duration in milliseconds, to the microsecond (as rtt_ms).
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ProtocolRange is the protocol versions a node speaks.
type ProtocolRange struct {
	Max uint64 `json:"max"`
	Min uint64 `json:"min"`
}

// OriginDoc is one origin as the node knows it (replica.OriginStatus).
type OriginDoc struct {
	AppliedSeq uint64 `json:"applied_seq"`
	// ApplyFailures is how many times in a row the origin's next entry failed to apply for
	// a reason of its own (0: none fails); ApplyError the last failure, null with 0.
	ApplyError    *string `json:"apply_error"`
	ApplyFailures int     `json:"apply_failures"`
	Diverged      bool    `json:"diverged"`
	FloorSeq      uint64  `json:"floor_seq"` // the highest seq purged from the log here; 0: none
	HeadSeq       uint64  `json:"head_seq"`
	// Health is how the origin is doing here: healthy, catching-up, falling-behind or
	// stalled (replica.Health, docs/contract.md §8.7).
	Health   replica.Health `json:"health"`
	LagMs    uint64         `json:"lag_ms"`
	LagSeq   uint64         `json:"lag_seq"`   // head_seq - applied_seq
	LogBytes uint64         `json:"log_bytes"` // transaction-encoding bytes the log holds here
	Name     string         `json:"name"`
	Origin   string         `json:"origin"` // the origin id in hex
	// Rewound: the origin's own node was found rewound on a connection to it since start
	// (docs/contract.md §21); this node keeps and relays its entries.
	Rewound       bool   `json:"rewound"`
	SourceChanges uint64 `json:"source_changes"`
	SourcePeer    string `json:"source_peer"` // empty for the local origin, or none
	// Stuck is why the origin's next entry is held back (replica.StuckReason, e.g.
	// "clock-ahead"); null when it is not. StuckUntil is when the hold ends (RFC 3339,
	// UTC, to the millisecond); null with it.
	Stuck      *string `json:"stuck"`
	StuckUntil *string `json:"stuck_until"`
}

// PeerDoc is one peers[] entry: an open connection, or a configured peer that has none.
type PeerDoc struct {
	// AntiEntropyBytesIn and AntiEntropyBytesOut are the bytes of anti-entropy frames on
	// the peer's connection (RANGEDIGEST and RANGERECORDS, headers included).
	AntiEntropyBytesIn  uint64 `json:"antientropy_bytes_in"`
	AntiEntropyBytesOut uint64 `json:"antientropy_bytes_out"`
	// BytesIn, BytesOut, MessagesIn, MessagesOut, FramesIn and FramesOut are the
	// connection's traffic since it opened (protocol.Stats); 0 for a peer without one.
	BytesIn      uint64   `json:"bytes_in"`
	BytesOut     uint64   `json:"bytes_out"`
	Capabilities []string `json:"capabilities"` // [] before the handshake
	// ClockOffsetMs is the peer's clock minus this node's (positive: the peer is ahead),
	// estimated from PING/PONG; null for a peer that sends no time (versions 1 and 2).
	ClockOffsetMs *float64 `json:"clock_offset_ms"`
	Connected     bool     `json:"connected"`
	Copy          *CopyDoc `json:"copy"` // the base copy with this peer; null when none
	// Exclude are the tables this node excludes from the link to the peer, sorted; [] when
	// none (docs/design.md §24.6). The peer's own settings are in its status.
	Exclude   []string `json:"exclude"`
	FramesIn  uint64   `json:"frames_in"`
	FramesOut uint64   `json:"frames_out"`
	// Health is how the peer is doing (replica.PeerHealth, docs/contract.md §8.7).
	Health    replica.Health `json:"health"`
	HeldBytes int            `json:"held_bytes"`
	// LagSeq is how many entries of this node's own origin the peer is behind, by its last
	// known position (its subscription, acknowledgements and heads); null when the peer
	// never subscribed to it (version 1, or not yet).
	LagSeq *uint64 `json:"lag_seq"`
	// LastContact is when the connection last received a message or part of one (RFC 3339,
	// UTC, milliseconds); null for a peer without a connection, or nothing received yet.
	LastContact *string `json:"last_contact"`
	// LastDialError is why this node's last dial of the peer opened no connection (a
	// dialed peer only), kept after it recovers; null when none failed since start.
	LastDialError *DialErrorDoc `json:"last_dial_error"`
	LastError     *PeerErrorDoc `json:"last_error"` // null when there was none
	MessagesIn    uint64        `json:"messages_in"`
	MessagesOut   uint64        `json:"messages_out"`
	// Mode is this node's direction for the link to the peer: both, receive or send.
	Mode       string `json:"mode"`
	Name       string `json:"name"`
	Reconnects uint64 `json:"reconnects"`
	// RetentionHeldBytes and RetentionHeldEntries: what this peer's retention holds kept
	// from the last retention step (0: it holds nothing back).
	RetentionHeldBytes   uint64 `json:"retention_held_bytes"`
	RetentionHeldEntries uint64 `json:"retention_held_entries"`
	// RetentionHoldAgeS is how long, in seconds, the peer's oldest hold that keeps entries
	// back has not advanced; 0 while none keeps anything. It lapses at node.retain_hold_s.
	RetentionHoldAgeS float64           `json:"retention_hold_age_s"`
	RTTMs             float64           `json:"rtt_ms"` // milliseconds, to the microsecond
	State             replica.PeerState `json:"state"`
	URL               string            `json:"url"`
	Version           uint64            `json:"version"`
}

// CopyDoc is a peer's base copy in progress: the one this node takes from it (state
// "receiving") or serves it ("serving").
type CopyDoc struct {
	State   string `json:"state"`
	Records uint64 `json:"records"` // copied so far (receiving: resumes included)
	Bytes   uint64 `json:"bytes"`   // chunk bytes copied so far
	// Tables is the number of tables in the sender's snapshot (0: unknown), TablesDone the
	// tables copied whole.
	Tables     uint64 `json:"tables"`
	TablesDone uint64 `json:"tables_done"`
	// TotalRecords and TotalBytes are what the sender estimated of its snapshot (0: unknown).
	TotalRecords uint64  `json:"total_records"`
	TotalBytes   uint64  `json:"total_bytes"`
	Rate         float64 `json:"rate_bytes_per_s"` // over this run (since the last resume)
	ETASeconds   float64 `json:"eta_s"`            // 0: not known yet
	Resumes      uint64  `json:"resumes"`
}

// DialErrorDoc is a peer's last dial error: its code (node.DialRefused, ...), message and
// when (RFC 3339, UTC, milliseconds).
type DialErrorDoc struct {
	At      string `json:"at"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func dialErrorDoc(e *replica.DialError) *DialErrorDoc {
	if e == nil {
		return nil
	}
	return &DialErrorDoc{At: *stamp(e.At), Code: e.Code, Message: e.Message}
}

// PeerErrorDoc is a peer's last error.
type PeerErrorDoc struct {
	At      string `json:"at"` // RFC 3339, UTC, to the second
	Class   string `json:"class"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// NewStatusDoc is the document of a replica status (as node.Node.Status gives it, with
// the dialed peers' URLs and states).
func NewStatusDoc(st replica.Status) StatusDoc {
	d := StatusDoc{
		Node: NodeDoc{Authenticated: st.Node.Authenticated, Name: st.Node.Name, Origin: hex.EncodeToString(st.Node.Origin[:]),
			Protocol: ProtocolRange{Max: st.Node.ProtocolMax, Min: st.Node.ProtocolMin}, Clock: clockDoc(st.Node.Clock),
			Storage: storageDoc(st.Node.Storage), Rewound: rewindDoc(st.Node.Rewound), RetainHoldS: st.Node.RetainHold.Seconds()},
		Origins:              make([]OriginDoc, 0, len(st.Origins)),
		Peers:                make([]PeerDoc, 0, len(st.Peers)),
		Counters:             CountersDoc{st.Counters},
		ClusterMap:           clusterMapDoc(st.ClusterMap),
		Locks:                NewLocksDoc(replica.LockStatus{}),
		Feeds:                FeedsDoc{Closed: map[string]uint64{}, Refused: map[string]uint64{}},
		Refusals:             make([]RefusalDoc, 0, len(st.Refusals)),
		NamedFeeds:           make([]NamedFeedDoc, 0, len(st.NamedFeeds)),
		AntiEntropyConflicts: make([]ConflictDoc, 0, len(st.AntiEntropyConflicts)),
		Hub:                  hubDoc(st.Hub),
		Leaves:               leavesDoc(st.Leaves),
	}
	for _, f := range st.AntiEntropyConflicts {
		d.AntiEntropyConflicts = append(d.AntiEntropyConflicts, ConflictDoc{At: f.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
			HLC: uint64(f.HLC), Key: hex.EncodeToString(f.Key), Origin: hex.EncodeToString(f.Origin[:]), Peer: f.Peer, Table: string(f.Table)})
	}
	for _, f := range st.NamedFeeds {
		d.NamedFeeds = append(d.NamedFeeds, NewNamedFeedDoc(f))
	}
	for _, f := range st.Refusals {
		class, _ := wire.ClassOf(f.Code)
		d.Refusals = append(d.Refusals, RefusalDoc{At: f.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Class: string(class),
			Code: string(f.Code), Dialed: f.Dialed, Message: f.Message, Peer: f.Peer, Remote: f.Remote})
	}
	for _, o := range st.Origins {
		od := OriginDoc{AppliedSeq: o.AppliedSeq, Diverged: o.Diverged, FloorSeq: o.FloorSeq,
			HeadSeq: o.HeadSeq, Health: o.Health, LagMs: o.LagMs, LagSeq: o.LagSeq, LogBytes: o.LogBytes, Name: o.Name,
			Origin: hex.EncodeToString(o.Origin[:]), SourceChanges: o.SourceChanges, SourcePeer: o.SourcePeer, Rewound: o.Rewound}
		if o.Stuck != "" {
			why, until := string(o.Stuck), o.StuckUntil.UTC().Format("2006-01-02T15:04:05.000Z07:00")
			od.Stuck, od.StuckUntil = &why, &until
		}
		if o.ApplyFailures > 0 {
			msg := o.ApplyError
			od.ApplyFailures, od.ApplyError = o.ApplyFailures, &msg
		}
		d.Origins = append(d.Origins, od)
	}
	for _, p := range st.Peers {
		caps := p.Capabilities
		if caps == nil {
			caps = []string{}
		}
		var lastErr *PeerErrorDoc
		if e := p.LastError; e != nil && e.Err != nil {
			lastErr = &PeerErrorDoc{At: e.At.UTC().Format(time.RFC3339), Class: string(e.Err.Class),
				Code: string(e.Err.Code), Message: e.Err.Message}
		}
		var off *float64
		if p.ClockOffset != nil {
			v := ms(*p.ClockOffset)
			off = &v
		}
		d.Peers = append(d.Peers, PeerDoc{AntiEntropyBytesIn: p.Stats.RangeBytesIn, AntiEntropyBytesOut: p.Stats.RangeBytesOut,
			BytesIn: p.Stats.BytesIn, BytesOut: p.Stats.BytesOut, MessagesIn: p.Stats.MessagesIn, MessagesOut: p.Stats.MessagesOut,
			FramesIn: p.Stats.FramesIn, FramesOut: p.Stats.FramesOut, Capabilities: caps, ClockOffsetMs: off, Connected: p.Connected, Health: p.Health, HeldBytes: p.HeldBytes,
			LagSeq: peerLag(p.Behind), LastContact: stamp(p.LastContact), LastDialError: dialErrorDoc(p.LastDialError), LastError: lastErr, Name: p.Name, Reconnects: p.Reconnects, RetentionHeldBytes: p.RetentionHeldBytes,
			RetentionHeldEntries: p.RetentionHeldEntries, RetentionHoldAgeS: p.RetentionHoldAge.Seconds(), RTTMs: float64(p.RTT.Microseconds()) / 1000,
			State: p.State, URL: p.URL, Version: p.Version, Copy: copyDoc(p.Copy), Mode: p.Link.Mode.String(), Exclude: tableNames(p.Link.Exclude)})
	}
	return d
}

// tableNames is a list of tables as the document writes it: strings, [] for none.
func tableNames(ts [][]byte) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}

// stamp is a time as the document writes it (RFC 3339, UTC, milliseconds), null for zero.
func stamp(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	return &s
}

func peerLag(b replica.PeerBehind) *uint64 {
	if !b.Known {
		return nil
	}
	return &b.LagSeq
}

// LagDoc is the GET /v1/status/lag document (docs/contract.md §8.7): every remote origin's
// lag history and every peer's behind this node's own origin, what the status page's
// charts draw.
type LagDoc struct {
	Origins []OriginLagDoc `json:"origins"` // sorted by origin id; [] when none
	Peers   []PeerLagDoc   `json:"peers"`   // sorted by name; [] when none
}

// PeerLagDoc is one peer's lag history behind this node's own origin, oldest sample first.
type PeerLagDoc struct {
	Name string `json:"name"`
	// Samples are [at_ms, lag_seq] each: the Unix time in milliseconds, and how many
	// entries of this node's origin the peer was behind then.
	Samples [][2]uint64 `json:"samples"`
}

// OriginLagDoc is one origin's lag history, oldest sample first.
type OriginLagDoc struct {
	Name   string `json:"name"`
	Origin string `json:"origin"` // hex
	// Samples are [at_ms, lag_seq, lag_ms] each: the Unix time in milliseconds, and the
	// origin's lag in entries and in milliseconds then.
	Samples [][3]uint64 `json:"samples"`
}

// NewLagDoc is the document of a node's lag histories.
func NewLagDoc(h []replica.OriginLag, peers []replica.PeerLag) LagDoc {
	d := LagDoc{Origins: make([]OriginLagDoc, 0, len(h)), Peers: make([]PeerLagDoc, 0, len(peers))}
	for _, p := range peers {
		pd := PeerLagDoc{Name: p.Peer, Samples: make([][2]uint64, 0, len(p.Samples))}
		for _, s := range p.Samples {
			pd.Samples = append(pd.Samples, [2]uint64{uint64(s.At.UnixMilli()), s.LagSeq})
		}
		d.Peers = append(d.Peers, pd)
	}
	for _, o := range h {
		od := OriginLagDoc{Name: o.Name, Origin: hex.EncodeToString(o.Origin[:]), Samples: make([][3]uint64, 0, len(o.Samples))}
		for _, s := range o.Samples {
			od.Samples = append(od.Samples, [3]uint64{uint64(s.At.UnixMilli()), s.LagSeq, s.LagMs})
		}
		d.Origins = append(d.Origins, od)
	}
	return d
}

func clockDoc(c replica.ClockStatus) ClockDoc {
	d := ClockDoc{BoundMs: c.Bound.Milliseconds(), MeasuredPeers: c.Measured, OffPeers: c.Off, RefusingWrites: c.RefusingWrites}
	if c.Measured > 0 {
		v := ms(c.Offset)
		d.OffsetMs = &v
	}
	return d
}

func copyDoc(p *replica.CopyProgress) *CopyDoc {
	if p == nil {
		return nil
	}
	return &CopyDoc{State: p.Direction, Records: p.Records, Bytes: p.Bytes, Tables: p.Total.Tables, TablesDone: p.TablesDone,
		TotalRecords: p.Total.Records, TotalBytes: p.Total.Bytes, Rate: p.Rate, ETASeconds: p.ETA.Seconds(), Resumes: p.Resumes}
}

// Origin is the document's origin of that name (false when it has none).
func (d StatusDoc) Origin(name string) (OriginDoc, bool) {
	for _, o := range d.Origins {
		if o.Name == name {
			return o, true
		}
	}
	return OriginDoc{}, false
}

// Connected reports whether a peers[] entry of that name is connected (streaming with
// fresh liveness). A peer may show twice, its connection and this node's dial.
func (d StatusDoc) Connected(peer string) bool {
	for _, p := range d.Peers {
		if p.Name == peer && p.Connected {
			return true
		}
	}
	return false
}

// ReadStatus reads GET /v1/status of the node whose HTTP API is at addr (HOST:PORT). An
// answer other than 200 is an *APIError.
func ReadStatus(client *http.Client, addr string, opts ...ReadOption) (StatusDoc, error) {
	raw, err := Call(client, addr, http.MethodGet, "/v1/status", nil, maxStatusDoc, opts...)
	if err != nil {
		return StatusDoc{}, err
	}
	var d StatusDoc
	if err := json.Unmarshal(raw, &d); err != nil {
		return StatusDoc{}, fmt.Errorf("the status document: %w", err)
	}
	return d, nil
}

// maxStatusDoc bounds the status document a reader takes: far above what a node sends (its
// lists are bounded: refusals, conflicts, one row an origin and a peer), so that a server
// that is not a plait node cannot make plait status hold without bound.
const maxStatusDoc = 64 << 20
