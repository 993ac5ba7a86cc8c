package node

import (
	"context"
	"crypto/tls"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"plait/protocol"
	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/tlsfiles"
)

// wsConn is one WebSocket and its replica connection. The loop queues messages; the
// writer goroutine sends them in order; the reader goroutine feeds received messages to
// the loop one at a time and waits while the replica pauses reads (version 1).
type wsConn struct {
	id     replica.ConnID
	peer   string
	ws     *websocket.Conn
	mu     sync.Mutex
	queue  [][]byte
	queued int           // the bytes of queue and of the batch being written
	sent   [][]byte      // written messages, for the loop to give back to the session (Release)
	ending bool          // close after the queue
	abrupt bool          // and drop the socket without waiting for the peer's close (an error)
	wake   chan struct{} // the queue changed (capacity 1)
	resume chan struct{} // reads may go on (capacity 1)
	paused bool          // the reader waits for resume (loop only)
	hs     *atomic.Int64 // the node's count of pending handshakes, while this one is
	hsOnce sync.Once
	// established is set once the handshake completed.
	established atomic.Bool
	done        chan struct{}
	once        sync.Once
}

func newConn(ws *websocket.Conn, peer string) *wsConn {
	return &wsConn{ws: ws, peer: peer, wake: make(chan struct{}, 1), resume: make(chan struct{}, 1), done: make(chan struct{})}
}

// maxSent bounds the written messages a connection keeps for reuse: the session keeps one
// spare buffer, the largest.
const maxSent = 4

// send queues messages (the loop's side); end closes the socket after them, abrupt
// without the WebSocket close handshake. It returns the messages written since the last
// call, which the loop gives back to the session.
func (c *wsConn) send(msgs [][]byte, end, abrupt bool) (sent [][]byte) {
	c.mu.Lock()
	c.queue = append(c.queue, msgs...)
	for _, m := range msgs {
		c.queued += len(m)
	}
	c.ending = c.ending || end
	c.abrupt = c.abrupt || abrupt
	sent, c.sent = c.sent, nil
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return sent
}

// queuedBytes is what the writer has not written yet.
func (c *wsConn) queuedBytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued
}

// close drops the socket now.
func (c *wsConn) close() {
	c.once.Do(func() {
		close(c.done)
		_ = c.ws.CloseNow() // the socket is dropped either way; an error means it was closed already
	})
}

// writer sends the queue until the connection ends.
func (c *wsConn) writer(ctx context.Context) {
	defer c.close()
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.mu.Lock()
		q, end, abrupt := c.queue, c.ending, c.abrupt
		c.queue = nil
		c.mu.Unlock()
		for _, m := range q {
			if err := c.ws.Write(ctx, websocket.MessageBinary, m); err != nil {
				return
			}
			c.mu.Lock()
			c.queued -= len(m)
			c.mu.Unlock()
		}
		c.mu.Lock()
		if len(c.sent) < maxSent {
			c.sent = append(c.sent, q[:min(len(q), maxSent-len(c.sent))]...)
		}
		c.mu.Unlock()
		if end {
			if !abrupt {
				// The WebSocket close handshake waits for the peer's answer (up to seconds): for an
				// orderly close only. After an error the CLOSE frame sent says why, and the socket
				// goes at once, whether or not the peer reads it.
				_ = c.ws.Close(websocket.StatusNormalClosure, "") // an error means the peer is gone: the writer ends either way
			}
			return
		}
	}
}

// serve runs a connection the replica opened as id until it ends: the writer in its own
// goroutine, the reader here. The replica is told when the socket is gone.
func (n *Node) serve(c *wsConn) {
	c.ws.SetReadLimit(int64(n.cfg.Limits.WithDefaults().MaxMessage)) // the limit the session advertises
	go c.writer(n.ctx)
	reason := "closed"
	for {
		msg, err := n.readMessage(c)
		if err != nil {
			reason = err.Error()
			break
		}
		paused := false
		if err := n.do(func() {
			if n.conns[c.id] != c {
				return // the replica ended it already (or it belonged to a replica rebuilt since)
			}
			n.check(n.rep.Receive(time.Now(), c.id, msg))
			if n.rep.ReadPaused(c.id) {
				c.paused, paused = true, true
			}
			if s := n.rep.Session(c.id); s != nil && s.State() == protocol.StateEstablished {
				c.established.Store(true)
				c.handshakeDone()
			}
		}); err != nil {
			break
		}
		if paused {
			select {
			case <-c.resume:
			case <-c.done:
			case <-n.ctx.Done():
			}
		}
	}
	c.close()
	c.handshakeDone()
	// n.do fails only once the node is stopping, when there is no replica to tell.
	_ = n.do(func() {
		if n.conns[c.id] == c {
			delete(n.conns, c.id)
			n.check(n.rep.Disconnected(time.Now(), c.id, reason))
		}
	})
}

// receivingEvery is how often, at most, the reader tells the replica that a message is
// still arriving: far below the liveness (5 s) and stall (3 s) timeouts it keeps from
// firing, and rare enough to cost nothing beside the bytes.
const receivingEvery = 500 * time.Millisecond

// readMessage reads the connection's next message in parts, telling the replica
// (Replica.Receiving) every receivingEvery while its bytes are still arriving, so that a
// message that takes seconds on a slow link counts as the peer alive and its entries as
// coming. The read limit the session advertises bounds it as it bounds a whole read.
func (n *Node) readMessage(c *wsConn) ([]byte, error) {
	_, rd, err := c.ws.Reader(n.ctx)
	if err != nil {
		return nil, err
	}
	// A new buffer each message: the replica may keep views into it (as it did into the
	// buffer a whole read returned). It starts as small as io.ReadAll's and grows by
	// append: most messages are a CURSOR or one small entry, and a larger first buffer is
	// garbage the collector pays for on every message.
	msg := make([]byte, 0, 512)
	told := time.Now()
	for {
		if len(msg) == cap(msg) {
			msg = append(msg, 0)[:len(msg)]
		}
		k, err := rd.Read(msg[len(msg):cap(msg)])
		msg = msg[:len(msg)+k]
		if err == io.EOF {
			return msg, nil
		}
		if err != nil {
			return nil, err
		}
		if now := time.Now(); now.Sub(told) >= receivingEvery {
			told = now
			if err := n.do(func() {
				if n.conns[c.id] == c {
					n.check(n.rep.Receiving(now, c.id))
				}
			}); err != nil {
				return nil, err
			}
		}
	}
}

// open registers a socket with the replica.
func (n *Node) open(ws *websocket.Conn, o replica.ConnOptions) (*wsConn, error) {
	c := newConn(ws, o.ExpectPeer)
	o.Nonce = nonce()
	var err error
	if derr := n.do(func() {
		c.id, err = n.rep.OpenConn(time.Now(), o)
		if err == nil {
			n.conns[c.id] = c
		}
	}); derr != nil {
		return nil, derr
	}
	return c, err
}

// handshakeDone takes the connection out of the pending handshakes, once.
func (c *wsConn) handshakeDone() {
	if c.hs != nil {
		c.hsOnce.Do(func() { c.hs.Add(-1) })
	}
}

// accept is GET /v1/replicate. Beyond MaxPendingHandshakes connections still in their
// handshake, it answers 503 at once.
func (n *Node) accept(w http.ResponseWriter, r *http.Request) {
	if n.cfg.Hub != "" {
		// A leaf takes no connection of any kind: its one link is the one it dials to its
		// hub (docs/contract.md §26.1). Refused before the upgrade, so no handshake runs.
		msg := "this node is a leaf of " + n.cfg.Hub + ": it dials its hub and takes no peer or leaf connections"
		n.refused(r.RemoteAddr, "", false, wire.CodeLeafNoPeers, msg)
		http.Error(w, string(wire.CodeLeafNoPeers)+": "+msg, http.StatusForbidden)
		return
	}
	if n.pending.Add(1) > int64(n.cfg.MaxPendingHandshakes) {
		n.pending.Add(-1)
		n.refused(r.RemoteAddr, "", false, wire.CodeTooManyPending, "too many pending handshakes")
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many pending handshakes", http.StatusServiceUnavailable)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil { // Accept has answered the request with the error
		n.pending.Add(-1)
		n.refused(r.RemoteAddr, "", false, wire.CodeBadUpgrade, err.Error())
		return
	}
	// Over TLS the peer is the node its certificate names: a HELLO of another name is
	// peer-name-mismatch, and the handshake is bound to this channel.
	c, err := n.open(ws, replica.ConnOptions{Role: wire.RoleListener, ExpectPeer: tlsfiles.PeerName(r.TLS),
		ChannelBinding: binding(r.TLS), Remote: r.RemoteAddr})
	if err != nil {
		n.pending.Add(-1)
		n.log.Warn("connection refused by the replica", "remote", r.RemoteAddr, "err", err)
		_ = ws.CloseNow() // refused: the socket is dropped whatever closing it says
		return
	}
	c.hs = &n.pending
	n.wg.Add(1)
	defer n.wg.Done()
	n.serve(c)
}

// connected reports whether the replica has an established connection to a peer.
func (n *Node) connected(peer string) bool {
	up := false
	// n.do fails only once the node is stopping: then nothing is connected (up stays false).
	_ = n.do(func() {
		for _, p := range n.rep.Status(time.Now()).Peers {
			up = up || p.Name == peer && p.State == replica.PeerStreaming
		}
	})
	return up
}

// dialLoop keeps a connection to a peer: it dials, serves the connection until it ends,
// and dials again after a backoff that doubles up to RedialMax, with jitter. The backoff
// starts over only after real progress: a connection whose handshake completed and that
// lasted longer than two RedialMax. A peer that accepts and closes at once, or refuses, or
// never completes the handshake is redialed at growing intervals. Every dial after the
// first counts as a reconnect. While the peer's own connection to this node is up, it does
// not dial.
func (n *Node) dialLoop(ctx context.Context, p Peer) {
	defer n.wg.Done()
	target, err := ParsePeerURL(p.URL)
	if err != nil { // Start and AddPeer refuse such a URL; a data directory may hold one from before they did
		n.log.Error("peer URL", "peer", p.Name, "err", err)
		return
	}
	if err := n.cfg.CheckPeerURL(p.URL); err != nil {
		// A peer kept in the data directory from before this node took TLS only (the flags'
		// peers are checked at Start): it is never dialed in plaintext. Its status says why.
		code := wire.CodeTLSRequired
		if n.cfg.TLS == nil {
			code = wire.CodeBadArgument
		}
		msg := err.Error() + "; remove the peer and add it again with a URL this node may dial"
		n.setDial(p.Name, replica.PeerBackoff, 0)
		n.dialFailed(p.Name, DialBadURL, msg)
		n.refused(p.URL, p.Name, true, code, msg)
		return
	}
	backoff := n.cfg.RedialMin
	dialed := false
	for ctx.Err() == nil {
		if !n.connected(p.Name) {
			var redial uint64
			if dialed {
				redial = 1
			}
			dialed = true
			n.setDial(p.Name, replica.PeerConnecting, redial)
			if n.dialOnce(ctx, p, target) {
				backoff = n.cfg.RedialMin
			}
			n.setDial(p.Name, replica.PeerBackoff, 0)
		} else {
			backoff = n.cfg.RedialMin // the peer's connection serves: look again soon
		}
		wait := backoff/2 + time.Duration(rand.Int64N(int64(backoff/2)+1))
		backoff = min(2*backoff, n.cfg.RedialMax)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
}

// dialOnce dials a peer and serves the connection until it ends; it reports whether the
// connection made real progress (its handshake completed and it lasted).
func (n *Node) dialOnce(ctx context.Context, p Peer, target string) bool {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	secure := strings.HasPrefix(target, "wss:")
	var opts *websocket.DialOptions
	if secure {
		opts = &websocket.DialOptions{HTTPClient: n.tlsClient}
	}
	ws, resp, err := websocket.Dial(dctx, target, opts)
	cancel()
	if err != nil {
		switch code := dialCode(err, resp); {
		case secure && tlsfiles.IsHandshakeFailure(err):
			n.dialFailed(p.Name, DialTLS, string(tlsfiles.RefusalCode(err))+": "+err.Error())
			n.refused(target, p.Name, true, tlsfiles.RefusalCode(err), err.Error())
		case code == DialUpgrade:
			n.dialFailed(p.Name, code, upgradeMessage(resp, err))
			n.log.Info("dial failed", "peer", p.Name, "url", target, "code", code, "err", err)
		default:
			n.dialFailed(p.Name, code, err.Error())
			n.log.Info("dial failed", "peer", p.Name, "url", target, "code", code, "err", err)
		}
		return false
	}
	var cs *tls.ConnectionState
	if resp != nil {
		cs = resp.TLS
	}
	if secure {
		if name := tlsfiles.PeerName(cs); name != p.Name {
			_ = ws.CloseNow() // refused: the socket is dropped whatever closing it says
			msg := "the listener's certificate names node " + strconv.Quote(name) + ", not " + strconv.Quote(p.Name)
			n.dialFailed(p.Name, DialTLS, string(tlsfiles.CodeBadName)+": "+msg)
			n.refused(target, p.Name, true, tlsfiles.CodeBadName, msg)
			return false
		}
	}
	c, err := n.open(ws, replica.ConnOptions{Role: wire.RoleDialer, ExpectPeer: p.Name, ChannelBinding: binding(cs), Remote: target})
	if err != nil {
		n.log.Warn("connection refused by the replica", "peer", p.Name, "err", err)
		n.dialFailed(p.Name, DialFailed, "this node's replica refused the connection: "+err.Error())
		_ = ws.CloseNow() // refused: the socket is dropped whatever closing it says
		return false
	}
	start := time.Now()
	n.serve(c)
	return c.established.Load() && time.Since(start) > 2*n.cfg.RedialMax
}

// setDial records a dialer's state and counts reconnects.
func (n *Node) setDial(peer string, state replica.PeerState, reconnect uint64) {
	n.mu.Lock()
	d := n.dials[peer]
	d.state, d.reconnects = state, d.reconnects+reconnect
	n.dials[peer] = d
	n.mu.Unlock()
}
