package replica

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"time"

	"plait/protocol/wire"
)

// Requests between nodes (docs/design.md §23.4): a request travels hop by hop over
// version-4 connections to the node it names, along the routes the node takes origins by;
// each hop remembers where a request it passed on came from, so the answer retraces the
// path without a routing decision of its own. Every request is answered once, or times out
// where it started; never twice.

// RequestID names a request this node started (Ask), from 1, never reused.
type RequestID uint64

// Answer is the answer to a request this node started.
type Answer struct {
	ID      RequestID
	Code    wire.Code // "": success
	Message string
	Body    []byte
}

// The request codes (docs/contract.md §22.7), wire's: they travel in RESPONSE, never in
// CLOSE.
const (
	CodeNoRoute         = wire.CodeNoRoute
	CodeUnreachable     = wire.CodeUnreachable
	CodeRequestTimeout  = wire.CodeRequestTimeout
	CodeTooManyRequests = wire.CodeTooManyRequests
	CodeForbidden       = wire.CodeForbidden
	CodeUnknownKind     = wire.CodeUnknownKind
)

// Scopes, each covering the ones before it (docs/contract.md §6.4).
var scopes = []string{wire.ScopeRead, wire.ScopeWrite, wire.ScopeAdmin}

// covers reports whether scope have covers scope need.
func covers(have, need string) bool {
	h, n := slices.Index(scopes, have), slices.Index(scopes, need)
	return h >= 0 && n >= 0 && h >= n
}

// requestKind is what a node serves for one kind of request: serve answers it at once, or,
// for a kind the shell serves (shell), the shell answers it later (Served, Reply).
type requestKind struct {
	scope string
	serve func(r *Replica, body []byte) (wire.Code, string, []byte)
	shell bool
	// later serves a kind that may be answered after this input (locks.go): done says it
	// answered now; otherwise it kept the hop h (deferHop) and answers it later, or the
	// hop's deadline answers request-timeout.
	later func(r *Replica, h *hop, req *wire.Request) (code wire.Code, msg string, body []byte, done bool)
}

// requestKinds are the kinds this build serves. Placement and locks add theirs.
var requestKinds = map[string]requestKind{
	// positions: the node's applied seq of every origin it holds (tablemove.go).
	kindPositions: {scope: "read", serve: servePositions},
	// map: the node's current map, as its MAP body (generation 0 alone with none).
	"map": {scope: "read", serve: func(r *Replica, _ []byte) (wire.Code, string, []byte) {
		body, err := wire.AppendMapAnswer(nil, r.mapBody())
		if err != nil {
			return wire.CodeInternal, err.Error(), nil
		}
		return "", "", body
	}},
	// api: an API request for a table the caller does not carry (forward.go), which the
	// shell runs through its API. The kind needs the least scope; the endpoint's own is
	// checked by the API with the caller's scope, as for a request made here.
	KindAPI: {scope: "read", shell: true},
	// The lock kinds (locks.go): answered by the key's home, a waiting acquire and a
	// confirm whose write is not applied yet later.
	KindLockAcquire: {scope: "write", later: serveLock},
	KindLockRenew:   {scope: "write", later: serveLock},
	KindLockRelease: {scope: "write", later: serveLock},
	KindLockCheck:   {scope: "write", later: serveLock},
	KindLockConfirm: {scope: "write", later: serveLock},
	KindLockFence:   {scope: "read", later: serveLock},
	// lock-floor: this node's applied positions once it holds a generation (locks.go).
	KindLockFloor: {scope: "read", serve: serveLockFloor},
	// lock-recall: a home asks a delegation back of its delegate (lockdeleg.go).
	KindLockRecall: {scope: "write", later: serveLockRecall},
}

// servesLater is the kind's later when it serves req (a scope that covers the kind's).
func servesLater(req *wire.Request) func(*Replica, *hop, *wire.Request) (wire.Code, string, []byte, bool) {
	k, ok := requestKinds[req.Kind]
	if !ok || k.later == nil || !covers(req.Scope, k.scope) {
		return nil
	}
	return k.later
}

// hop is one request in flight through a connection: started here (local), or passed on
// for the connection it came from (in, inID).
type hop struct {
	out      ConnID
	outID    uint64
	local    RequestID
	in       ConnID
	inID     uint64
	deadline time.Time
}

type hopKey struct {
	conn ConnID
	id   uint64
}

// requestState is the requests this node started or passed on, and the answers waiting
// for the shell.
type requestState struct {
	last    RequestID
	hops    map[hopKey]*hop
	answers []Answer
	// own: the requests the replica started for itself (tablemove.go), answered to these
	// instead of the shell.
	own map[RequestID]func(Answer)
	// Requests for this node the shell serves (forward.go): the last id given, and those
	// not yet handed over.
	lastServed ServedID
	served     []Served
	forwards   map[RequestID]bool // API requests forwarded from here not yet answered
}

// Ask starts a request for node target (docs/design.md §23.4) with the caller's scope. Its
// answer comes in Answers, after this input or a later one: at once when it is for this
// node or cannot go anywhere, otherwise when the target answers, a hop refuses, a
// connection on the way closes, or RequestTimeout passes.
func (r *Replica) Ask(now time.Time, target, kind, scope string, body []byte) (RequestID, error) {
	if r.fatal != nil {
		return 0, r.fatal
	}
	r.setNow(now)
	id := r.ask(target, kind, scope, body)
	return id, r.settle()
}

// askThen starts a request (ask) whose answer this replica takes itself: done is noted
// under the request's id before the request is sent, since the answer may come at once (no
// route, or the request refused on its first connection), and so is note's bookkeeping of
// the request in flight (the id given). It reports false, the replica stopped, when the
// request was not given the id expected.
func (r *Replica) askThen(target, kind, scope string, body []byte, note func(RequestID), done func(Answer)) bool {
	if r.reqs.own == nil {
		r.reqs.own = map[RequestID]func(Answer){}
	}
	id := r.reqs.last + 1
	r.reqs.own[id] = done
	if note != nil {
		note(id)
	}
	if got := r.ask(target, kind, scope, body); got != id {
		r.check(errorf("a request was given id %d, not %d", got, id))
		return false
	}
	return true
}

// ask starts a request (Ask, within an input).
func (r *Replica) ask(target, kind, scope string, body []byte) RequestID {
	rs := &r.reqs
	rs.last++
	id := rs.last
	req := wire.Request{Target: target, Path: []string{r.id.Name}, TimeoutMS: uint64(r.cfg.RequestTimeout / time.Millisecond),
		Scope: scope, Kind: kind, Body: body}
	if target == r.id.Name {
		r.counters.RequestsServed++
		if r.shellServes(&req) {
			r.handOver(&hop{local: id, deadline: r.now.Add(r.cfg.RequestTimeout)}, &req)
			return id
		}
		if later := servesLater(&req); later != nil {
			if code, msg, b, done := later(r, &hop{local: id, deadline: r.now.Add(r.cfg.RequestTimeout)}, &req); done {
				r.answered(Answer{ID: id, Code: code, Message: msg, Body: b})
			}
			return id
		}
		code, msg, b := r.serve(&req)
		r.answered(Answer{ID: id, Code: code, Message: msg, Body: b})
		return id
	}
	next, code, why := r.requestRoute(target, req.Path)
	if next == nil {
		r.counters.RequestsRefused++
		r.answered(Answer{ID: id, Code: code, Message: why})
		return id
	}
	outID, err := next.sess.V4().Request(req)
	if err != nil {
		r.counters.RequestsRefused++
		code, msg := refusedRequest(next, err)
		r.answered(Answer{ID: id, Code: code, Message: msg})
		return id
	}
	r.counters.RequestsSent++
	rs.hops[hopKey{next.id, outID}] = &hop{out: next.id, outID: outID, local: id, deadline: r.now.Add(r.cfg.RequestTimeout)}
	return id
}

// answered hands an answer to whoever started the request: the replica itself (own), or
// the shell (Answers).
func (r *Replica) answered(a Answer) {
	if f := r.reqs.own[a.ID]; f != nil {
		delete(r.reqs.own, a.ID)
		f(a)
		return
	}
	r.reqs.answers = append(r.reqs.answers, a)
}

// Answers hands over the answers to requests this node started, in the order they came.
func (r *Replica) Answers() []Answer {
	a := r.reqs.answers
	r.reqs.answers = nil
	return a
}

// shellServes reports whether a request for this node is one the shell serves: of a kind
// it serves, with a scope that covers the kind's (any other is answered by serve).
func (r *Replica) shellServes(req *wire.Request) bool {
	k, ok := requestKinds[req.Kind]
	return ok && k.shell && covers(req.Scope, k.scope)
}

// serve answers a request for this node.
func (r *Replica) serve(req *wire.Request) (wire.Code, string, []byte) {
	k, ok := requestKinds[req.Kind]
	switch {
	case !ok:
		return CodeUnknownKind, "this node serves no request of kind " + strconv.Quote(req.Kind), nil
	case !covers(req.Scope, k.scope):
		return CodeForbidden, "a request of kind " + req.Kind + " needs scope " + k.scope + ", the caller has " + req.Scope, nil
	}
	return k.serve(r, req.Body)
}

// requestRoute chooses the connection a request for target goes on next: the target
// itself when it is a neighbour at version 4; otherwise the connection this node takes
// the target's origin from, or else one whose peer advertises it, or else the one the
// target's newest member entry came on (a node that never wrote has no origin to route);
// never to a node the request passed.
func (r *Replica) requestRoute(target string, path []string) (*conn, wire.Code, string) {
	if len(path) >= r.cfg.MaxRequestHops {
		return nil, CodeNoRoute, "the request passed " + strconv.Itoa(len(path)) + " nodes, the hop limit"
	}
	usable := func(c *conn) bool {
		return c != nil && c.established && c.version >= v4 && !c.closing && !slices.Contains(path, c.peerName)
	}
	for _, c := range r.connList {
		if c.peerName == target && usable(c) {
			return c, "", ""
		}
	}
	for _, st := range r.originList {
		if st.name != target || st.id == r.id.Origin {
			continue
		}
		if c := r.conns[st.source]; usable(c) {
			return c, "", ""
		}
		for _, c := range r.connList {
			if _, ok := c.heads[st.id]; ok && usable(c) {
				return c, "", ""
			}
		}
	}
	if c := r.conns[r.cmap.via[target]]; usable(c) {
		return c, "", "" // toward the node whose newest member entry came on it
	}
	return nil, CodeNoRoute, "no version-4 route from " + r.id.Name + " reaches " + strconv.Quote(target) +
		": it routes no origin of that name, no member entry of it came over a connection still open, or every way passes a node the request passed"
}

// refusedRequest is the answer to a request the session of its next hop refused to send:
// too-many-requests at the bound, or the session's own code (frame-too-large for a request
// past the peer's frame limit, send-buffer-full), so the caller learns which.
func refusedRequest(next *conn, err error) (wire.Code, string) {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code, "the connection to " + next.peerName + ": " + we.Message
	}
	return wire.CodeInternal, err.Error()
}

// onRequest serves a request for this node, or passes it on.
func (r *Replica) onRequest(c *conn, req *wire.Request) {
	respond := func(code wire.Code, msg string, body []byte) {
		r.checkConn(c, c.sess.V4().Respond(req.ID, wire.Response{Code: code, Message: msg, Body: body}))
	}
	if req.Target == r.id.Name {
		r.counters.RequestsServed++
		if r.shellServes(req) {
			r.handOver(&hop{in: c.id, inID: req.ID, deadline: r.now.Add(time.Duration(req.TimeoutMS) * time.Millisecond)}, req)
			return
		}
		if later := servesLater(req); later != nil {
			if code, msg, b, done := later(r, &hop{in: c.id, inID: req.ID, deadline: r.now.Add(time.Duration(req.TimeoutMS) * time.Millisecond)}, req); done {
				respond(code, msg, b)
			}
			return
		}
		respond(r.serve(req))
		return
	}
	if slices.Contains(req.Path, r.id.Name) {
		r.counters.RequestsRefused++
		respond(CodeNoRoute, "the request passed "+r.id.Name+" already", nil)
		return
	}
	path := append(slices.Clone(req.Path), r.id.Name)
	next, code, why := r.requestRoute(req.Target, path[:len(path)-1])
	if next == nil {
		r.counters.RequestsRefused++
		respond(code, why, nil)
		return
	}
	fwd := *req
	fwd.Path = path
	outID, err := next.sess.V4().Request(fwd)
	if err != nil {
		r.counters.RequestsRefused++
		code, msg := refusedRequest(next, err)
		respond(code, msg, nil)
		return
	}
	r.counters.RequestsForwarded++
	r.reqs.hops[hopKey{next.id, outID}] = &hop{out: next.id, outID: outID, in: c.id, inID: req.ID,
		deadline: r.now.Add(time.Duration(req.TimeoutMS) * time.Millisecond)}
}

// onResponse takes the answer to a request this node sent on c.
func (r *Replica) onResponse(c *conn, resp *wire.Response, late bool) {
	k := hopKey{c.id, resp.ID}
	h := r.reqs.hops[k]
	if late || h == nil {
		r.counters.RequestsLate++
		return
	}
	delete(r.reqs.hops, k)
	r.answerHop(h, resp.Code, resp.Message, resp.Body)
}

// answerHop gives a request's answer to where it came from: the shell, or the
// connection it came on.
func (r *Replica) answerHop(h *hop, code wire.Code, msg string, body []byte) {
	if h.local != 0 {
		a := Answer{ID: h.local, Code: code, Message: msg, Body: body}
		r.countForward(a)
		r.answered(a)
		return
	}
	if in := r.conns[h.in]; in != nil && in.established && !in.closing {
		err := in.sess.V4().Respond(h.inID, wire.Response{Code: code, Message: msg, Body: body})
		var we *wire.Error
		if errors.As(err, &we) && we.Code == wire.CodeFrameTooLarge {
			// An answer past the frame limit of the connection it goes back on (an API
			// answer of a carrier, or one passed on toward a peer of a smaller limit) is
			// the asker's to learn, not a fault of the connection: it is answered so.
			err = in.sess.V4().Respond(h.inID, wire.Response{Code: wire.CodeFrameTooLarge, Message: "the answer: " + we.Message})
		}
		r.checkConn(in, err)
	}
}

// sortedHops lists the requests in flight whose hop matches keep, by connection and id:
// the order answers are given in must not depend on a map's.
func (r *Replica) sortedHops(keep func(*hop) bool) []*hop {
	var hs []*hop
	for _, h := range r.reqs.hops {
		if keep(h) {
			hs = append(hs, h)
		}
	}
	slices.SortFunc(hs, func(a, b *hop) int {
		return cmp.Or(cmp.Compare(a.out, b.out), cmp.Compare(a.outID, b.outID))
	})
	return hs
}

// expireRequests gives up on requests whose deadline passed: the caller's own get
// request-timeout; a request passed on is answered so upstream, which has given up on it
// too or will get it as late.
func (r *Replica) expireRequests(now time.Time) {
	for _, h := range r.sortedHops(func(h *hop) bool { return !now.Before(h.deadline) }) {
		delete(r.reqs.hops, hopKey{h.out, h.outID})
		if c := r.conns[h.out]; c != nil {
			_ = c.sess.V4().Forget(h.outID) // sent on c: it cannot be refused
		}
		r.answerHop(h, CodeRequestTimeout, "no answer within "+r.cfg.RequestTimeout.String(), nil)
	}
}

// requestsDropped settles the requests of a connection that ended: those sent on it are
// answered unreachable; those that came on it are forgotten downstream (nobody waits).
func (r *Replica) requestsDropped(c *conn) {
	for _, h := range r.sortedHops(func(h *hop) bool { return h.out == c.id || h.in == c.id }) {
		delete(r.reqs.hops, hopKey{h.out, h.outID})
		if h.out == c.id {
			r.answerHop(h, CodeUnreachable, "the connection to "+c.peerName+" closed before the answer", nil)
		} else if out := r.conns[h.out]; out != nil {
			_ = out.sess.V4().Forget(h.outID) // sent on out: it cannot be refused
		}
	}
}

// requestsDue is the earliest deadline of a request in flight (zero: none).
func (r *Replica) requestsDue() time.Time {
	var due time.Time
	for _, h := range r.reqs.hops {
		if due.IsZero() || h.deadline.Before(due) {
			due = h.deadline
		}
	}
	return due
}
