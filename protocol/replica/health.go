package replica

import (
	"slices"
	"time"

	"plait/protocol/wire"
)

// Health: the one rule that says how an origin and a peer are doing, shared by the status
// document, the status page, `plait status` and the alert rules (docs/contract.md §8.7),
// and the bounded lag history it and the status page's chart read.
//
// An origin's health is decided from what this node knows of it: its lag (in entries and
// in time), whether its next entry is held back or contradicted the log, how long it has
// waited with nothing applied, and whether its lag grew over the last HealthWindow. A
// peer's health is its connection's liveness, then the worst health of the origins it is
// the source of, then a base copy taken from it. Nothing here reads a clock: now is the
// status's input, and the history is sampled only when the shell calls SampleLag.

// Health is one of the four words of peers[].health and origins[].health, best first.
type Health string

// The healths, best first.
const (
	HealthHealthy       Health = "healthy"        // up to date, or within HealthyLag
	HealthCatchingUp    Health = "catching-up"    // behind, and applying without falling further behind
	HealthFallingBehind Health = "falling-behind" // behind, applying, and further behind than HealthWindow ago
	HealthStalled       Health = "stalled"        // held back, diverged, or waiting with nothing applied; for a peer, not live
)

// Healths are the four healths, best first.
var Healths = []Health{HealthHealthy, HealthCatchingUp, HealthFallingBehind, HealthStalled}

// BetterHealth is the better of two healths (of one peer's two connections, say).
func BetterHealth(a, b Health) Health {
	if b.rank() < a.rank() {
		return b
	}
	return a
}

// rank orders the healths, best first (worse wins in PeerHealth).
func (h Health) rank() int {
	switch h {
	case HealthHealthy:
		return 0
	case HealthCatchingUp:
		return 1
	case HealthFallingBehind:
		return 2
	}
	return 3
}

// Health and lag history defaults and bounds.
const (
	DefaultHealthyLag     = time.Second
	DefaultHealthWindow   = 10 * time.Second
	DefaultLagSampleEvery = time.Second
	DefaultLagHistory     = 15 * time.Minute
	// MaxLagSamples bounds the samples kept per origin (LagHistory / LagSampleEvery):
	// with the defaults 900, at 24 bytes a sample about 21 KiB an origin.
	MaxLagSamples = 3600
)

// LagSample is one origin's lag at one instant of the lag history.
type LagSample struct {
	At     time.Time
	LagSeq uint64
	LagMs  uint64
}

// OriginLag is one origin's lag history, oldest sample first.
type OriginLag struct {
	Origin  wire.OriginID
	Name    string
	Samples []LagSample
}

// lagRing is one origin's samples: a ring of at most cap(buf) samples.
type lagRing struct {
	buf  []LagSample
	next int // where the next sample goes once buf is full
}

func (g *lagRing) add(s LagSample, limit int) {
	if len(g.buf) < limit {
		g.buf = append(g.buf, s)
		return
	}
	g.buf[g.next] = s
	g.next = (g.next + 1) % len(g.buf)
}

// each calls f on the samples, oldest first, until f returns false.
func (g *lagRing) each(f func(LagSample) bool) {
	n := len(g.buf)
	for i := range n {
		if !f(g.buf[(g.next+i)%n]) {
			return
		}
	}
}

// lagHistory is every remote origin's samples, every peer's (how far behind this node's
// own origin it is), and when the last was taken.
type lagHistory struct {
	last  time.Time
	rings map[wire.OriginID]*lagRing
	peers map[string]*lagRing
}

// PeerLag is one peer's lag history behind this node's own origin, oldest sample first
// (LagMs is 0: the entries' times are not looked up).
type PeerLag struct {
	Peer    string
	Samples []LagSample
}

// PeerBehind is how far a peer is behind this node's own origin, as far as this node
// knows it: from the peer's position of the origin (its subscription, then its
// acknowledgements and advertised heads), which retention keeps as the peer's hold.
type PeerBehind struct {
	Known  bool   // the peer subscribed to this node's origin (version 2 or later)
	LagSeq uint64 // entries of this node's origin beyond the peer's position
	// Health is the lag's own health, by how long the peer has been behind without its
	// position moving (counted from the later of its last move and the local write that
	// put it behind, so a peer level with an idle origin is not behind until the next
	// write): healthy when there is no lag or that is within HealthyLag; stalled from
	// StallTimeout; falling-behind when the lag is above its oldest sample within
	// HealthWindow; catching-up otherwise.
	Health Health
}

// PeerBehindOf is how far the peer named peer is behind this node's own origin at now.
// While the peer has a connection, only one on which it subscribed to this node's origin
// tells: its acknowledgements on that channel move the position. A peer connected that
// takes the origin from another node (or has not subscribed yet) is not known: its hold
// is what retention keeps for it, not where it is. Without a connection, the hold is its
// last known position. The hold's since is when the peer last moved or, for one that was
// at this node's head, the write that put it behind (leftHead).
func (r *Replica) PeerBehindOf(peer string, now time.Time) PeerBehind {
	h := r.ret.holds[holdKey{peer, r.id.Origin}]
	if h == nil || r.id.Origin.IsZero() {
		return PeerBehind{Health: HealthHealthy}
	}
	connected, subscribed, moved := false, false, h.since
	for _, c := range r.connList {
		if c.peerName == peer && c.established {
			connected = true
			if s := c.out[r.id.Origin]; s != nil {
				// The position moved no earlier than the subscription that set it: a hold
				// kept at one seq across a reconnect is not a peer silent since.
				subscribed, moved = true, later(moved, s.since)
			}
		}
	}
	if connected && !subscribed {
		return PeerBehind{Health: HealthHealthy}
	}
	b := PeerBehind{Known: true, Health: HealthHealthy}
	if own := r.origin(r.id.Origin).applied.Seq; own > h.seq {
		b.LagSeq = own - h.seq
	}
	age := now.Sub(moved)
	switch {
	case b.LagSeq == 0 || age <= r.cfg.HealthyLag:
	case age >= r.cfg.StallTimeout:
		b.Health = HealthStalled
	case grew(r.lagHist.peers[peer], b.LagSeq, now.Add(-r.cfg.HealthWindow)):
		b.Health = HealthFallingBehind
	default:
		b.Health = HealthCatchingUp
	}
	return b
}

// PeerLagHistory is every peer's lag history behind this node's own origin, by peer name.
func (r *Replica) PeerLagHistory() []PeerLag {
	names := make([]string, 0, len(r.lagHist.peers))
	for n := range r.lagHist.peers {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]PeerLag, 0, len(names))
	for _, n := range names {
		g := r.lagHist.peers[n]
		pl := PeerLag{Peer: n, Samples: make([]LagSample, 0, len(g.buf))}
		g.each(func(s LagSample) bool { pl.Samples = append(pl.Samples, s); return true })
		out = append(out, pl)
	}
	return out
}

// lagSamples is how many samples an origin's history keeps.
func (c Config) lagSamples() int {
	return int(c.LagHistory / c.LagSampleEvery)
}

// SampleLag records every remote origin's lag at now in the lag history, once per
// LagSampleEvery (a call sooner after the last sample does nothing). The shell calls it
// after its inputs and ticks; lag changes only on inputs, so a sample taken at the first
// call of each interval is the lag of the whole time since the previous input.
func (r *Replica) SampleLag(now time.Time) {
	h := &r.lagHist
	if !h.last.IsZero() && now.Before(h.last.Add(r.cfg.LagSampleEvery)) {
		return
	}
	h.last = now
	if h.rings == nil {
		h.rings = map[wire.OriginID]*lagRing{}
	}
	limit := r.cfg.lagSamples()
	for _, o := range r.originOrder {
		if o == r.id.Origin {
			continue
		}
		st := r.origins[o]
		g := h.rings[o]
		if g == nil {
			g = &lagRing{}
			h.rings[o] = g
		}
		lagSeq, lagMs := r.lagOf(st)
		g.add(LagSample{At: now, LagSeq: lagSeq, LagMs: lagMs}, limit)
	}
	if h.peers == nil {
		h.peers = map[string]*lagRing{}
	}
	for k := range r.ret.holds { // the peers with a position of this node's origin
		if k.origin != r.id.Origin || r.id.Origin.IsZero() {
			continue
		}
		g := h.peers[k.peer]
		if g == nil {
			g = &lagRing{}
			h.peers[k.peer] = g
		}
		g.add(LagSample{At: now, LagSeq: r.PeerBehindOf(k.peer, now).LagSeq}, limit)
	}
	for name := range h.peers { // a hold lapsed or released: its history goes with it
		if r.ret.holds[holdKey{name, r.id.Origin}] == nil {
			delete(h.peers, name)
		}
	}
}

// LagHistory is every remote origin's lag history, sorted by origin, oldest sample first.
func (r *Replica) LagHistory() []OriginLag {
	var out []OriginLag
	for _, o := range r.originOrder {
		g := r.lagHist.rings[o]
		if g == nil {
			continue
		}
		ol := OriginLag{Origin: o, Name: r.origins[o].name, Samples: make([]LagSample, 0, len(g.buf))}
		g.each(func(s LagSample) bool { ol.Samples = append(ol.Samples, s); return true })
		out = append(out, ol)
	}
	return out
}

// lagOf is an origin's lag in entries and in time (docs/contract.md §8.2 lag_seq, lag_ms).
// The time is 0 while nothing of the origin is applied here: there is no applied entry to
// measure from (lag_seq still counts).
func (r *Replica) lagOf(st *originState) (lagSeq, lagMs uint64) {
	lagSeq = max(st.headSeq, st.applied.Seq) - st.applied.Seq
	if lagSeq > 0 && st.applied.Seq > 0 && st.headHLC > st.appliedHLC {
		lagMs = st.headHLC.WallMillis() - st.appliedHLC.WallMillis()
	}
	return lagSeq, lagMs
}

// originHealth is the rule for origins[].health (docs/contract.md §8.7), at r.now.
func (r *Replica) originHealth(st *originState, os OriginStatus, now time.Time) Health {
	switch {
	case st.id == r.id.Origin:
		return HealthHealthy // this node's own writes: nothing to wait for
	case os.Stuck != "" || os.Diverged:
		return HealthStalled
	case os.LagSeq == 0:
		return HealthHealthy
	case !now.Before(st.waitingSince().Add(r.cfg.StallTimeout)):
		return HealthStalled // behind, with nothing applied for StallTimeout
	case os.AppliedSeq > 0 && os.LagMs <= uint64(r.cfg.HealthyLag.Milliseconds()):
		return HealthHealthy
	case r.lagGrew(st.id, os.LagSeq, now):
		return HealthFallingBehind
	}
	return HealthCatchingUp
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// waitingSince is when the origin began to wait with nothing applied: its last apply, or
// the moment a head above the applied seq became known, whichever is later.
func (st *originState) waitingSince() time.Time {
	if st.behindAt.After(st.appliedAt) {
		return st.behindAt
	}
	return st.appliedAt
}

// lagGrew reports whether an origin's lag in entries is above its oldest sample within the
// last HealthWindow (false without such a sample).
func (r *Replica) lagGrew(o wire.OriginID, lagSeq uint64, now time.Time) bool {
	return grew(r.lagHist.rings[o], lagSeq, now.Add(-r.cfg.HealthWindow))
}

// grew reports whether lagSeq is above the oldest sample of g taken at or after from
// (false without one).
func grew(g *lagRing, lagSeq uint64, from time.Time) bool {
	if g == nil {
		return false
	}
	up := false
	g.each(func(s LagSample) bool {
		if s.At.Before(from) {
			return true // older than the window: the next may be in it
		}
		up = lagSeq > s.LagSeq
		return false
	})
	return up
}

// PeerHealth is the rule for peers[].health (docs/contract.md §8.7): stalled unless the
// peer is streaming with fresh liveness; else the worst of the health of its lag behind
// this node's own origin (p.Behind) and the healths of the origins it is the source of
// (origins whose SourcePeer is its name), and at least catching-up while this node takes
// a base copy from it. The shell applies it to the peers it adds (a peer it is still
// dialing is stalled).
func PeerHealth(p PeerStatus, origins []OriginStatus) Health {
	if p.State != PeerStreaming || !p.Connected {
		return HealthStalled
	}
	h := p.Behind.Health
	if h == "" {
		h = HealthHealthy
	}
	if p.Copy != nil && p.Copy.Direction == "receiving" {
		h = HealthCatchingUp
	}
	for _, o := range origins {
		if o.SourcePeer == p.Name && o.Health.rank() > h.rank() {
			h = o.Health
		}
	}
	return h
}
