package node

import (
	"context"
	"slices"
	"time"

	"plait/protocol/clustermap"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// Requests for a table this node does not carry (docs/design.md §24.5), as the HTTP API
// calls them: which carrier, the counts and the request exchange are the replica's; the
// node keeps the map for the API to ask, runs the requests the replica hands it through
// the API's handler off the loop, and waits for a forwarded request's answer.

// APIHandler serves a request of kind api for this node: the scope it carries and its body
// (a wire.APIRequest), answered with a code and message, or "" and the answer's body (a
// wire.APIAnswer). ctx ends at the request's deadline, or when the node stops.
type APIHandler func(ctx context.Context, scope string, body []byte) (code wire.Code, msg string, answer []byte)

// ServeAPI makes h serve the requests of kind api this node is sent. Until it is called
// they are answered unknown-kind, as by a build without the kind.
func (n *Node) ServeAPI(h APIHandler) { n.apiHandler.Store(&h) }

// keepMap keeps the replica's map for Carries when it changed (loop only).
func (n *Node) keepMap() {
	if cur := n.cmap.Load(); cur == nil || cur.Generation != n.rep.MapGeneration() {
		m := n.rep.ClusterMap()
		n.cmap.Store(&m)
	}
	// The tables owed a fill change with the map or when a fill ends (fewer of them).
	if f := n.filling.Load(); f == nil || f.generation != n.rep.MapGeneration() || len(f.tables) != n.rep.FillCount() {
		n.filling.Store(&fillingTables{generation: n.rep.MapGeneration(), tables: n.rep.MapStatus().Filling})
	}
}

// fillingTables are the tables this node was added to and has not filled, under a map.
type fillingTables struct {
	generation uint64
	tables     []string
}

// Filling reports whether this node carries table and has not filled it yet (its reads go
// to a carrier that holds it, docs/contract.md §23.6), as of the last input.
func (n *Node) Filling(table []byte) bool {
	f := n.filling.Load()
	return f != nil && slices.Contains(f.tables, string(table))
}

// Carries reports whether this node carries table under the map it held after the last
// input: without a turn of the loop, since the API asks it for every request of a table. A
// request that meets a map changing under it is answered by the rules of either map: a
// write the replica then refuses as not carried, a read of what this node holds.
func (n *Node) Carries(table []byte) bool {
	m := n.cmap.Load()
	return m == nil || m.Carries(n.cfg.Name, table)
}

// NotCarried is replica.NotCarried: the carriers of a table this node does not carry, for
// an answer that does not forward.
func (n *Node) NotCarried(table []byte) (carriers []clustermap.Node, err error) {
	if derr := n.do(func() { carriers = n.rep.NotCarried(table) }); derr != nil {
		return nil, derr
	}
	return carriers, nil
}

// Forward sends an API request (a wire.APIRequest body) for a table this node does not
// carry to the carrier the replica chooses, with the caller's scope, and waits for the
// answer, as Ask does. carrier is "" when no carrier is reachable: nothing was sent.
func (n *Node) Forward(ctx context.Context, table []byte, scope string, body []byte) (carrier string, ans replica.Answer, err error) {
	reply := make(chan replica.Answer, 1)
	err = n.do(func() {
		if carrier = n.rep.Carrier(table); carrier == "" {
			return
		}
		id, err := n.rep.Forward(time.Now(), carrier, scope, body)
		n.check(err)
		if err != nil {
			reply <- replica.Answer{Code: wire.CodeInternal, Message: err.Error()}
			return
		}
		if n.asks == nil {
			n.asks = map[replica.RequestID]chan replica.Answer{}
		}
		n.asks[id] = reply
	})
	if err != nil || carrier == "" {
		return "", replica.Answer{}, err
	}
	select {
	case a := <-reply:
		return carrier, a, nil
	case <-ctx.Done():
		return carrier, replica.Answer{}, ctx.Err()
	case <-n.stopped:
		return carrier, replica.Answer{}, errStopped
	}
}

// serveRequests runs the requests the replica hands over through the API's handler, each
// off the loop, and gives each answer back to the replica (loop only). The replica bounds
// them: at most its requests in flight per connection.
func (n *Node) serveRequests() {
	for _, s := range n.rep.Served() {
		h := n.apiHandler.Load()
		if h == nil || s.Kind != replica.KindAPI {
			n.check(n.rep.Reply(time.Now(), s.ID, replica.CodeUnknownKind, "this node serves no request of kind "+s.Kind+" yet", nil))
			continue
		}
		go func() {
			ctx, cancel := context.WithDeadline(n.ctx, s.Deadline)
			code, msg, body := (*h)(ctx, s.Scope, s.Body)
			cancel()
			_ = n.do(func() { n.check(n.rep.Reply(time.Now(), s.ID, code, msg, body)) }) // an error: the node stopped, nobody waits
		}()
	}
}

// Name is this node's name.
func (n *Node) Name() string { return n.cfg.Name }
