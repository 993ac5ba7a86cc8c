package replica

import (
	"slices"
	"strconv"
	"time"

	"plait/protocol"
	"plait/protocol/clustermap"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// A leaf (docs/design.md §27.5): a node that dials one hub (Config.Hub), is not a member of
// the cluster map, and whose writes its hub re-originates. It sends its hub its own origin
// only, takes from it what the hub sends any peer, and keeps what the hub's LEAFSTATE says
// for its status and its retention.

// leafSide is a leaf's state of its hub.
type leafSide struct {
	conn ConnID // the established connection to the hub (0: none)
	// state is the hub's last LEAFSTATE (told: one came since start); refusedOnConn the
	// refused count of the last one on the connection now open.
	state         wire.LeafState
	told          bool
	refusedOnConn uint64
	// lastRefused and reason are the newest refusal any LEAFSTATE named.
	lastRefused uint64
	reason      string
}

// isLeaf reports whether this node is a leaf.
func (r *Replica) isLeaf() bool { return r.cfg.Hub != "" }

// dialsHub reports whether a connection opened with o is a leaf's to its hub: dialed, to
// the peer Config.Hub names. Its session says so in its HELLO.
func (r *Replica) dialsHub(o ConnOptions) bool {
	return r.isLeaf() && o.Role == wire.RoleDialer && o.ExpectPeer == r.cfg.Hub
}

// leafHandshakeRefused closes, at a leaf, any connection but the one it dialed to its hub
// (a leaf takes no peer), and the one to its hub when it runs below version 4 or without
// the capability leaf (no-leaf-capability: a node that does not know the role would take
// the leaf's origin as a peer's and relay it). It reports whether it closed c.
func (r *Replica) leafHandshakeRefused(c *conn, info protocol.HandshakeInfo) bool {
	if !r.isLeaf() {
		return false
	}
	if !c.toHub || info.PeerName != r.cfg.Hub {
		c.peerName, c.peerOrigin = info.PeerName, info.PeerOrigin
		r.closeConn(c, wire.CodePeerNameMismatch, "node "+r.id.Name+" is a leaf of "+r.cfg.Hub+
			": it dials its hub and takes no other peer, and "+strconv.Quote(info.PeerName)+" is not its hub dialed")
		return true
	}
	if info.Version < v4 || !slices.Contains(info.Caps, wire.CapLeaf) {
		c.peerName, c.peerOrigin = info.PeerName, info.PeerOrigin
		r.closeConn(c, wire.CodeNoLeafCapability, "hub "+info.PeerName+" runs protocol version "+
			strconv.FormatUint(info.Version, 10)+" without the capability leaf: it would take this leaf for a peer")
		return true
	}
	return false
}

// greetHub notes the established connection to the hub: no anti-entropy runs on it (a leaf
// is brought in line by its hub's log, or by a base copy from it).
func (r *Replica) greetHub(c *conn) {
	if !c.toHub {
		return
	}
	c.aeCap = false
	r.leaf.conn, r.leaf.refusedOnConn = c.id, 0
}

// onHubEvent handles what the connection to the hub reports where a leaf differs from a
// peer; it reports whether the event was handled.
func (r *Replica) onHubEvent(c *conn, ev *protocol.Event) bool {
	switch ev.Kind {
	case protocol.EventLeafState:
		r.onLeafState(ev.LeafState)
		return true
	case protocol.EventSubscribed:
		// A leaf sends its own origin only: a hub never relays what it takes from a leaf.
		return ev.Origin != r.id.Origin
	}
	// The hub's acknowledgements move its retention hold as any peer's; leafRetention
	// keeps the own log down to the core seq besides.
	return false
}

// onLeafState takes the hub's LEAFSTATE: status, the refusals counted, retention.
func (r *Replica) onLeafState(s *wire.LeafState) {
	if s.Refused > r.leaf.refusedOnConn {
		r.counters.HubWritesRefused += s.Refused - r.leaf.refusedOnConn
		r.leaf.refusedOnConn = s.Refused
	}
	if s.LastRefused > 0 {
		r.leaf.lastRefused, r.leaf.reason = s.LastRefused, s.Reason
	}
	r.leaf.state = wire.LeafState{Horizon: s.Horizon, Reoriginated: s.Reoriginated, HubSeq: s.HubSeq, Core: s.Core,
		Refused: s.Refused, LastRefused: s.LastRefused, Reason: s.Reason}
	r.leaf.told = true
}

// leafRetention holds a leaf's own log down to the core seq its hub last told (0 until
// one is told since start): an entry is safe from losing the hub only once every member
// of the core has it.
func (r *Replica) leafRetention(perOrigin map[wire.OriginID]uint64) {
	if !r.isLeaf() {
		return
	}
	if cur, ok := perOrigin[r.id.Origin]; !ok || r.leaf.state.Core < cur {
		perOrigin[r.id.Origin] = r.leaf.state.Core
	}
}

// leafWriteRefusal refuses, at a leaf, a write under a token or of a fenced table
// (leaf-no-locks, a *clustermap.Error): a leaf takes no locks.
func (r *Replica) leafWriteRefusal(tok wire.Token, ops []wire.Op) error {
	if !r.isLeaf() {
		return nil
	}
	if !tok.IsZero() {
		return &clustermap.Error{Code: string(CodeLeafNoLocks), Message: "node " + r.id.Name + " is a leaf: it takes no locks"}
	}
	for _, op := range ops {
		if r.cmap.cur.Fenced(op.Table) {
			return &clustermap.Error{Code: string(CodeLeafNoLocks), Message: "table " + string(op.Table) +
				" is fenced, and node " + r.id.Name + " is a leaf: it takes no locks"}
		}
	}
	return nil
}

// maxTxn is the largest transaction encoding a local write may have: at a leaf, room is
// left for the leaf block its hub adds (format 3).
func (r *Replica) maxTxn() int {
	if r.isLeaf() {
		return r.cfg.Write.MaxTxn - wire.LeafBlockSize
	}
	return r.cfg.Write.MaxTxn
}

// leafEntry is applied's view of a format-3 entry (docs/design.md §27.5): at the leaf it
// names, its operations are the leaf's own writes come back, no-ops (their versions are the
// ones it wrote), never conflicts; on a hub it notes the leaf's mark in use.
func (r *Replica) leafEntry(v *wire.TxnView, b *store.Batch) {
	if v.Format() != wire.TxnFormat3 {
		return
	}
	r.noteLeafSeen(v)
	if v.Leaf.Origin == r.id.Origin {
		r.counters.LeafOwnWritesBack += uint64(v.NumOps)
		b.Records = b.Records[:0]
	}
}

// HubStatus reports a leaf's view of its hub (nil when this node is not a leaf).
func (r *Replica) HubStatus(now time.Time) *HubStatus {
	if !r.isLeaf() {
		return nil
	}
	s := &HubStatus{Name: r.cfg.Hub, ReoriginatedSeq: r.leaf.state.Reoriginated, HubSeq: r.leaf.state.HubSeq,
		CoreSeq: r.leaf.state.Core, Refused: r.counters.HubWritesRefused, LastRefusedSeq: r.leaf.lastRefused,
		LastRefusedReason: r.leaf.reason}
	if c := r.conns[r.leaf.conn]; c != nil && c.established && c.sess.Connected(now) {
		s.Connected = true
	}
	if h := r.leaf.state.Horizon; h != 0 {
		s.Horizon = time.UnixMilli(int64(h.WallMillis())).UTC()
	}
	return s
}
