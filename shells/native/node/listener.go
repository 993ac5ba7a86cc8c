package node

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/tlsfiles"
)

// tlsListener runs the TLS handshakes of the replication listener itself, so that every
// failed one is refused on record with its code (the HTTP server would only log it), and
// so that one port can serve ws:// beside wss:// while a cluster moves to TLS: the first
// byte of a connection tells a TLS ClientHello (0x16) from an HTTP request. Connections
// whose handshake completed are handed to the HTTP server through Accept.
type tlsListener struct {
	inner     net.Listener
	n         *Node
	src       *tlsfiles.Source
	plaintext bool // serve ws:// beside wss://
	ready     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
	pending   atomic.Int64 // handshakes in progress, bounded by MaxPendingHandshakes
	wg        sync.WaitGroup
	mu        sync.Mutex
	inflight  map[net.Conn]bool // connections in their handshake, closed by Close
}

// tlsHandshakeTimeout bounds a TLS handshake; a client that stalls in it holds one of the
// pending handshakes only this long.
const tlsHandshakeTimeout = 10 * time.Second

func newTLSListener(inner net.Listener, n *Node, src *tlsfiles.Source, plaintext bool) *tlsListener {
	l := &tlsListener{inner: inner, n: n, src: src, plaintext: plaintext, ready: make(chan net.Conn), done: make(chan struct{}),
		inflight: map[net.Conn]bool{}}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

func (l *tlsListener) acceptLoop() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		c, err := l.inner.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				l.Close()
				return
			}
			// Out of descriptors and the like: wait and go on, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-l.done:
				return
			}
			continue
		}
		backoff = 0
		if l.pending.Add(1) > int64(l.n.cfg.MaxPendingHandshakes) {
			l.pending.Add(-1)
			l.n.refused(c.RemoteAddr().String(), "", false, wire.CodeTooManyPending, "too many TLS handshakes in progress")
			_ = c.Close() // refused: nothing was read
			continue
		}
		l.wg.Add(1)
		go l.handshake(c)
	}
}

// handshake runs one connection's TLS handshake (or, with plaintext, lets a plaintext one
// through) and hands it on; a failure is refused on record.
func (l *tlsListener) handshake(raw net.Conn) {
	defer l.wg.Done()
	defer l.pending.Add(-1)
	if !l.track(raw, true) {
		_ = raw.Close() // the listener closed meanwhile
		return
	}
	defer l.track(raw, false)
	remote := raw.RemoteAddr().String()
	_ = raw.SetDeadline(time.Now().Add(tlsHandshakeTimeout)) // fails only on a closed conn, which the read reports
	br := bufio.NewReaderSize(raw, 1)
	first, err := br.Peek(1)
	if err != nil {
		_ = raw.Close() // closed or stalled before its first byte: nothing to refuse
		return
	}
	conn := &peekedConn{Conn: raw, r: br}
	var c net.Conn = conn
	if first[0] != 0x16 { // not a TLS handshake record
		if !l.plaintext {
			l.n.refused(remote, "", false, tlsfiles.CodeRequired, "a plaintext client on a TLS listener (wss:// only)")
			_, _ = raw.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n" +
				"tls-required: this listener takes wss:// only\n")) // best effort: the client is refused either way
			_ = raw.Close()
			return
		}
	} else {
		tc := tls.Server(conn, l.src.ListenerConfig())
		ctx, cancel := context.WithTimeout(context.Background(), tlsHandshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			l.n.refused(remote, "", false, tlsfiles.RefusalCode(err), err.Error())
			_ = raw.Close()
			return
		}
		c = tc
	}
	_ = raw.SetDeadline(time.Time{}) // the HTTP server sets its own
	select {
	case l.ready <- c:
	case <-l.done:
		_ = c.Close()
	}
}

func (l *tlsListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// track adds a connection to the ones in their handshake (or removes it); it reports
// false once the listener is closed.
func (l *tlsListener) track(c net.Conn, add bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !add {
		delete(l.inflight, c)
		return true
	}
	if l.inflight == nil {
		return false
	}
	l.inflight[c] = true
	return true
}

// Close stops accepting and cuts the handshakes in progress; wait waits for their
// goroutines.
func (l *tlsListener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.done)
		err = l.inner.Close()
		l.mu.Lock()
		for c := range l.inflight {
			_ = c.Close() // its handshake fails and its goroutine ends
		}
		l.inflight = nil
		l.mu.Unlock()
	})
	return err
}

func (l *tlsListener) wait() { l.wg.Wait() }

func (l *tlsListener) Addr() net.Addr { return l.inner.Addr() }

// peekedConn is a connection whose first bytes were read ahead into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// refused records a connection refused before the replica saw it.
func (n *Node) refused(remote, peer string, dialed bool, code wire.Code, msg string) {
	n.log.Info("connection refused", "remote", remote, "peer", peer, "code", code, "msg", msg)
	// n.do fails only once the node is stopping: a refusal then is not worth keeping.
	_ = n.do(func() {
		n.rep.Refused(time.Now(), replica.Refusal{Remote: remote, Peer: peer, Dialed: dialed, Code: code, Message: msg})
	})
}
