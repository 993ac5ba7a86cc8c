package replica

import (
	"slices"
	"time"

	"plait/protocol"
	"plait/protocol/wire"
)

// Connections that end in an error are on record, whether or not they ever named
// themselves (docs/contract.md §8.5): a connection closed before its handshake completed
// is a refusal, counted by code and kept among the last MaxRefusals; one closed for an
// error after it is a connection error, counted by code. Refusals the session cannot see
// (a TLS handshake, a WebSocket upgrade, the bound on pending handshakes) the shell
// reports with Refused, so that one record holds them all.

// MaxRefusals is how many refusals Status keeps, the newest last.
const MaxRefusals = 16

// Refusal is one connection refused before its handshake completed.
type Refusal struct {
	Remote  string // the remote address the shell gave (empty: not known)
	Peer    string // the peer it named or was dialed as (empty: none)
	Dialed  bool   // this node dialed it
	Code    wire.Code
	Message string
	At      time.Time
}

// CodeCount is a count by code.
type CodeCount struct {
	Code  wire.Code
	Count uint64
}

// refusalLog is the record: counts by code and the newest refusals.
type refusalLog struct {
	refused map[wire.Code]uint64
	errors  map[wire.Code]uint64
	recent  []Refusal // a ring of MaxRefusals, next at head
	head    int
}

// ConnOptions are what the shell knows of a connection when it opens it.
type ConnOptions struct {
	Role       wire.Role
	ExpectPeer string // a dialer's configured peer; a listener's peer named by its TLS certificate
	Nonce      []byte // 16 to 64 fresh bytes
	// ChannelBinding is the TLS exporter value (handshake.ExporterLabel) when the
	// connection runs over TLS, else empty.
	ChannelBinding []byte
	Remote         string // the remote address, for the record of refusals
}

// OpenConn is Open with everything the shell knows of the socket.
func (r *Replica) OpenConn(now time.Time, o ConnOptions) (ConnID, error) {
	if r.fatal != nil {
		return 0, r.fatal
	}
	r.setNow(now)
	s, err := r.cfg.NewSession(protocol.Config{Role: o.Role, Name: r.id.Name, Origin: r.id.Origin, Secret: r.cfg.Secret,
		MinVersion: r.cfg.MinVersion, MaxVersion: r.cfg.MaxVersion, Capabilities: r.cfg.Capabilities,
		ExpectedPeer: o.ExpectPeer, ChannelBinding: o.ChannelBinding, Limits: r.cfg.Limits, Mutations: r.cfg.Mutations,
		Leaf: r.dialsHub(o)})
	if err != nil {
		return 0, err
	}
	if err := s.Start(now, o.Nonce); err != nil {
		return 0, err
	}
	r.lastConn++
	c := &conn{id: r.lastConn, sess: s, role: o.Role, expect: o.ExpectPeer, remote: o.Remote,
		heads: map[wire.OriginID]wire.Head{}, adv: map[wire.OriginID]bool{}, advLater: map[wire.OriginID]bool{}, in: map[wire.OriginID]bool{},
		out: map[wire.OriginID]*outStream{}, excluded: map[wire.OriginID]time.Time{}, purged: map[wire.OriginID]bool{},
		floors: map[wire.OriginID]uint64{}, shown: map[wire.OriginID]uint64{}, named: map[wire.OriginID]bool{}, toHub: r.dialsHub(o),
		peerQuiet: map[wire.OriginID]bool{}, told: map[wire.OriginID]bool{}, quietAdd: map[wire.OriginID]bool{}, lateSeq: map[wire.OriginID]uint64{}}
	r.conns[c.id] = c
	r.connOrder = append(r.connOrder, c.id)
	r.connList = append(r.connList, c)
	return c.id, r.settle()
}

// Refused records a connection the shell refused before the replica saw it: at TLS, at
// the WebSocket upgrade, past the bound on pending handshakes. A dialer's refusal (its
// peer's certificate) is also the peer's last error.
func (r *Replica) Refused(now time.Time, f Refusal) {
	r.setNow(now)
	f.At = now
	r.recordRefusal(f)
	if f.Dialed && f.Peer != "" {
		r.lastErrors[f.Peer] = PeerError{Err: wire.NewError(f.Code, f.Message), At: now}
	}
}

func (r *Replica) recordRefusal(f Refusal) {
	l := &r.refusals
	if l.refused == nil {
		l.refused, l.errors = map[wire.Code]uint64{}, map[wire.Code]uint64{}
	}
	r.counters.ConnectionsRefused++
	l.refused[f.Code]++
	if len(l.recent) < MaxRefusals {
		l.recent = append(l.recent, f)
		return
	}
	l.recent[l.head] = f
	l.head = (l.head + 1) % MaxRefusals
}

// connEnded records how a connection ended: a refusal when its handshake never completed
// on both sides (not here, or the peer refused this side: a refused-class close by the
// peer, which it sends before its side completes), a connection error when it did and err
// is an error (not an orderly close).
func (r *Replica) connEnded(c *conn, err *wire.Error, byPeer bool) {
	if err == nil {
		return
	}
	if !c.established || byPeer && err.Class == wire.ClassRefused || err.Code == wire.CodeLinkMismatch || err.Code == wire.CodeLinkNeedsV4 {
		name := c.peerName
		if name == "" {
			name = c.expect
		}
		r.recordRefusal(Refusal{Remote: c.remote, Peer: name, Dialed: c.role == wire.RoleDialer, Code: err.Code,
			Message: err.Message, At: r.now})
		return
	}
	if err.Code == wire.CodeGoingAway {
		return
	}
	if r.refusals.errors == nil {
		r.refusals.refused, r.refusals.errors = map[wire.Code]uint64{}, map[wire.Code]uint64{}
	}
	r.counters.ConnectionErrors++
	r.refusals.errors[err.Code]++
}

// Refusals returns the newest refusals (oldest first), and the refusals and the
// connection errors counted by code, sorted by code. Nothing returned aliases the record.
func (r *Replica) Refusals() (recent []Refusal, refused, errors []CodeCount) {
	l := &r.refusals
	recent = append(slices.Clone(l.recent[l.head:]), l.recent[:l.head]...)
	return recent, codeCounts(l.refused), codeCounts(l.errors)
}

func codeCounts(m map[wire.Code]uint64) []CodeCount {
	out := make([]CodeCount, 0, len(m))
	for c, n := range m {
		out = append(out, CodeCount{Code: c, Count: n})
	}
	slices.SortFunc(out, func(a, b CodeCount) int {
		switch {
		case a.Code < b.Code:
			return -1
		case a.Code > b.Code:
			return 1
		}
		return 0
	})
	return out
}
