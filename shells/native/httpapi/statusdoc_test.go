package httpapi_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"

	"plait/protocol"
	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// statusGoldens are replica statuses and the exact /v1/status document of each: every
// field set; a peer without capabilities or last error beside no origins; the zero
// status (empty lists, never null). The documents were first taken from the map-based
// encoding StatusDoc replaced; the retention, copy, clock, storage and cluster map fields
// were added since.
var statusGoldens = []struct {
	name   string
	status replica.Status
	doc    string
}{
	{"every field set", replica.Status{
		Node: replica.NodeStatus{Name: "B", Origin: wire.OriginID{0xb0, 0x01}, ProtocolMin: 1, ProtocolMax: 2, Authenticated: true, RetainHold: 90 * time.Minute,
			Clock: replica.ClockStatus{Measured: 3, Off: 2, Offset: -86400001500 * time.Microsecond, Bound: 500 * time.Millisecond, RefusingWrites: true},
			Storage: replica.StorageStatus{Degraded: true, Code: wire.CodeStorageFull, Message: "storage storage-full in free-space guard: 3067904 bytes free",
				Since: time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("UTC+2", 2*3600)), Retries: 3},
			Rewound: &replica.RewindStatus{Peer: "R", Seq: 9, Hash: wire.Hash{0xab, 0xcd}, OwnSeq: 4, How: "subscribe",
				At: time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("UTC+2", 2*3600))}},
		Origins: []replica.OriginStatus{
			{Origin: wire.OriginID{0xa0, 0x01}, Name: "A", AppliedSeq: 7, HeadSeq: 10, LagSeq: 3, LagMs: 250, SourcePeer: "R", SourceChanges: 2, Diverged: true,
				FloorSeq: 4, LogBytes: 777, Rewound: true, Health: replica.HealthStalled, Stuck: replica.StuckClockAhead, StuckUntil: time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("UTC+2", 2*3600))},
			{Origin: wire.OriginID{0xb0, 0x01}, Name: "B", AppliedSeq: 42, HeadSeq: 42, Health: replica.HealthHealthy, Stuck: replica.StuckApplyFailed,
				StuckUntil: time.Date(2031, 5, 6, 5, 9, 0, 0, time.UTC), ApplyFailures: 5, ApplyFailedSeq: 43, ApplyError: "entry 43: damaged",
				ApplyFailedAt: time.Date(2031, 5, 6, 5, 8, 0, 0, time.UTC)},
		},
		Peers: []replica.PeerStatus{{Conn: 3, Name: "R", Origin: wire.OriginID{0xc0}, Dialed: true, State: replica.PeerStreaming,
			Connected: true, Health: replica.HealthFallingBehind, Behind: replica.PeerBehind{Known: true, LagSeq: 7},
			LastContact: time.Date(2031, 5, 6, 7, 8, 9, 987654321, time.FixedZone("UTC+2", 2*3600)), Version: 2, Capabilities: []string{"cap-a", "cap-b"}, RTT: 1234567 * time.Nanosecond, HeldBytes: 4096,
			Stats:       protocol.Stats{RangeBytesIn: 38, RangeBytesOut: 39, BytesIn: 82, BytesOut: 83, MessagesIn: 84, MessagesOut: 85, FramesIn: 86, FramesOut: 87},
			Link:        replica.LinkSettings{Mode: wire.LinkReceive, Exclude: [][]byte{[]byte("audit"), []byte("cache")}},
			ClockOffset: ptr(86400001500 * time.Microsecond),
			LastError: &replica.PeerError{Err: wire.NewError(wire.CodeDivergence, "entry 5 of A: hash differs"),
				At: time.Date(2031, 5, 6, 7, 8, 9, 500, time.FixedZone("UTC+2", 2*3600))},
			URL: "ws://127.0.0.1:7400", Reconnects: 5, LastDialError: &replica.DialError{Code: "dial-refused", Message: "dial tcp 127.0.0.1:7400: connect: connection refused",
				At: time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("UTC+2", 2*3600))}, RetentionHeldEntries: 6, RetentionHeldBytes: 888, RetentionHoldAge: 1500 * time.Millisecond,
			Copy: &replica.CopyProgress{Direction: "receiving", Records: 100, Bytes: 5000, TablesDone: 2,
				Total: replica.CopyTotals{Tables: 4, Records: 400, Bytes: 20000}, Rate: 2500, ETA: 6 * time.Second, Resumes: 1}}},
		Counters: replica.Counters{TxnsApplied: 11, DuplicatesReceived: 12, GapsDetected: 13, ResendsRequested: 14,
			ProtocolErrors: 15, Divergences: 16, PurgedAnswers: 17, EntriesPurged: 18, TombstonesDropped: 19,
			CopiesStarted: 20, CopiesResumed: 21, CopiesCompleted: 22, CopyRecords: 23, CopyBytes: 24, CopiesServed: 25, CopyHeldBack: 41,
			CopiesBusy: 26, CopiesRefused: 27, CopySourcesBelowV4: 68, BadChunks: 28, ConnectionsRefused: 29, ConnectionErrors: 30,
			AntiEntropyRangesCompared: 31, AntiEntropyRangesDiffering: 32, AntiEntropyRecordsRepaired: 33, AntiEntropyInFlight: 34,
			AntiEntropyBelowHorizon: 35, AntiEntropyConflicts: 36, AntiEntropyPasses: 37, AntiEntropyAsksAbandoned: 42, AntiEntropyPeerBehind: 51, ApplyFailures: 38, OriginRewinds: 39, RecordsDamaged: 40,
			ClusterMapAdopted: 43, ClusterMapConflicts: 44, ClusterMapRefused: 66, MembersRefused: 45, RequestsSent: 46, RequestsServed: 47, RequestsForwarded: 48,
			RequestsRefused: 49, RequestsLate: 50, WritesRefusedMixedPlacement: 51, WritesRefusedNotCarried: 52, SkipsSent: 53, SkipsReceived: 54, SkipsRefused: 55, TablesRemoved: 56, RecordsFreed: 57, BytesFreed: 58, TablesFilled: 59, FillRecords: 60, FillBytes: 65, WritesUntokenedFenced: 69,
			ForwardsAnswered: 61, ForwardsNoCarrier: 62, ForwardsNotCarried: 63, ForwardsServed: 64, EntriesRefusedExcluded: 67, WritesRefusedLockRequired: 70,
			NamedFeedsRefused: 71, NamedFeedHoldsLapsed: 72, NamedFeedAcks: 73, NamedFeedAcksAhead: 74,
			LeafWritesReoriginated: 75, LeafWritesDuplicate: 76, LeafWritesTwice: 77, LeafWritesRefused: 78, LeavesRefused: 79, LeafOwnWritesBack: 80, HubWritesRefused: 81},
		ClusterMap: replica.MapStatus{Generation: 7, Publisher: "A", AppliedAt: time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("UTC+2", 2*3600)),
			Document: []byte(`{"generation":7,"nodes":[{"name":"A"},{"name":"B"},{"name":"R"}]}`), Members: []string{"A", "B", "R"},
			MembersBelowV4: []string{"R"}, Conflict: &replica.MapConflict{Generation: 7, Publisher: "R"},
			Versions:  []replica.MemberVersion{{Name: "A", MaxVersion: 4, Generation: 7}, {Name: "B", MaxVersion: 4, Generation: 6}, {Name: "R", MaxVersion: 3}},
			Placement: map[string][]string{"orders": {"A", "B"}, "stock": {"R"}}, Carried: []string{"orders"},
			Removals: []replica.RemovalStatus{{Table: "lines", Waiting: []string{"R"}}}, Filling: []string{"stock"}},
		AntiEntropyConflicts: []replica.AntiEntropyConflict{{At: time.Date(2031, 5, 6, 5, 8, 11, 0, time.UTC), Peer: "R",
			Table: []byte("t"), Key: []byte("k\x00"), HLC: 117964800000000000, Origin: wire.OriginID{0xa0, 0x01}}},
		Refusals: []replica.Refusal{{Remote: "10.0.0.9:4000", Code: wire.CodeTLSUnknownCA, Message: "signed by unknown authority",
			At: time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("UTC+2", 2*3600))},
			{Remote: "wss://10.0.0.2:7400/v1/replicate", Peer: "R", Dialed: true, Code: wire.CodeAuthFailed, Message: "MAC", At: time.Date(2031, 5, 6, 5, 8, 10, 0, time.UTC)}},
		NamedFeeds: []replica.NamedFeedStatus{{Name: "audit", Table: "orders", HoldBytes: 1 << 30, LagEntries: 12, LagBytes: 3000, HeldBytes: 2500,
			Position: []wire.OriginSeq{{Origin: wire.OriginID{0xa0, 0x01}, Seq: 7}, {Origin: wire.OriginID{0xb0, 0x01}, Seq: 40}}},
			{Name: "search", Table: "stock", HoldBytes: 0, Lapsed: true}},
		// A node is a leaf or a hub, never both; the document's types allow either.
		Hub: &replica.HubStatus{Name: "H", Connected: true, ReoriginatedSeq: 40, HubSeq: 9001, CoreSeq: 38,
			Horizon: time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("UTC+2", 2*3600)), Refused: 2, LastRefusedSeq: 17, LastRefusedReason: "too-old"},
		Leaves: &replica.LeavesStatus{Max: 500, Connected: 120, Marks: 130, Held: 1,
			Lag:                 []replica.LeafLag{{LeMs: 100, Leaves: 100}, {LeMs: 1000, Leaves: 15}, {LeMs: 10000, Leaves: 4}, {LeMs: 0, Leaves: 1}},
			Slowest:             []replica.LeafBehind{{Name: "L7", Seq: 12, BehindMs: 60000}, {Name: "L3", Seq: 900, BehindMs: 2500}},
			LeavesRefusedByCode: []replica.CodeCount{{Code: "too-many-leaves", Count: 3}}, WritesRefusedByReason: []replica.CodeCount{{Code: "too-old", Count: 2}}},
	}, `{
		"antientropy_conflicts": [{"at": "2031-05-06T05:08:11.000Z", "hlc": 117964800000000000, "key": "6b00",
			"origin": "a0010000000000000000000000000000", "peer": "R", "table": "t"}],
		"cluster_map": {"applied_at": "2031-05-06T05:08:09.123Z", "carried": ["orders"], "conflict": {"generation": 7, "publisher": "R"}, "filling": ["stock"], "generation": 7,
			"members": ["A", "B", "R"], "members_below_v4": ["R"], "placement": {"orders": ["A", "B"], "stock": ["R"]}, "publisher": "A",
			"removals": [{"table": "lines", "waiting_for": ["R"]}],
			"versions": [{"generation": 7, "max_version": 4, "name": "A"}, {"generation": 6, "max_version": 4, "name": "B"}, {"generation": 0, "max_version": 3, "name": "R"}]},
		"counters": {"antientropy_asks_abandoned": 42, "antientropy_below_horizon": 35, "antientropy_conflicts": 36, "antientropy_in_flight": 34, "antientropy_passes": 37, "antientropy_peer_behind": 51,
			"antientropy_ranges_compared": 31, "antientropy_ranges_differing": 32, "antientropy_records_repaired": 33, "apply_failures": 38,
			"bad_chunks": 28, "bytes_freed": 58, "cluster_map_adopted": 43, "cluster_map_conflicts": 44, "cluster_map_refused": 66, "connection_errors": 30, "connections_refused": 29, "copies_busy": 26, "copies_completed": 22, "copies_refused": 27, "copies_resumed": 21,
			"copies_served": 25, "copies_started": 20, "copy_bytes": 24, "copy_records": 23, "copy_records_held_back": 41, "copy_sources_below_v4": 68,
			"divergences": 16, "duplicates_received": 12, "entries_purged": 18, "entries_refused_excluded": 67, "fill_bytes": 65, "fill_records": 60,
			"forwards_answered": 61, "forwards_no_carrier": 62, "forwards_not_carried": 63, "forwards_served": 64, "gaps_detected": 13,
			"hub_writes_refused": 81, "leaf_own_writes_back": 80, "leaf_writes_duplicate": 76, "leaf_writes_refused": 78, "leaf_writes_reoriginated": 75, "leaf_writes_twice": 77, "leaves_refused": 79,
			"members_refused": 45,
			"named_feed_acks": 73, "named_feed_acks_ahead": 74, "named_feed_holds_lapsed": 72, "named_feeds_refused": 71, "origin_rewinds": 39, "protocol_errors": 15,
			"purged_answers": 17, "records_damaged": 40, "records_freed": 57, "requests_forwarded": 48, "requests_late": 50, "requests_refused": 49,
			"requests_sent": 46, "requests_served": 47, "resends_requested": 14, "skips_received": 54, "skips_refused": 55, "skips_sent": 53, "tables_filled": 59, "tables_removed": 56, "tombstones_dropped": 19, "txns_applied": 11,
			"writes_refused_lock_required": 70, "writes_refused_mixed_placement": 51, "writes_refused_not_carried": 52, "writes_untokened_fenced": 69},
		"feeds": {"bytes": 0, "closed": {}, "events": 0, "open": 0, "opened": 0, "refused": {}},
		"hub": {"connected": true, "core_seq": 38, "horizon": "2031-05-06T05:08:09.123Z", "hub_seq": 9001, "last_refused_reason": "too-old",
			"last_refused_seq": 17, "name": "H", "reoriginated_seq": 40, "refused": 2},
		"leaves": {"connected": 120, "held": 1,
			"lag": [{"le_ms": 100, "leaves": 100}, {"le_ms": 1000, "leaves": 15}, {"le_ms": 10000, "leaves": 4}, {"le_ms": null, "leaves": 1}],
			"marks": 130, "max": 500, "slowest": [{"behind_ms": 60000, "name": "L7", "seq": 12}, {"behind_ms": 2500, "name": "L3", "seq": 900}]},
		"locks": {"caller": {"acquired": 0, "fence_timeouts": 0, "fence_waits": 0, "refused": {}, "released": 0, "renewed": 0, "writes": 0, "writes_lost": 0},
			"confirms_lost": 0, "confirms_waiting": 0, "delegate_forwards": 0, "delegated": 0, "delegated_grants": 0, "delegations_out": 0, "delegations_renewed": 0, "expired": 0, "generation": 0, "granted": 0, "held": 0, "home": false, "home_error": null, "incarnation": 0,
			"leases": 0, "moved_away": 0, "moves_pending": 0, "overlaps": 0, "queued": 0, "refused": {}, "released": 0, "renewed": 0, "timed_out": 0, "waiting": 0},
		"named_feeds": [
			{"held_bytes": 2500, "hold_bytes": 1073741824, "lag_bytes": 3000, "lag_entries": 12, "lapsed": false, "name": "audit",
				"position": "a0010000000000000000000000000000:7,b0010000000000000000000000000000:40", "table": "orders"},
			{"held_bytes": 0, "hold_bytes": 0, "lag_bytes": 0, "lag_entries": 0, "lapsed": true, "name": "search", "position": "", "table": "stock"}],
		"node": {"authenticated": true,
			"clock": {"bound_ms": 500, "measured_peers": 3, "off_peers": 2, "offset_ms": -86400001.5, "refusing_writes": true},
			"name": "B", "origin": "b0010000000000000000000000000000", "protocol": {"max": 2, "min": 1}, "retain_hold_s": 5400,
			"rewound": {"at": "2031-05-06T05:08:09.123Z", "hash": "abcd000000000000000000000000000000000000000000000000000000000000",
				"how": "subscribe", "own_seq": 4, "peer": "R", "seq": 9},
			"storage": {"code": "storage-full", "message": "storage storage-full in free-space guard: 3067904 bytes free", "retries": 3,
				"since": "2031-05-06T05:08:09.123Z", "state": "degraded"},
			"tls": null},
		"origins": [
			{"applied_seq": 7, "apply_error": null, "apply_failures": 0, "diverged": true, "floor_seq": 4, "head_seq": 10, "health": "stalled", "lag_ms": 250, "lag_seq": 3, "log_bytes": 777, "name": "A",
				"origin": "a0010000000000000000000000000000", "rewound": true, "source_changes": 2, "source_peer": "R",
				"stuck": "clock-ahead", "stuck_until": "2031-05-06T05:08:09.123Z"},
			{"applied_seq": 42, "apply_error": "entry 43: damaged", "apply_failures": 5, "diverged": false, "floor_seq": 0, "head_seq": 42, "health": "healthy",
				"lag_ms": 0, "lag_seq": 0, "log_bytes": 0, "name": "B", "origin": "b0010000000000000000000000000000", "rewound": false, "source_changes": 0,
				"source_peer": "", "stuck": "apply-failed", "stuck_until": "2031-05-06T05:09:00.000Z"}
		],
		"peers": [
			{"antientropy_bytes_in": 38, "antientropy_bytes_out": 39, "bytes_in": 82, "bytes_out": 83, "capabilities": ["cap-a", "cap-b"], "clock_offset_ms": 86400001.5, "connected": true,
				"copy": {"state": "receiving", "records": 100, "bytes": 5000, "tables": 4, "tables_done": 2, "total_records": 400,
					"total_bytes": 20000, "rate_bytes_per_s": 2500, "eta_s": 6, "resumes": 1},
				"exclude": ["audit", "cache"], "frames_in": 86, "frames_out": 87, "health": "falling-behind", "held_bytes": 4096, "lag_seq": 7, "last_contact": "2031-05-06T05:08:09.987Z",
				"last_dial_error": {"at": "2031-05-06T05:08:09.123Z", "code": "dial-refused", "message": "dial tcp 127.0.0.1:7400: connect: connection refused"},
				"last_error": {"at": "2031-05-06T05:08:09Z", "class": "protocol", "code": "divergence", "message": "entry 5 of A: hash differs"},
				"messages_in": 84, "messages_out": 85, "mode": "receive", "name": "R", "reconnects": 5, "retention_held_bytes": 888, "retention_held_entries": 6, "retention_hold_age_s": 1.5,
				"rtt_ms": 1.234, "state": "streaming", "url": "ws://127.0.0.1:7400", "version": 2}
		],
		"refusals": [
			{"at": "2031-05-06T05:08:09.123Z", "class": "refused", "code": "tls-unknown-ca", "dialed": false,
				"message": "signed by unknown authority", "peer": "", "remote": "10.0.0.9:4000"},
			{"at": "2031-05-06T05:08:10.000Z", "class": "refused", "code": "auth-failed", "dialed": true,
				"message": "MAC", "peer": "R", "remote": "wss://10.0.0.2:7400/v1/replicate"}
		],
		"snapshots": {"open": 0, "opened": 0, "refused_expired": 0, "refused_too_many": 0, "timed_out": 0}
	}`},
	{"no origins, a peer without capabilities or error, placed tables none of which it carries", replica.Status{
		Node:       replica.NodeStatus{Name: "N", Origin: wire.OriginID{0x01}, ProtocolMin: 1, ProtocolMax: 1},
		Peers:      []replica.PeerStatus{{Name: "P", State: replica.PeerBackoff, URL: "ws://h:1", Health: replica.HealthStalled}},
		ClusterMap: replica.MapStatus{Generation: 2, Placement: map[string][]string{"t": {"X"}}},
	}, `{
		"antientropy_conflicts": [],
		"cluster_map": {"carried": [], "generation": 2, "placement": {"t": ["X"]}, "versions": []},
		"counters": {"antientropy_asks_abandoned": 0, "antientropy_below_horizon": 0, "antientropy_conflicts": 0, "antientropy_in_flight": 0, "antientropy_passes": 0, "antientropy_peer_behind": 0,
			"antientropy_ranges_compared": 0, "antientropy_ranges_differing": 0, "antientropy_records_repaired": 0, "apply_failures": 0,
			"bad_chunks": 0, "bytes_freed": 0, "cluster_map_adopted": 0, "cluster_map_conflicts": 0, "cluster_map_refused": 0, "connection_errors": 0, "connections_refused": 0, "copies_busy": 0, "copies_completed": 0, "copies_refused": 0, "copies_resumed": 0,
			"copies_served": 0, "copies_started": 0, "copy_bytes": 0, "copy_records": 0, "copy_records_held_back": 0, "copy_sources_below_v4": 0,
			"divergences": 0, "duplicates_received": 0, "entries_purged": 0, "entries_refused_excluded": 0, "fill_bytes": 0, "fill_records": 0,
			"forwards_answered": 0, "forwards_no_carrier": 0, "forwards_not_carried": 0, "forwards_served": 0, "gaps_detected": 0,
			"hub_writes_refused": 0, "leaf_own_writes_back": 0, "leaf_writes_duplicate": 0, "leaf_writes_refused": 0, "leaf_writes_reoriginated": 0, "leaf_writes_twice": 0, "leaves_refused": 0,
			"members_refused": 0,
			"named_feed_acks": 0, "named_feed_acks_ahead": 0, "named_feed_holds_lapsed": 0, "named_feeds_refused": 0, "origin_rewinds": 0, "protocol_errors": 0,
			"purged_answers": 0, "records_damaged": 0, "records_freed": 0, "requests_forwarded": 0, "requests_late": 0, "requests_refused": 0,
			"requests_sent": 0, "requests_served": 0, "resends_requested": 0, "skips_received": 0, "skips_refused": 0, "skips_sent": 0, "tables_filled": 0, "tables_removed": 0, "tombstones_dropped": 0, "txns_applied": 0,
			"writes_refused_lock_required": 0, "writes_refused_mixed_placement": 0, "writes_refused_not_carried": 0, "writes_untokened_fenced": 0},
		"feeds": {"bytes": 0, "closed": {}, "events": 0, "open": 0, "opened": 0, "refused": {}},
		"locks": {"caller": {"acquired": 0, "fence_timeouts": 0, "fence_waits": 0, "refused": {}, "released": 0, "renewed": 0, "writes": 0, "writes_lost": 0},
			"confirms_lost": 0, "confirms_waiting": 0, "delegate_forwards": 0, "delegated": 0, "delegated_grants": 0, "delegations_out": 0, "delegations_renewed": 0, "expired": 0, "generation": 0, "granted": 0, "held": 0, "home": false, "home_error": null, "incarnation": 0,
			"leases": 0, "moved_away": 0, "moves_pending": 0, "overlaps": 0, "queued": 0, "refused": {}, "released": 0, "renewed": 0, "timed_out": 0, "waiting": 0},
		"named_feeds": [],
		"node": {"authenticated": false,
			"clock": {"bound_ms": 0, "measured_peers": 0, "off_peers": 0, "offset_ms": null, "refusing_writes": false},
			"name": "N", "origin": "01000000000000000000000000000000", "protocol": {"max": 1, "min": 1}, "retain_hold_s": 0, "rewound": null, "storage": {"retries": 0, "state": "ok"}, "tls": null},
		"origins": [],
		"peers": [
			{"antientropy_bytes_in": 0, "antientropy_bytes_out": 0, "bytes_in": 0, "bytes_out": 0, "capabilities": [], "clock_offset_ms": null, "connected": false, "copy": null, "exclude": [], "frames_in": 0, "frames_out": 0, "health": "stalled", "held_bytes": 0, "lag_seq": null, "last_contact": null, "last_dial_error": null, "last_error": null,
				"messages_in": 0, "messages_out": 0, "mode": "both", "name": "P", "reconnects": 0,
				"retention_held_bytes": 0, "retention_held_entries": 0, "retention_hold_age_s": 0, "rtt_ms": 0, "state": "backoff", "url": "ws://h:1", "version": 0}
		],
		"refusals": [],
		"snapshots": {"open": 0, "opened": 0, "refused_expired": 0, "refused_too_many": 0, "timed_out": 0}
	}`},
	{"the zero status", replica.Status{}, `{
		"antientropy_conflicts": [],
		"cluster_map": {"generation": 0, "versions": []},
		"counters": {"antientropy_asks_abandoned": 0, "antientropy_below_horizon": 0, "antientropy_conflicts": 0, "antientropy_in_flight": 0, "antientropy_passes": 0, "antientropy_peer_behind": 0,
			"antientropy_ranges_compared": 0, "antientropy_ranges_differing": 0, "antientropy_records_repaired": 0, "apply_failures": 0,
			"bad_chunks": 0, "bytes_freed": 0, "cluster_map_adopted": 0, "cluster_map_conflicts": 0, "cluster_map_refused": 0, "connection_errors": 0, "connections_refused": 0, "copies_busy": 0, "copies_completed": 0, "copies_refused": 0, "copies_resumed": 0,
			"copies_served": 0, "copies_started": 0, "copy_bytes": 0, "copy_records": 0, "copy_records_held_back": 0, "copy_sources_below_v4": 0,
			"divergences": 0, "duplicates_received": 0, "entries_purged": 0, "entries_refused_excluded": 0, "fill_bytes": 0, "fill_records": 0,
			"forwards_answered": 0, "forwards_no_carrier": 0, "forwards_not_carried": 0, "forwards_served": 0, "gaps_detected": 0,
			"hub_writes_refused": 0, "leaf_own_writes_back": 0, "leaf_writes_duplicate": 0, "leaf_writes_refused": 0, "leaf_writes_reoriginated": 0, "leaf_writes_twice": 0, "leaves_refused": 0,
			"members_refused": 0,
			"named_feed_acks": 0, "named_feed_acks_ahead": 0, "named_feed_holds_lapsed": 0, "named_feeds_refused": 0, "origin_rewinds": 0, "protocol_errors": 0,
			"purged_answers": 0, "records_damaged": 0, "records_freed": 0, "requests_forwarded": 0, "requests_late": 0, "requests_refused": 0,
			"requests_sent": 0, "requests_served": 0, "resends_requested": 0, "skips_received": 0, "skips_refused": 0, "skips_sent": 0, "tables_filled": 0, "tables_removed": 0, "tombstones_dropped": 0, "txns_applied": 0,
			"writes_refused_lock_required": 0, "writes_refused_mixed_placement": 0, "writes_refused_not_carried": 0, "writes_untokened_fenced": 0},
		"feeds": {"bytes": 0, "closed": {}, "events": 0, "open": 0, "opened": 0, "refused": {}},
		"locks": {"caller": {"acquired": 0, "fence_timeouts": 0, "fence_waits": 0, "refused": {}, "released": 0, "renewed": 0, "writes": 0, "writes_lost": 0},
			"confirms_lost": 0, "confirms_waiting": 0, "delegate_forwards": 0, "delegated": 0, "delegated_grants": 0, "delegations_out": 0, "delegations_renewed": 0, "expired": 0, "generation": 0, "granted": 0, "held": 0, "home": false, "home_error": null, "incarnation": 0,
			"leases": 0, "moved_away": 0, "moves_pending": 0, "overlaps": 0, "queued": 0, "refused": {}, "released": 0, "renewed": 0, "timed_out": 0, "waiting": 0},
		"named_feeds": [],
		"node": {"authenticated": false,
			"clock": {"bound_ms": 0, "measured_peers": 0, "off_peers": 0, "offset_ms": null, "refusing_writes": false},
			"name": "", "origin": "00000000000000000000000000000000", "protocol": {"max": 0, "min": 0}, "retain_hold_s": 0, "rewound": null, "storage": {"retries": 0, "state": "ok"}, "tls": null},
		"origins": [],
		"peers": [],
		"refusals": [],
		"snapshots": {"open": 0, "opened": 0, "refused_expired": 0, "refused_too_many": 0, "timed_out": 0}
	}`},
}

func ptr[T any](v T) *T { return &v }

// TestStatusDocEncoding pins the document byte for byte, and that a reader decoding it
// gets back what encodes to the same bytes (plait status and the harness decode it).
func TestStatusDocEncoding(t *testing.T) {
	for _, c := range statusGoldens {
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(c.doc)); err != nil {
			t.Fatalf("%s: the golden document: %v", c.name, err)
		}
		got, err := json.Marshal(httpapi.NewStatusDoc(c.status))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, want.Bytes())
			continue
		}
		var back httpapi.StatusDoc
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%s: decoding: %v", c.name, err)
		}
		if again, _ := json.Marshal(back); !bytes.Equal(again, got) {
			t.Errorf("%s: decoded and encoded again:\n got %s\nwant %s", c.name, again, got)
		}
	}
}

// TestStatusDocLag: an origin behind its head shows lag_seq = head_seq - applied_seq, not
// 0 and not either seq.
func TestStatusDocLag(t *testing.T) {
	st := replica.Status{Origins: []replica.OriginStatus{{Name: "A", AppliedSeq: 7, HeadSeq: 10, LagSeq: 3, LagMs: 40}}}
	b, err := json.Marshal(httpapi.NewStatusDoc(st))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Origins []map[string]any `json:"origins"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	o := doc.Origins[0]
	if o["head_seq"] != 10.0 || o["applied_seq"] != 7.0 || o["lag_seq"] != 3.0 || o["lag_ms"] != 40.0 {
		t.Errorf("origin A at 7 of 10: %s, want head_seq 10, applied_seq 7, lag_seq 3, lag_ms 40", b)
	}
}

// TestStatusDocTLS: node.tls carries the node's certificate as SetTLS gives it, and is
// null again without TLS.
func TestStatusDocTLS(t *testing.T) {
	d := httpapi.NewStatusDoc(replica.Status{})
	d.SetTLS(&node.TLSStatus{Subject: "CN=A", NodeName: "A", Expiry: time.Date(2028, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)),
		AcceptPlaintext: true, Reloads: 2, ReloadFailures: 1, LastReloadError: "bad file"})
	got, err := json.Marshal(d.Node.TLS)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"accept_plaintext":true,"expiry":"2028-01-02T02:04:05Z","last_reload_error":"bad file","node_name":"A","reload_failures":1,"reloads":2,"subject":"CN=A"}`
	if string(got) != want {
		t.Fatalf("node.tls\n got %s\nwant %s", got, want)
	}
	d.SetTLS(nil)
	if d.Node.TLS != nil {
		t.Fatal("node.tls without TLS is not null")
	}
}

// TestStatusFieldsMapped: every field of the replica's status parts (node, origins[],
// peers[], cluster_map and its conflict and versions[]) is a field of the document, under its name in snake case or the one this test
// lists, or is listed as left out with why; and every field of the document comes from
// one. A status field added to the replica without its place in the document, or to the
// document with no source, fails here (the goldens above then pin its encoding, and the
// contract's example its documentation).
func TestStatusFieldsMapped(t *testing.T) {
	for _, c := range []struct {
		from, to reflect.Type
		renamed  map[string]string // replica field → document field
		left     map[string]string // replica field → why the document leaves it out
		shell    map[string]string // document field → where it comes from, not the replica
	}{
		{reflect.TypeFor[replica.NodeStatus](), reflect.TypeFor[httpapi.NodeDoc](),
			map[string]string{"ProtocolMin": "protocol", "ProtocolMax": "protocol", "RetainHold": "retain_hold_s"},
			nil, map[string]string{"tls": "the shell's certificate (node.TLS, SetTLS)"}},
		{reflect.TypeFor[replica.OriginStatus](), reflect.TypeFor[httpapi.OriginDoc](), nil,
			map[string]string{"ApplyFailedSeq": "apply_error names the entry", "ApplyFailedAt": "apply_error is the last failure; its time is the retry's business"},
			nil},
		{reflect.TypeFor[replica.PeerStatus](), reflect.TypeFor[httpapi.PeerDoc](),
			map[string]string{"RTT": "rtt_ms", "ClockOffset": "clock_offset_ms", "RetentionHoldAge": "retention_hold_age_s", "Behind": "lag_seq",
				"Stats": "antientropy_bytes_in", "Link": "mode"},
			map[string]string{"Conn": "an id inside the process", "Origin": "the peer's origin is in origins[]", "Dialed": "url says whether this node dials it"},
			map[string]string{"antientropy_bytes_out": "Stats, as antientropy_bytes_in", "exclude": "Link, as mode",
				"bytes_in": "Stats, as antientropy_bytes_in", "bytes_out": "Stats, as antientropy_bytes_in",
				"messages_in": "Stats, as antientropy_bytes_in", "messages_out": "Stats, as antientropy_bytes_in",
				"frames_in": "Stats, as antientropy_bytes_in", "frames_out": "Stats, as antientropy_bytes_in"}},
		{reflect.TypeFor[replica.MapStatus](), reflect.TypeFor[httpapi.ClusterMapDoc](), nil,
			map[string]string{"Document": "GET /v1/cluster/map answers it"}, nil},
		{reflect.TypeFor[replica.MapConflict](), reflect.TypeFor[httpapi.MapConflictDoc](), nil, nil, nil},
		{reflect.TypeFor[replica.MemberVersion](), reflect.TypeFor[httpapi.MemberVersionDoc](), nil, nil, nil},
		{reflect.TypeFor[replica.NamedFeedStatus](), reflect.TypeFor[httpapi.NamedFeedDoc](), nil, nil, nil},
		{reflect.TypeFor[replica.HubStatus](), reflect.TypeFor[httpapi.HubDoc](), nil, nil, nil},
		{reflect.TypeFor[replica.LeavesStatus](), reflect.TypeFor[httpapi.LeavesDoc](), nil,
			map[string]string{"LeavesRefusedByCode": "counters.leaves_refused, and its metric's series per code",
				"WritesRefusedByReason": "counters.leaf_writes_refused, and its metric's series per reason"}, nil},
		{reflect.TypeFor[replica.LeafLag](), reflect.TypeFor[httpapi.LeafLagDoc](), nil, nil, nil},
		{reflect.TypeFor[replica.LeafBehind](), reflect.TypeFor[httpapi.LeafBehindDoc](), nil, nil, nil},
	} {
		doc := map[string]bool{}
		for f := range c.to.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			doc[name] = false
		}
		for f := range c.from.Fields() {
			if _, ok := c.left[f.Name]; ok {
				continue
			}
			name, ok := c.renamed[f.Name]
			if !ok {
				name = snake(f.Name)
			}
			if _, ok := doc[name]; !ok {
				t.Errorf("%s.%s has no field %q in %s, and is not listed as left out", c.from.Name(), f.Name, name, c.to.Name())
				continue
			}
			doc[name] = true
		}
		for name, sourced := range doc {
			if _, ok := c.shell[name]; !sourced && !ok {
				t.Errorf("%s.%s comes from no field of %s", c.to.Name(), name, c.from.Name())
			}
		}
	}
}

// snake is a Go field name in snake case: AppliedSeq is applied_seq, URL is url.
func snake(s string) string {
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		// A capital starts a word after a small letter, or before one after a capital
		// (an initialism ends: HTTPServer is http_server).
		if unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
