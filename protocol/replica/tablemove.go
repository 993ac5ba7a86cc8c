package replica

import (
	"bytes"
	"encoding/binary"
	"maps"
	"slices"
	"time"

	"plait/protocol/wire"
)

// A node removed from a table (docs/design.md §24.4): it keeps the table's records until
// every carrier of the table in its map has applied, of every origin, what this node had
// applied when the removal began, so that nothing acknowledged here is lost with its copy;
// then it deletes them in one write and counts what it freed. It learns a carrier's
// positions by a request (kind positions), which reaches carriers it is not connected to
// through the mesh; a carrier that is down is waited for until a map drops it from the
// table.

// removal is a table this node holds records of and no longer carries.
type removal struct {
	table string
	// want: this node's applied positions when the removal began.
	want map[wire.OriginID]uint64
	// waiting: the carriers that have not shown them yet; asking: their requests in flight.
	waiting map[string]bool
	asking  map[string]RequestID
	nextAt  time.Time
}

// RemovalStatus is a table waiting to be removed, and the carriers it waits for.
type RemovalStatus struct {
	Table   string
	Waiting []string
}

// planRemovals makes the removals the map asks for: a table this node holds records of and
// does not carry is removed (a new removal wants this node's positions now); one it
// carries again is not; a carrier no longer in the map is not waited for.
func (r *Replica) planRemovals() {
	r.removalsDirty = false
	m := &r.cmap.cur
	tables, err := r.store.Tables()
	if !r.check(err) {
		return
	}
	held := map[string]bool{}
	for _, t := range tables {
		held[string(t)] = true
		if r.carries(t) || r.removals[string(t)] != nil {
			continue
		}
		rm := &removal{table: string(t), want: map[wire.OriginID]uint64{}, asking: map[string]RequestID{}, nextAt: r.now}
		for _, st := range r.originList {
			if st.applied.Seq > 0 && st.id != r.id.Origin {
				rm.want[st.id] = st.applied.Seq
			}
		}
		// This node's own writes of the table: its carriers must hold them too.
		if own := r.origins[r.id.Origin]; own != nil && own.applied.Seq > 0 {
			rm.want[r.id.Origin] = own.applied.Seq
		}
		if r.removals == nil {
			r.removals = map[string]*removal{}
		}
		r.removals[string(t)] = rm
	}
	for t, rm := range r.removals {
		if !held[t] || r.carries([]byte(t)) {
			delete(r.removals, t)
			continue
		}
		carriers := map[string]bool{}
		for _, n := range m.Placement[t] {
			if n != r.id.Name {
				carriers[n] = true
			}
		}
		if rm.waiting == nil {
			rm.waiting = carriers
		}
		for n := range rm.waiting {
			if !carriers[n] {
				delete(rm.waiting, n)
			}
		}
	}
}

// removeTables asks the carriers each removal waits for, when due, and removes a table
// once none is waited for.
func (r *Replica) removeTables() {
	if r.removalsDirty {
		r.planRemovals()
	}
	if len(r.removals) == 0 || r.storage.err != nil {
		return
	}
	for _, t := range slices.Sorted(maps.Keys(r.removals)) {
		rm := r.removals[t]
		if len(rm.waiting) == 0 {
			n, size, err := r.store.DropTable([]byte(t))
			if !r.check(err) {
				return
			}
			r.counters.TablesRemoved++
			r.counters.RecordsFreed += n
			r.counters.BytesFreed += size
			delete(r.removals, t)
			continue
		}
		if r.now.Before(rm.nextAt) {
			continue
		}
		rm.nextAt = r.now.Add(r.cfg.PlacementPoll)
		for _, name := range slices.Sorted(maps.Keys(rm.waiting)) {
			if _, asked := rm.asking[name]; asked {
				continue
			}
			carrier := name
			if r.reqs.own == nil {
				r.reqs.own = map[RequestID]func(Answer){}
			}
			id := r.reqs.last + 1
			r.reqs.own[id] = func(a Answer) { r.carrierAnswered(t, carrier, a) }
			if got := r.ask(carrier, kindPositions, wire.ScopeRead, nil); got != id {
				r.check(errorf("a request was given id %d, not %d", got, id))
				return
			}
			rm.asking[carrier] = id
		}
	}
}

// carrierAnswered takes a carrier's positions: once they are at or past what the removal
// wants of every origin, the carrier is no longer waited for.
func (r *Replica) carrierAnswered(table, carrier string, a Answer) {
	rm := r.removals[table]
	if rm == nil || rm.asking[carrier] != a.ID {
		return // removed or planned again since
	}
	delete(rm.asking, carrier)
	if a.Code != "" {
		return // unreachable, down, timed out: asked again at the next poll
	}
	have, ok := parsePositions(a.Body)
	if !ok {
		return
	}
	for o, seq := range rm.want {
		if have[o] < seq {
			return
		}
	}
	delete(rm.waiting, carrier)
}

// removalsDue is when a removal next asks its carriers (zero: none waits).
func (r *Replica) removalsDue() time.Time {
	var next time.Time
	for _, rm := range r.removals {
		if len(rm.waiting) > len(rm.asking) && (next.IsZero() || rm.nextAt.Before(next)) {
			next = rm.nextAt
		}
	}
	return next
}

// Removals lists the tables waiting to be removed and the carriers each waits for.
func (r *Replica) Removals() []RemovalStatus {
	var out []RemovalStatus
	for _, t := range slices.Sorted(maps.Keys(r.removals)) {
		out = append(out, RemovalStatus{Table: t, Waiting: slices.Sorted(maps.Keys(r.removals[t].waiting))})
	}
	return out
}

// kindPositions is the request kind of a node's applied positions: no body; the answer is
// 24 bytes per origin it holds, the origin id and its applied seq (big-endian), sorted by
// origin (protocol/SPEC.md, Version 4).
const kindPositions = "positions"

func servePositions(r *Replica, _ []byte) (wire.Code, string, []byte) {
	var b []byte
	for _, o := range r.originOrder {
		if st := r.origins[o]; st.applied.Seq > 0 {
			b = append(b, o[:]...)
			b = binary.BigEndian.AppendUint64(b, st.applied.Seq)
		}
	}
	return "", "", b
}

// parsePositions reads a positions answer: strictly ascending origins, 24 bytes each.
func parsePositions(b []byte) (map[wire.OriginID]uint64, bool) {
	if len(b)%24 != 0 {
		return nil, false
	}
	out := make(map[wire.OriginID]uint64, len(b)/24)
	var last wire.OriginID
	for i := 0; i < len(b); i += 24 {
		var o wire.OriginID
		copy(o[:], b[i:i+16])
		if i > 0 && bytes.Compare(o[:], last[:]) <= 0 {
			return nil, false
		}
		out[o], last = binary.BigEndian.Uint64(b[i+16:i+24]), o
	}
	return out, true
}
