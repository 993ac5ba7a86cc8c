package httpapi

import (
	"encoding/hex"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"plait/protocol"
	"plait/protocol/replica"
	"plait/shells/native/node"
)

// metrics is the plait_* metrics of docs/contract.md §9, read from the node's status at each scrape.
type metrics struct{ n *node.Node }

var (
	descApplied      = prometheus.NewDesc("plait_origin_applied_seq", "Highest seq of the origin applied here.", []string{"origin", "origin_name"}, nil)
	descHead         = prometheus.NewDesc("plait_origin_head_seq", "Highest seq of the origin known here.", []string{"origin", "origin_name"}, nil)
	descLag          = prometheus.NewDesc("plait_origin_lag_seconds", "HLC time between the newest known and the newest applied entry of the origin.", []string{"origin", "origin_name"}, nil)
	descFloor        = prometheus.NewDesc("plait_origin_floor_seq", "Highest seq of the origin purged from the log here (0: none).", []string{"origin", "origin_name"}, nil)
	descLogBytes     = prometheus.NewDesc("plait_origin_log_bytes", "Bytes of transaction encodings the origin's log holds here.", []string{"origin", "origin_name"}, nil)
	descStuck        = prometheus.NewDesc("plait_origin_stuck", "1 while the origin's next entry is held back: stuck apply-failed (it failed --apply-retries times in a row) or clock-ahead.", []string{"origin", "origin_name"}, nil)
	descHeld         = prometheus.NewDesc("plait_peer_retention_held_bytes", "Bytes of log entries the peer's retention holds kept from the last retention step.", []string{"peer"}, nil)
	descConnected    = prometheus.NewDesc("plait_peer_connected", "1 while the peer's connection streams with fresh liveness.", []string{"peer"}, nil)
	descClock        = prometheus.NewDesc("plait_peer_clock_offset_seconds", "The peer's clock minus this node's, estimated from PING/PONG (only for peers that send their time: protocol version 3).", []string{"peer"}, nil)
	descStorage      = prometheus.NewDesc("plait_storage_degraded", "1 while the node's storage is degraded (full, or a write or sync failed): local writes are refused and replication pauses until the store reopens.", nil, nil)
	descRewound      = prometheus.NewDesc("plait_origin_rewound", "1 while this node's own origin is found rewound (restored from an older copy): local writes are refused with origin-rewound until plait reseed.", nil, nil)
	descRefusing     = prometheus.NewDesc("plait_clock_refusing_writes", "1 while a majority of the measured peers see this node's clock beyond --max-clock-offset and local writes are refused.", nil, nil)
	descOriginHealth = prometheus.NewDesc("plait_origin_health", "1 for the origin's health here (healthy, catching-up, falling-behind or stalled), 0 for the other three.", []string{"origin", "origin_name", "health"}, nil)
	descPeerHealth   = prometheus.NewDesc("plait_peer_health", "1 for the peer's health (healthy, catching-up, falling-behind or stalled; the best of its connections), 0 for the other three.", []string{"peer", "health"}, nil)
	descHoldAge      = prometheus.NewDesc("plait_peer_retention_hold_age_seconds", "How long the peer's oldest hold that keeps log entries back has not advanced; it lapses at plait_retention_hold_seconds.", []string{"peer"}, nil)
	descRetainHold   = prometheus.NewDesc("plait_retention_hold_seconds", "--retain-hold: how long a peer's hold keeps entries back without advancing before it lapses.", nil, nil)
	descClockBound   = prometheus.NewDesc("plait_clock_max_offset_seconds", "--max-clock-offset: the bound on clock offset (0: no bound).", nil, nil)
	descReconnects   = prometheus.NewDesc("plait_peer_reconnects_total", "Dials of the peer after the first, since start.", []string{"peer"}, nil)
	descCertExpiry   = prometheus.NewDesc("plait_tls_cert_expiry_timestamp_seconds", "When this node's peer certificate expires (Unix time).", nil, nil)
	descReloads      = prometheus.NewDesc("plait_tls_reloads_total", "Reloads of the peer certificate files, by result (ok: loaded; failed: refused, the loaded ones kept).", []string{"result"}, nil)
	descMapGen       = prometheus.NewDesc("plait_cluster_map_generation", "The generation of the cluster map this node holds (0: none).", nil, nil)
	// Hubs and leaves (docs/contract.md §26.6): a leaf's hub, a hub's leaves; only on a
	// leaf and on a hub.
	descHubConnected = prometheus.NewDesc("plait_hub_connected", "On a leaf: 1 while its link to its hub is established.", nil, nil)
	descReoriginated = prometheus.NewDesc("plait_leaf_reoriginated_seq", "On a leaf: the highest of its own seqs its hub re-originated (or refused).", nil, nil)
	descCoreSeq      = prometheus.NewDesc("plait_leaf_core_seq", "On a leaf: the highest of its own seqs every member of the core has applied (the write checkpoint).", nil, nil)
	descLeavesMax    = prometheus.NewDesc("plait_leaves_max", "On a hub: --max-leaves.", nil, nil)
	descLeavesUp     = prometheus.NewDesc("plait_leaves_connected", "On a hub: leaves connected now.", nil, nil)
	descLeafMarks    = prometheus.NewDesc("plait_leaf_marks", "On a hub: the leaves whose high-water mark this hub keeps.", nil, nil)
	descLeavesHeld   = prometheus.NewDesc("plait_leaves_held", "On a hub: connected leaves whose channel is held back, for the clock or the gate.", nil, nil)
	descLeavesLagged = prometheus.NewDesc("plait_leaves_lag", "On a hub: connected leaves in each lag band (how far this hub is behind each, at most le_ms milliseconds and above the band before; +Inf: the rest).", []string{"le_ms"}, nil)
	// Named feeds (docs/contract.md §24.7): one series per feed.
	descFeedLagEntries = prometheus.NewDesc("plait_named_feed_lag_entries", "Entries this node applied past the named feed's acknowledged position, summed over the origins.", []string{"feed", "table"}, nil)
	descFeedLagBytes   = prometheus.NewDesc("plait_named_feed_lag_bytes", "Bytes of the log entries above the named feed's acknowledged position that the logs still hold.", []string{"feed", "table"}, nil)
	descFeedHeld       = prometheus.NewDesc("plait_named_feed_held_bytes", "Bytes of log entries the last retention step kept only because of the named feed.", []string{"feed", "table"}, nil)
	descFeedHoldBytes  = prometheus.NewDesc("plait_named_feed_hold_bytes", "The named feed's hold_bytes: past it, its hold lapses.", []string{"feed", "table"}, nil)
	descFeedLapsed     = prometheus.NewDesc("plait_named_feed_lapsed", "1 while the named feed's hold is lapsed: retention purges past its position.", []string{"feed", "table"}, nil)
)

// A peer's traffic over all its connections since start (replica.Status.Traffic): counters
// that never go back while connections come and go.
var (
	descPeerBytes  = prometheus.NewDesc("plait_peer_bytes_total", "Bytes of the messages exchanged with the peer since start, over all its connections, by direction (in: received, out: sent).", []string{"peer", "direction"}, nil)
	descPeerFrames = prometheus.NewDesc("plait_peer_frames_total", "Frames exchanged with the peer since start, over all its connections, by direction and frame type (its name in protocol/SPEC.md; unknown: every type this build does not know).", []string{"peer", "direction", "frame"}, nil)
)

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descApplied, descHead, descLag, descFloor, descLogBytes, descStuck, descConnected, descReconnects, descHeld,
		descClock, descRefusing, descStorage, descRewound, descCertExpiry, descReloads, descOriginHealth, descPeerHealth, descHoldAge, descRetainHold, descClockBound, descMapGen,
		descFeedLagEntries, descFeedLagBytes, descFeedHeld, descFeedHoldBytes, descFeedLapsed,
		descHubConnected, descReoriginated, descCoreSeq, descLeavesMax, descLeavesUp, descLeafMarks, descLeavesHeld, descLeavesLagged,
		descPeerBytes, descPeerFrames} {
		ch <- d
	}
	for _, d := range snapshotDescs {
		ch <- d
	}
	for _, f := range counterFields {
		ch <- f.desc
	}
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	st, err := m.n.Status()
	if err != nil {
		return
	}
	for _, o := range st.Origins {
		id := hex.EncodeToString(o.Origin[:])
		ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(o.AppliedSeq), id, o.Name)
		ch <- prometheus.MustNewConstMetric(descHead, prometheus.GaugeValue, float64(o.HeadSeq), id, o.Name)
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(o.LagMs)/1000, id, o.Name)
		ch <- prometheus.MustNewConstMetric(descFloor, prometheus.GaugeValue, float64(o.FloorSeq), id, o.Name)
		ch <- prometheus.MustNewConstMetric(descLogBytes, prometheus.GaugeValue, float64(o.LogBytes), id, o.Name)
		stuck := 0.0
		if o.Stuck != "" {
			stuck = 1
		}
		ch <- prometheus.MustNewConstMetric(descStuck, prometheus.GaugeValue, stuck, id, o.Name)
		for _, h := range replica.Healths {
			ch <- prometheus.MustNewConstMetric(descOriginHealth, prometheus.GaugeValue, is(o.Health == h), id, o.Name, string(h))
		}
	}
	// One series per peer name: a connection still in its handshake has no name yet, and
	// a peer may show twice (its connection and this node's, both dialing).
	connected, reconnects, held, holdAge := map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}
	health := map[string]replica.Health{}
	clock := map[string]float64{} // measured peers only: an unmeasured one has no series
	var names []string
	for _, p := range st.Peers {
		if p.Name == "" {
			continue
		}
		if _, seen := connected[p.Name]; !seen {
			names = append(names, p.Name)
			health[p.Name] = p.Health
		} else {
			health[p.Name] = replica.BetterHealth(health[p.Name], p.Health)
		}
		if p.Connected {
			connected[p.Name] = 1
		} else {
			connected[p.Name] += 0
		}
		reconnects[p.Name] = max(reconnects[p.Name], float64(p.Reconnects))
		held[p.Name] = float64(p.RetentionHeldBytes) // per peer name: the same for each of its rows
		holdAge[p.Name] = p.RetentionHoldAge.Seconds()
		if p.ClockOffset != nil {
			clock[p.Name] = p.ClockOffset.Seconds()
		}
	}
	for _, name := range names {
		ch <- prometheus.MustNewConstMetric(descConnected, prometheus.GaugeValue, connected[name], name)
		ch <- prometheus.MustNewConstMetric(descReconnects, prometheus.CounterValue, reconnects[name], name)
		ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, held[name], name)
		ch <- prometheus.MustNewConstMetric(descHoldAge, prometheus.GaugeValue, holdAge[name], name)
		for _, h := range replica.Healths {
			ch <- prometheus.MustNewConstMetric(descPeerHealth, prometheus.GaugeValue, is(health[name] == h), name, string(h))
		}
		if off, ok := clock[name]; ok {
			ch <- prometheus.MustNewConstMetric(descClock, prometheus.GaugeValue, off, name)
		}
	}
	collectTraffic(ch, st.Traffic)
	for _, f := range st.NamedFeeds {
		ch <- prometheus.MustNewConstMetric(descFeedLagEntries, prometheus.GaugeValue, float64(f.LagEntries), f.Name, f.Table)
		ch <- prometheus.MustNewConstMetric(descFeedLagBytes, prometheus.GaugeValue, float64(f.LagBytes), f.Name, f.Table)
		ch <- prometheus.MustNewConstMetric(descFeedHeld, prometheus.GaugeValue, float64(f.HeldBytes), f.Name, f.Table)
		ch <- prometheus.MustNewConstMetric(descFeedHoldBytes, prometheus.GaugeValue, float64(f.HoldBytes), f.Name, f.Table)
		ch <- prometheus.MustNewConstMetric(descFeedLapsed, prometheus.GaugeValue, is(f.Lapsed), f.Name, f.Table)
	}
	ch <- prometheus.MustNewConstMetric(descRetainHold, prometheus.GaugeValue, st.Node.RetainHold.Seconds())
	ch <- prometheus.MustNewConstMetric(descClockBound, prometheus.GaugeValue, st.Node.Clock.Bound.Seconds())
	refusing := 0.0
	if st.Node.Clock.RefusingWrites {
		refusing = 1
	}
	ch <- prometheus.MustNewConstMetric(descRefusing, prometheus.GaugeValue, refusing)
	degraded := 0.0
	if st.Node.Storage.Degraded {
		degraded = 1
	}
	ch <- prometheus.MustNewConstMetric(descStorage, prometheus.GaugeValue, degraded)
	rewound := 0.0
	if st.Node.Rewound != nil {
		rewound = 1
	}
	ch <- prometheus.MustNewConstMetric(descRewound, prometheus.GaugeValue, rewound)
	ch <- prometheus.MustNewConstMetric(descMapGen, prometheus.GaugeValue, float64(st.ClusterMap.Generation))
	byCode := map[string][]replica.CodeCount{"connections_refused": st.RefusedByCode, "connection_errors": st.ErrorsByCode}
	collectHubs(ch, st, byCode)
	for i, c := range (CountersDoc{st.Counters}).List() {
		f := counterFields[i]
		if f.byCode {
			for _, cc := range byCode[c.Name] {
				ch <- prometheus.MustNewConstMetric(f.desc, prometheus.CounterValue, float64(cc.Count), string(cc.Code))
			}
			continue
		}
		ch <- prometheus.MustNewConstMetric(f.desc, prometheus.CounterValue, float64(c.Value))
	}
	collectSnapshots(m.n, ch)
	if ts := m.n.TLS(); ts != nil {
		ch <- prometheus.MustNewConstMetric(descCertExpiry, prometheus.GaugeValue, float64(ts.Expiry.Unix()))
		ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(ts.Reloads), "ok")
		ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(ts.ReloadFailures), "failed")
	}
}

// collectTraffic sends each peer's bytes and frames. Frames go by type only for the types
// with a count: the label set stays the registry's names and "unknown" (bounded by the
// build), and a peer that never sent a frame type has no series of it.
func collectTraffic(ch chan<- prometheus.Metric, traffic []replica.PeerTraffic) {
	for _, p := range traffic {
		ch <- prometheus.MustNewConstMetric(descPeerBytes, prometheus.CounterValue, float64(p.BytesIn), p.Name, "in")
		ch <- prometheus.MustNewConstMetric(descPeerBytes, prometheus.CounterValue, float64(p.BytesOut), p.Name, "out")
		for slot := range protocol.UsedFrameSlots() {
			if n := p.FramesInByType[slot]; n > 0 {
				ch <- prometheus.MustNewConstMetric(descPeerFrames, prometheus.CounterValue, float64(n), p.Name, "in", protocol.SlotName(slot))
			}
			if n := p.FramesOutByType[slot]; n > 0 {
				ch <- prometheus.MustNewConstMetric(descPeerFrames, prometheus.CounterValue, float64(n), p.Name, "out", protocol.SlotName(slot))
			}
		}
	}
}

// collectHubs sends a leaf's gauges of its hub and a hub's of its leaves, and puts the
// hub's refusals by code into byCode, for the counters' series.
func collectHubs(ch chan<- prometheus.Metric, st replica.Status, byCode map[string][]replica.CodeCount) {
	if h := st.Hub; h != nil {
		ch <- prometheus.MustNewConstMetric(descHubConnected, prometheus.GaugeValue, is(h.Connected))
		ch <- prometheus.MustNewConstMetric(descReoriginated, prometheus.GaugeValue, float64(h.ReoriginatedSeq))
		ch <- prometheus.MustNewConstMetric(descCoreSeq, prometheus.GaugeValue, float64(h.CoreSeq))
	}
	if l := st.Leaves; l != nil {
		ch <- prometheus.MustNewConstMetric(descLeavesMax, prometheus.GaugeValue, float64(l.Max))
		ch <- prometheus.MustNewConstMetric(descLeavesUp, prometheus.GaugeValue, float64(l.Connected))
		ch <- prometheus.MustNewConstMetric(descLeafMarks, prometheus.GaugeValue, float64(l.Marks))
		ch <- prometheus.MustNewConstMetric(descLeavesHeld, prometheus.GaugeValue, float64(l.Held))
		for _, b := range l.Lag {
			le := "+Inf"
			if b.LeMs != 0 {
				le = strconv.FormatUint(b.LeMs, 10)
			}
			ch <- prometheus.MustNewConstMetric(descLeavesLagged, prometheus.GaugeValue, float64(b.Leaves), le)
		}
		// The counters' series per code (replica.Counters: leaves_refused and
		// leaf_writes_refused, by-code), which only a hub counts.
		byCode["leaves_refused"], byCode["leaf_writes_refused"] = l.LeavesRefusedByCode, l.WritesRefusedByReason
	}
}

// apiMetrics is the API's own metrics (docs/contract.md §9): its refusals, and the reloads
// of its token file and HTTPS certificate with the certificate's expiry. Like the node's,
// they are reported only while the node serves.
type apiMetrics struct{ a *API }

var (
	descRefused      = prometheus.NewDesc("plait_api_refused_total", "API requests refused: without a valid bearer token (unauthorized) or with a scope too small (forbidden).", []string{"code"}, nil)
	descTokenReloads = prometheus.NewDesc("plait_api_token_reloads_total", "Reloads of --api-token-file: ok, or failed (the tokens before were kept).", []string{"result"}, nil)
	descTLSReloads   = prometheus.NewDesc("plait_http_tls_reloads_total", "Reloads of --http-tls-cert and --http-tls-key: ok, or failed (the pair before was kept).", []string{"result"}, nil)
	descTLSExpiry    = prometheus.NewDesc("plait_http_tls_cert_expiry_timestamp_seconds", "When the HTTPS certificate in use expires, in seconds since 1970.", nil, nil)
)

func (m *apiMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range slices.Concat([]*prometheus.Desc{descRefused, descTokenReloads, descTLSReloads, descTLSExpiry}, lockDescs, feedDescs) {
		ch <- d
	}
}

func (m *apiMetrics) Collect(ch chan<- prometheus.Metric) {
	a := m.a
	if !a.n.Serving() {
		return
	}
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(a.refused[0].Load()), "unauthorized")
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(a.refused[1].Load()), "forbidden")
	a.collectLocks(ch)
	a.collectFeeds(ch)
	if a.tokens != nil {
		ok, failed := a.tokens.Reloads()
		ch <- prometheus.MustNewConstMetric(descTokenReloads, prometheus.CounterValue, float64(ok), "ok")
		ch <- prometheus.MustNewConstMetric(descTokenReloads, prometheus.CounterValue, float64(failed), "failed")
	}
	if a.tls != nil {
		ok, failed := a.tls.Reloads()
		ch <- prometheus.MustNewConstMetric(descTLSReloads, prometheus.CounterValue, float64(ok), "ok")
		ch <- prometheus.MustNewConstMetric(descTLSReloads, prometheus.CounterValue, float64(failed), "failed")
		ch <- prometheus.MustNewConstMetric(descTLSExpiry, prometheus.GaugeValue, float64(a.tls.Current().Expiry().Unix()))
	}
}

// is is a state-set gauge's value: 1 for the state a series names, 0 otherwise.
func is(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
