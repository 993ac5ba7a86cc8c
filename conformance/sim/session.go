package sim

import (
	"time"

	"plait/protocol"
	"plait/protocol/replica"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// watchedSession wraps each session a node makes, to check invariants inside a step: the
// bytes a session holds after every input, before the replica drains it; and that a
// dropped connection moves only the origins it carried.
type watchedSession struct {
	replica.Session
	c    *Cluster
	node *Node
}

func (c *Cluster) newSession(n *Node) func(protocol.Config) (replica.Session, error) {
	newSession := n.NewSession
	if newSession == nil {
		newSession = c.opts.NewSession
	}
	if newSession == nil {
		newSession = replica.NativeSession
	}
	return func(cfg protocol.Config) (replica.Session, error) {
		s, err := newSession(cfg)
		if err != nil {
			return nil, err
		}
		return &watchedSession{Session: s, c: c, node: n}, nil
	}
}

// held checks the session's held bytes against its bound.
func (w *watchedSession) held() {
	lim := w.Limits()
	bound := lim.MaxSendBuffer + max(lim.MaxUnackedBytes, lim.MaxSessionBuffer) + lim.MaxMessage
	if h := w.HeldBytes(); h > bound {
		w.c.inv.fail(w.c.now, "%s: a session holds %d bytes, beyond its bound %d", w.node.Name, h, bound)
	}
	w.c.inv.maxHeld = max(w.c.inv.maxHeld, w.HeldBytes())
}

func (w *watchedSession) Receive(now time.Time, msg []byte) error {
	err := w.Session.Receive(now, msg)
	w.held()
	return err
}

// V1 and V2 watch the commands that queue entries or move channels.
func (w *watchedSession) V1() protocol.V1Commands { return watchedV1{w.Session.V1(), w} }

func (w *watchedSession) V2() protocol.V2Commands { return watchedV2{w.Session.V2(), w} }

type watchedV1 struct {
	protocol.V1Commands
	w *watchedSession
}

func (v watchedV1) Offer(pos uint64, txn []byte) error {
	err := v.V1Commands.Offer(pos, txn)
	v.w.held()
	return err
}

type watchedV2 struct {
	protocol.V2Commands
	w *watchedSession
}

func (v watchedV2) Send(txn []byte) error {
	err := v.V2Commands.Send(txn)
	v.w.held()
	return err
}

func (v watchedV2) Subscribe(cursors []vector.Entry) error {
	for _, e := range cursors {
		v.w.untouched(e.Origin)
	}
	return v.V2Commands.Subscribe(cursors)
}

func (v watchedV2) Unsubscribe(origins []wire.OriginID) error {
	for _, o := range origins {
		v.w.untouched(o)
	}
	return v.V2Commands.Unsubscribe(origins)
}

// untouched checks that a channel opened or closed while a connection drops belongs to an
// origin that connection carried.
func (w *watchedSession) untouched(o wire.OriginID) {
	c := w.c
	if c.dropping == "" || c.droppingSources == nil {
		return
	}
	if src := c.droppingSources[o]; src != c.dropping {
		c.inv.fail(c.now, "%s: the channel of origin %s (source %q) changed when the connection to %s dropped",
			w.node.Name, c.originName(o), src, c.dropping)
	}
}
