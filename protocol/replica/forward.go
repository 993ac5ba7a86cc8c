package replica

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"plait/protocol/clustermap"
	"plait/protocol/wire"
)

// Requests for a table this node does not carry (docs/design.md §24.5): the API of a node
// that does not carry a table sends each request for it to one carrier, as a request of
// kind api over the request exchange (requests.go); the carrier's shell runs it through
// its own API and answers. The choices are here: which carrier (Carrier), what counts as
// which outcome; the shell does the HTTP.

// KindAPI is the request kind that carries an API request to a carrier (wire.APIRequest);
// its answer's body is a wire.APIAnswer.
const KindAPI = "api"

// ServedID names a request for this node that the shell serves (Served), from 1, never
// reused.
type ServedID uint64

// Served is a request for this node of a kind the shell serves (kind api): the shell
// answers it once with Reply, by Deadline. An answer after the deadline, or after the
// connection it came on closed, is dropped (the asker was answered request-timeout or
// nobody waits).
type Served struct {
	ID       ServedID
	Kind     string
	Scope    string
	Body     []byte
	Deadline time.Time
}

// servedConn is the connection id the hops of served requests are kept under: no
// connection has it (ConnID counts from 1), so a served request is a hop that went
// nowhere, and expiry and a closing connection treat it as they treat every hop.
const servedConn ConnID = 0

// handOver gives a request for this node of a kind the shell serves to the shell: h says
// where its answer goes (the caller's Answers, or the connection it came on).
func (r *Replica) handOver(h *hop, req *wire.Request) {
	rs := &r.reqs
	rs.lastServed++
	h.out, h.outID = servedConn, uint64(rs.lastServed)
	rs.hops[hopKey{servedConn, h.outID}] = h
	rs.served = append(rs.served, Served{ID: rs.lastServed, Kind: req.Kind, Scope: req.Scope, Body: req.Body, Deadline: h.deadline})
	if req.Kind == KindAPI {
		r.counters.ForwardsServed++
	}
}

// Served hands over the requests for this node that the shell serves, in the order they
// came.
func (r *Replica) Served() []Served {
	s := r.reqs.served
	r.reqs.served = nil
	return s
}

// Reply answers a request Served handed over: code "" and the kind's answer body, or a
// code and message. An answer to a request already given up (its deadline passed, or its
// connection closed) is dropped and counted late.
func (r *Replica) Reply(now time.Time, id ServedID, code wire.Code, msg string, body []byte) error {
	if r.fatal != nil {
		return r.fatal
	}
	r.setNow(now)
	k := hopKey{servedConn, uint64(id)}
	h := r.reqs.hops[k]
	if h == nil {
		r.counters.RequestsLate++
		return nil
	}
	delete(r.reqs.hops, k)
	r.answerHop(h, code, msg, body)
	return r.settle()
}

// Carrier chooses the carrier an API request for table goes to from this node: the
// reachable carriers (those the request routing reaches now), neighbours first by their
// measured round trip (one not measured yet after those measured), then the others by
// name. "" when no carrier is reachable, which is counted (forwards_no_carrier): the
// caller answers no-carrier and sends nothing. "" too, uncounted, for a table this node
// carries: nothing is forwarded.
func (r *Replica) Carrier(table []byte) string {
	m := &r.cmap.cur
	if m.Carries(r.id.Name, table) && !r.Filling(table) {
		return "" // a table this node fills is read from another carrier
	}
	names := m.Placement[string(table)]
	if f := r.fills[string(table)]; f != nil {
		// This node fills the table: its reads go to a node that holds it whole, not to
		// another carrier added with it (fillSources).
		tiers := r.fillSources(string(table), f)
		for i := 0; i < len(tiers) && i < 2; i++ { // not those filling with it
			if len(tiers[i]) > 0 {
				names = slices.Sorted(slices.Values(tiers[i]))
				break
			}
		}
	}
	var cands []carrierCandidate
	for _, name := range names {
		if name == r.id.Name {
			continue
		}
		c := carrierCandidate{name: name}
		if next, _, _ := r.requestRoute(name, []string{r.id.Name}); next != nil {
			c.reachable = true
			if next.peerName == name {
				c.neighbour, c.rtt = true, next.sess.RTT()
			}
		}
		cands = append(cands, c)
	}
	best := chooseCarrier(cands)
	if best == "" {
		r.counters.ForwardsNoCarrier++
	}
	return best
}

// carrierCandidate is one carrier of a table, as this node sees it now.
type carrierCandidate struct {
	name      string
	reachable bool          // the request routing reaches it now
	neighbour bool          // it is a version-4 neighbour (the route is the connection to it)
	rtt       time.Duration // a neighbour's measured round trip; 0 before the first
}

// chooseCarrier is the rule of Carrier: of the reachable candidates, a neighbour before a
// node further away; among neighbours the lowest round trip, a neighbour not measured yet
// after those measured; then by name. "" when none is reachable.
func chooseCarrier(cands []carrierCandidate) string {
	var ok []carrierCandidate
	for _, c := range cands {
		if c.reachable {
			ok = append(ok, c)
		}
	}
	if len(ok) == 0 {
		return ""
	}
	rank := func(c carrierCandidate) int {
		switch {
		case c.neighbour && c.rtt > 0:
			return 0
		case c.neighbour:
			return 1
		}
		return 2
	}
	rtt := func(c carrierCandidate) time.Duration {
		if rank(c) == 0 {
			return c.rtt
		}
		return 0
	}
	return slices.MinFunc(ok, func(a, b carrierCandidate) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(rtt(a), rtt(b)), strings.Compare(a.name, b.name))
	}).name
}

// Forward starts a request of kind api for carrier (Carrier's choice) with the caller's
// scope and the api body (wire.APIRequest). Its answer comes in Answers as every request's
// does; the outcome is counted there: forwards_answered when the carrier answered,
// forwards_no_carrier when the request found no way to it (no-route, unreachable,
// request-timeout).
func (r *Replica) Forward(now time.Time, carrier, scope string, body []byte) (RequestID, error) {
	id, err := r.Ask(now, carrier, KindAPI, scope, body)
	if err != nil {
		return id, err
	}
	if r.reqs.forwards == nil {
		r.reqs.forwards = map[RequestID]bool{}
	}
	r.reqs.forwards[id] = true
	// Ask may have answered at once (a refusal at the first hop): count it now.
	for i := range r.reqs.answers {
		if r.reqs.answers[i].ID == id {
			r.countForward(r.reqs.answers[i])
		}
	}
	return id, nil
}

// countForward counts the outcome of a forwarded API request once its answer is known.
func (r *Replica) countForward(a Answer) {
	if !r.reqs.forwards[a.ID] {
		return
	}
	delete(r.reqs.forwards, a.ID)
	if ForwardFoundNoCarrier(a.Code) {
		r.counters.ForwardsNoCarrier++
	} else {
		r.counters.ForwardsAnswered++
	}
}

// ForwardFoundNoCarrier reports whether a forwarded API request's answer code says the
// request never reached the carrier, or its answer never came back: the API answers it
// no-carrier, as when no carrier is reachable at all.
func ForwardFoundNoCarrier(code wire.Code) bool {
	return code == CodeNoRoute || code == CodeUnreachable || code == CodeRequestTimeout
}

// NotCarried is the answer to an API request for a table this node does not carry that
// is not to be forwarded (Plait-Forward: no, or a request a carrier's API forwarded here
// that this node does not carry either): the table's carriers under this node's map, in
// name order, with their API addresses where the map gives them. Counted
// (forwards_not_carried).
func (r *Replica) NotCarried(table []byte) []clustermap.Node {
	r.counters.ForwardsNotCarried++
	m := &r.cmap.cur
	var out []clustermap.Node
	for _, name := range m.Placement[string(table)] {
		n := clustermap.Node{Name: name}
		if i := slices.IndexFunc(m.Nodes, func(x clustermap.Node) bool { return x.Name == name }); i >= 0 {
			n.API = m.Nodes[i].API
		}
		out = append(out, n)
	}
	return out
}

// ClusterMap is the map this node holds (generation 0: none). It never changes once
// handed out, so a shell may keep it and ask it Carries without the replica.
func (r *Replica) ClusterMap() clustermap.Map { return r.cmap.cur }
