package httpapi

import (
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"plait/protocol/vector"
	"plait/shells/native/node"
)

// The listing's pinned snapshots as the API shows them (docs/contract.md §24.5): the
// position text of as_of, the status document's snapshots object and their metrics. The
// snapshots themselves are the node's (node.OpenSnapshot).

// positionText is a vector as feed position text (docs/contract.md §24.5): ORIGINHEX:SEQ
// for each origin above seq 0, sorted by origin id, joined by commas; "" for none.
//
// TODO: use feed.Format (protocol/feed) once it is on main, and drop this copy; the test
// that pins the text (TestPositionText) holds both to one form.
func positionText(v vector.Vector) string {
	var b strings.Builder
	for _, e := range v.Entries() { // sorted by origin id
		if e.Seq == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(hex.EncodeToString(e.Origin[:]))
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(e.Seq, 10))
	}
	return b.String()
}

// SnapshotsDoc is the document's snapshots (docs/contract.md §24.5): the listing's pinned
// snapshots open now, and the counts since start.
type SnapshotsDoc struct {
	Open           int    `json:"open"`
	Opened         uint64 `json:"opened"`
	RefusedExpired uint64 `json:"refused_expired"`  // pages answered snapshot-expired
	RefusedTooMany uint64 `json:"refused_too_many"` // snapshot=new answered too-many-snapshots
	TimedOut       uint64 `json:"timed_out"`        // released --snapshot-ttl after their last page
}

// NewSnapshotsDoc is the document's snapshots from the node's.
func NewSnapshotsDoc(s node.SnapshotStatus) SnapshotsDoc {
	return SnapshotsDoc{Open: s.Open, Opened: s.Opened, RefusedExpired: s.RefusedExpired, RefusedTooMany: s.RefusedTooMany, TimedOut: s.TimedOut}
}

var (
	descSnapshotsOpen     = prometheus.NewDesc("plait_snapshots_open", "Pinned snapshots of listings open now (each holds a RocksDB snapshot).", nil, nil)
	descSnapshotsOpened   = prometheus.NewDesc("plait_snapshots_opened_total", "Pinned snapshots of listings opened (snapshot=new).", nil, nil)
	descSnapshotsTimedOut = prometheus.NewDesc("plait_snapshots_timed_out_total", "Pinned snapshots released because --snapshot-ttl passed after their last page.", nil, nil)
	descSnapshotsRefused  = prometheus.NewDesc("plait_snapshots_refused_total", "Listings from a pinned snapshot refused, by code: too-many-snapshots (at --max-snapshots), snapshot-expired (no snapshot of that id open).", []string{"code"}, nil)
	snapshotDescs         = []*prometheus.Desc{descSnapshotsOpen, descSnapshotsOpened, descSnapshotsTimedOut, descSnapshotsRefused}
)

// collectSnapshots sends the snapshot metrics; none once the node has stopped.
func collectSnapshots(n *node.Node, ch chan<- prometheus.Metric) {
	s, err := n.Snapshots()
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descSnapshotsOpen, prometheus.GaugeValue, float64(s.Open))
	ch <- prometheus.MustNewConstMetric(descSnapshotsOpened, prometheus.CounterValue, float64(s.Opened))
	ch <- prometheus.MustNewConstMetric(descSnapshotsTimedOut, prometheus.CounterValue, float64(s.TimedOut))
	ch <- prometheus.MustNewConstMetric(descSnapshotsRefused, prometheus.CounterValue, float64(s.RefusedTooMany), "too-many-snapshots")
	ch <- prometheus.MustNewConstMetric(descSnapshotsRefused, prometheus.CounterValue, float64(s.RefusedExpired), "snapshot-expired")
}
