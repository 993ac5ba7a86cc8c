package replica

import (
	"slices"
	"strings"

	"plait/protocol"
)

// Traffic is what went over a peer's connections, both ways: the session's counters of
// bytes, messages and frames (protocol.Stats), by frame type too.
type Traffic struct {
	BytesIn, BytesOut               uint64
	MessagesIn, MessagesOut         uint64
	FramesIn, FramesOut             uint64
	FramesInByType, FramesOutByType protocol.FrameCounts
}

// TrafficOf is the traffic part of a session's counters.
func TrafficOf(s *protocol.Stats) Traffic {
	return Traffic{BytesIn: s.BytesIn, BytesOut: s.BytesOut, MessagesIn: s.MessagesIn, MessagesOut: s.MessagesOut,
		FramesIn: s.FramesIn, FramesOut: s.FramesOut, FramesInByType: s.FramesInByType, FramesOutByType: s.FramesOutByType}
}

// Add adds u to t.
func (t *Traffic) Add(u *Traffic) {
	t.BytesIn += u.BytesIn
	t.BytesOut += u.BytesOut
	t.MessagesIn += u.MessagesIn
	t.MessagesOut += u.MessagesOut
	t.FramesIn += u.FramesIn
	t.FramesOut += u.FramesOut
	t.FramesInByType.Add(&u.FramesInByType)
	t.FramesOutByType.Add(&u.FramesOutByType)
}

// PeerTraffic is a peer's traffic since the replica started: every connection of that
// peer name, the ended ones and the open ones, so that the totals only grow (the
// plait_peer_*_total metrics are counters) while connections come and go.
type PeerTraffic struct {
	Name string
	Traffic
}

// trafficName is the name a connection's traffic is totalled under: the peer's name once
// the handshake told it, else the one dialed; "" (not totalled) for a connection that
// never named itself, and for a hub's leaves, which are no peers (their number is
// bounded by --max-leaves, not by the peers a node knows).
func trafficName(c *conn) string {
	if c.leaf {
		return ""
	}
	if c.peerName != "" {
		return c.peerName
	}
	return c.expect
}

// endTraffic adds an ended connection's traffic to its peer's total.
func (r *Replica) endTraffic(c *conn) {
	name := trafficName(c)
	if name == "" {
		return
	}
	st := c.sess.Stats()
	t := TrafficOf(&st)
	r.AddTraffic([]PeerTraffic{{Name: name, Traffic: t}})
}

// AddTraffic adds totals to the ended connections' (a shell that builds a new replica for
// the same process, after degraded storage, carries the old one's Traffic over so that
// the counters never go back).
func (r *Replica) AddTraffic(l []PeerTraffic) {
	if r.traffic == nil {
		r.traffic = map[string]*Traffic{}
	}
	for i := range l {
		t := r.traffic[l[i].Name]
		if t == nil {
			t = &Traffic{}
			r.traffic[l[i].Name] = t
		}
		t.Add(&l[i].Traffic)
	}
}

// Traffic is every peer's traffic since the replica started (its ended connections' and
// its open ones'), by peer name.
func (r *Replica) Traffic() []PeerTraffic {
	by := make(map[string]*Traffic, len(r.traffic)+len(r.connList))
	for name, t := range r.traffic {
		c := *t
		by[name] = &c
	}
	for _, c := range r.connList {
		name := trafficName(c)
		if name == "" {
			continue
		}
		st := c.sess.Stats()
		t := TrafficOf(&st)
		if by[name] == nil {
			by[name] = &Traffic{}
		}
		by[name].Add(&t)
	}
	l := make([]PeerTraffic, 0, len(by))
	for name, t := range by {
		l = append(l, PeerTraffic{Name: name, Traffic: *t})
	}
	slices.SortFunc(l, func(a, b PeerTraffic) int { return strings.Compare(a.Name, b.Name) })
	return l
}
