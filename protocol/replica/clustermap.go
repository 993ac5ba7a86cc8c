package replica

import (
	"bytes"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"plait/protocol/clustermap"
	"plait/protocol/handshake"
	"plait/protocol/wire"
)

// The cluster map (docs/design.md §23): one document every node holds, adopted by
// generation alone, and the member entries that say which nodes speak version 4. Both
// travel on version-4 connections (MAP, MEMBERS) and live in the store's control state,
// never in a log, a table, a copy or a repair.

// Control keys of the store (store.Control).
const (
	controlMap     = "cluster-map"
	controlMembers = "cluster-members"
)

// CodeStaleGeneration refuses a published map at or below the node's generation that is not
// its map (docs/contract.md §22.2).
const CodeStaleGeneration wire.Code = "stale-generation"

// v4 is the protocol version the cluster map, member entries and requests need.
const v4 = 4

// clusterState is the map this node holds and the member entries it knows.
type clusterState struct {
	cur       clustermap.Map // Generation 0: none
	publisher string
	published wire.HLC
	appliedAt time.Time
	// conflict: the last different map of the current generation met; conflictDoc its
	// canonical bytes, so the same one met again on another connection is counted once.
	conflict    *MapConflict
	conflictDoc []byte
	members     map[string]clustermap.Member
	// membersDirty: entries changed since the last settle, sent then to every version-4
	// connection and persisted; membersFrom: the connection each came from (not sent back).
	membersDirty map[string]ConnID
	// via: the connection each node's newest member entry came on. Entries spread from
	// their node outward, so it leads toward that node: requests use it to reach a node
	// whose origin this node does not route (one that never wrote).
	via     map[string]ConnID
	stamped bool // this node's own entry was stamped since New
}

// storedMap is the control value of the current map: its MAP body and when it was adopted.
type storedMap struct {
	Map       wire.Map `cbor:"1,keyasint"`
	AppliedAt int64    `cbor:"2,keyasint,omitempty"` // Unix nanoseconds
	// Fills are the tables this node was added to and has not filled yet (tablemove.go),
	// kept with the map so that adopting it and owing their fills are one write.
	Fills []storedFill `cbor:"3,keyasint,omitempty"`
	// Held are the tables this node holds records of and no longer carries, and how far
	// it holds them (holds.go), kept with the map for the same reason.
	Held []storedHold `cbor:"4,keyasint,omitempty"`
	// Writers are, of each table a map this node held placed, the nodes that carried it
	// under one of them, or none when it was unplaced before (every node may have written
	// it): a base copy must not pass their entries (holds.go, mayWrite).
	Writers []storedWriters `cbor:"5,keyasint,omitempty"`
	// OwnSince is, of each table this node does not carry, the seq of its own log from
	// which its entries write none of it (holds.go, HOLDS's since).
	OwnSince []storedSince `cbor:"6,keyasint,omitempty"`
}

// storedWriters is one table's writers in the map's control value.
type storedWriters struct {
	Table string   `cbor:"1,keyasint"`
	Any   bool     `cbor:"2,keyasint,omitempty"`
	Nodes []string `cbor:"3,keyasint,omitempty"`
}

// storedMembers is the control value of the member entries.
type storedMembers struct {
	Entries []wire.Member `cbor:"1,keyasint,omitempty"`
}

// MapConflict is another map of the current generation, met and not adopted.
type MapConflict struct {
	Generation uint64
	Publisher  string
}

// MemberVersion is what this node knows of one node: its protocol version and the map
// generation it holds (0: none, or not known).
type MemberVersion struct {
	Name       string
	MaxVersion uint64
	Generation uint64
}

// MapStatus is the cluster map's part of the status (docs/contract.md §22.4).
type MapStatus struct {
	Generation     uint64
	Publisher      string
	AppliedAt      time.Time // zero: no map
	Document       []byte    // the canonical JSON; {"generation":0} with none
	Members        []string  // nil: no member list
	MembersBelowV4 []string
	Conflict       *MapConflict
	Versions       []MemberVersion
	// Placement is the map's placement: each placed table's carriers, sorted (nil: no
	// table placed). Carried are the placed tables this node carries, sorted.
	Placement map[string][]string
	Carried   []string
	// Removals are the tables this node holds records of and no longer carries, each with
	// the carriers it waits for; Filling the tables it was added to and has not filled
	// (tablemove.go), sorted.
	Removals []RemovalStatus
	Filling  []string
}

// speaksV4 reports whether this node offers version 4.
func (r *Replica) speaksV4() bool { return r.maxVersion() >= v4 }

// loadClusterMap reads the map and the member entries from the store, and stamps this
// node's own entry anew: a node is the authority on itself, and its entry must outrank any
// report a neighbour made of an older build under its name.
func (r *Replica) loadClusterMap() error {
	cs := &r.cmap
	cs.members, cs.membersDirty, cs.via = map[string]clustermap.Member{}, map[string]ConnID{}, map[string]ConnID{}
	raw, err := r.store.Control(controlMap)
	if err != nil {
		return err
	}
	if raw != nil {
		var sm storedMap
		if err := wire.Unmarshal(raw, &sm); err != nil {
			return errorf("the stored cluster map does not decode: %v", err)
		}
		m, err := clustermap.Decode(sm.Map.Document)
		if err != nil {
			return errorf("the stored cluster map: %v", err)
		}
		cs.cur, cs.publisher, cs.published = m, sm.Map.Publisher, wire.HLC(sm.Map.Published)
		cs.appliedAt = time.Unix(0, sm.AppliedAt).UTC()
		r.fills, r.held, r.writers = loadFills(sm.Fills), loadHolds(sm.Held), loadWriters(sm.Writers)
		r.ownSince = loadSince(sm.OwnSince)
	}
	if raw, err = r.store.Control(controlMembers); err != nil {
		return err
	}
	if raw != nil {
		var sm storedMembers
		if err := wire.Unmarshal(raw, &sm); err != nil {
			return errorf("the stored member entries do not decode: %v", err)
		}
		for _, e := range sm.Entries {
			cs.members[e.Name] = clustermap.Member{Name: e.Name, MaxVersion: e.MaxVersion, Stamp: e.Stamp, Generation: e.Generation}
		}
	}
	return nil
}

// stampSelf publishes this node's own member entry at the first input (the replica's
// clock needs a time), above every stamp it knows of its name.
func (r *Replica) stampSelf(now time.Time) {
	cs := &r.cmap
	e := clustermap.Member{Name: r.id.Name, MaxVersion: r.maxVersion(), Stamp: stamp(now, cs.members[r.id.Name].Stamp), Generation: cs.cur.Generation}
	cs.members[e.Name] = e
	cs.membersDirty[e.Name] = 0
}

// stamp is the stamp of a member entry (or a map's publication) made at now: the HLC of
// the wall clock, or, when that is not above after, after's successor. It does not move
// the replica's clock: member entries are not writes, and a peer's stamp from a clock
// ahead must not carry this node's writes' timestamps with it.
func stamp(now time.Time, after uint64) uint64 {
	return max(uint64(wire.MakeHLC(uint64(max(now.UnixMilli(), 0)), 0)), after+1)
}

// maxVersion is the highest protocol version this node offers.
func (r *Replica) maxVersion() uint64 {
	rng, err := handshake.Clamp(r.cfg.MinVersion, r.cfg.MaxVersion)
	if err != nil {
		rng = handshake.Implemented()
	}
	return rng.Max
}

// PublishMap publishes a document an operator gave this node (PUT /v1/cluster/map): it
// answers the node's map after, or an error: *clustermap.Error for a document the API
// refuses (400), or for one that does not fence a table the node's map fences or lowers
// its leaf window (codes unfenced and leaf-window-lowered, 409: clustermap.CheckSuccessor);
// wire code stale-generation for one at or below the node's generation that is not its
// map (409).
func (r *Replica) PublishMap(now time.Time, doc []byte) (MapStatus, error) {
	if r.fatal != nil {
		return MapStatus{}, r.fatal
	}
	r.setNow(now)
	m, perr := clustermap.Parse(doc)
	if perr != nil {
		return MapStatus{}, perr
	}
	switch clustermap.Decide(r.cmap.cur, m) {
	case clustermap.Same:
		return r.MapStatus(), nil
	case clustermap.Stale, clustermap.Conflict:
		return MapStatus{}, wire.NewError(CodeStaleGeneration, "generation "+strconv.FormatUint(m.Generation, 10)+" is not above this node's, "+strconv.FormatUint(r.cmap.cur.Generation, 10))
	}
	if err := clustermap.CheckSuccessor(r.cmap.cur, m); err != nil {
		return MapStatus{}, err
	}
	if turnsOnLocks(r.cmap.cur, m) {
		// Locks are whole-cluster (docs/design.md §23.3), and a table once fenced stays
		// fenced: a map that would turn them on waits for every member it lists to speak
		// version 4, never half on.
		if err := clustermap.RequireV4(m, r.cmap.members); err != nil {
			return MapStatus{}, err
		}
	}
	if !r.adoptMap(m, r.id.Name, wire.HLC(stamp(now, uint64(r.hlc))), 0) {
		if err := r.settleFailed(); err != nil {
			return MapStatus{}, err
		}
		if err := r.failure(); err != nil {
			return MapStatus{}, err
		}
		return MapStatus{}, wire.NewError(wire.CodeInternal, "the cluster map was not stored")
	}
	return r.MapStatus(), r.settle()
}

// adoptMap makes m the node's map (storeMap), then sends it on every version-4 connection
// but the one it came from (from; 0: published here).
func (r *Replica) adoptMap(m clustermap.Map, publisher string, published wire.HLC, from ConnID) bool {
	if !r.storeMap(m, publisher, published) {
		return false
	}
	body := r.mapBody()
	for _, c := range r.connList {
		if c.id != from && c.established && c.version >= v4 {
			r.checkConn(c, c.sess.V4().SendMap(*body))
		}
	}
	return true
}

// storeMap makes m the node's map, stored first, and stamps this node's member entry
// with its generation.
func (r *Replica) storeMap(m clustermap.Map, publisher string, published wire.HLC) bool {
	cs := &r.cmap
	fills, held, since := r.plannedHolds(cs.cur, m)
	wasWriters, wasSince := r.writers, r.ownSince
	// written with the map, below
	r.writers, r.ownSince = r.plannedWriters(cs.cur, m), since
	if !r.noteLockMove(cs.cur, m) || !r.check(r.writeMap(m, publisher, published, r.now, fills, held)) {
		r.writers, r.ownSince = wasWriters, wasSince
		return false
	}
	r.fills, r.held = fills, held
	prev := cs.cur
	cs.cur, cs.publisher, cs.published, cs.appliedAt = m, publisher, published, r.now
	cs.conflict, cs.conflictDoc = nil, nil
	r.counters.ClusterMapAdopted++
	r.removalsDirty = true
	r.stampSelf(r.now) // every node's entry says which generation it holds
	r.lockMapAdopted(prev, m)
	return true
}

// writeMap writes the control value of a map, the fills it owes and the tables it holds
// and does not carry.
func (r *Replica) writeMap(m clustermap.Map, publisher string, published wire.HLC, at time.Time, fills map[string]*fill, held map[string]*tableHold) error {
	body := wire.Map{Generation: m.Generation, Document: m.Doc, Publisher: publisher, Published: uint64(published)}
	raw, err := wire.Marshal(storedMap{Map: body, AppliedAt: at.UnixNano(), Fills: storeFills(fills), Held: storeHolds(held),
		Writers: storeWriters(r.writers), OwnSince: storeSince(r.ownSince)})
	if err != nil {
		return err
	}
	return r.store.PutControl(controlMap, raw)
}

// onMap decides a map a peer sent: adopt a higher generation, keep the node's own
// otherwise, and record a different map of the same generation as a conflict. A higher
// generation that does not fence a table the node's map fences, or lowers its leaf window,
// is refused and counted (clustermap.CheckSuccessor), and the connection stays: the map is well formed, and the
// peer, which adopted it over a map that fenced nothing, broke no rule of its own; the
// two hold different maps until one that fences the table reaches both.
func (r *Replica) onMap(c *conn, b *wire.Map) {
	m, err := clustermap.Decode(b.Document)
	if err != nil || m.Generation != b.Generation {
		why := "the MAP's generation is not its document's"
		if err != nil {
			why = "the MAP's document: " + err.Error()
		}
		r.closeConn(c, wire.CodeBadField, why)
		return
	}
	cs := &r.cmap
	d := clustermap.Decide(cs.cur, m)
	switch mu := r.cfg.Mutations; {
	case mu.MapByHLC && d != clustermap.Same: // test-only: last-writer-wins by publication
		d = clustermap.Stale
		if wire.HLC(b.Published) > cs.published {
			d = clustermap.Adopt
		}
	case mu.MapRepaired && d != clustermap.Same && d != clustermap.Adopt:
		// Test-only: the peer's map written over this node's, as a repair writes a peer's
		// version around the log: kept here, sent nowhere.
		r.storeMap(m, b.Publisher, wire.HLC(b.Published))
		return
	}
	switch d {
	case clustermap.Adopt:
		if clustermap.CheckSuccessor(cs.cur, m) != nil {
			r.counters.ClusterMapRefused++
			break
		}
		r.adoptMap(m, b.Publisher, wire.HLC(b.Published), c.id)
	case clustermap.Conflict:
		if !bytes.Equal(cs.conflictDoc, m.Doc) {
			cs.conflict, cs.conflictDoc = &MapConflict{Generation: m.Generation, Publisher: b.Publisher}, m.Doc
			r.counters.ClusterMapConflicts++
		}
	}
	c.peerGen = max(c.peerGen, m.Generation)
	if c.skipWait != nil && c.peerGen >= cs.cur.Generation {
		r.mapCaughtUp(c)
	}
}

// onMembers takes the member entries a peer sent: the newer of two entries for a name
// wins; a report about this node that would outrank its own entry is answered by a new
// entry of its own above it.
func (r *Replica) onMembers(c *conn, es []wire.Member) {
	cs := &r.cmap
	for _, e := range es {
		in := clustermap.Member{Name: e.Name, MaxVersion: e.MaxVersion, Stamp: e.Stamp, Generation: e.Generation}
		have, ok := cs.members[in.Name]
		switch {
		case in.Name == r.id.Name:
			if in != have && in.Stamp >= have.Stamp {
				r.stampSelf(r.now)
			}
		case !clustermap.Newer(have, in) && ok:
		case !ok && len(cs.members) >= r.cfg.MaxMembers:
			r.counters.MembersRefused++
		default:
			cs.members[in.Name] = in
			cs.membersDirty[in.Name] = c.id
			cs.via[in.Name] = c.id
		}
	}
	// A peer whose runs waited for its map to catch up says it did in its own entry: a
	// node that adopts a map from a peer sends it on every other connection, not back.
	for _, pc := range r.connList {
		if pc.skipWait != nil && cs.members[pc.peerName].Generation >= cs.cur.Generation {
			r.mapCaughtUp(pc)
		}
	}
}

// observeVersion records, on a version-4 node, the version a peer offered in its
// handshake when it is below 4: the peer cannot say so itself to the cluster.
func (r *Replica) observeVersion(c *conn, peerMax uint64) {
	if peerMax >= v4 || !r.speaksV4() || c.peerName == "" {
		return
	}
	cs := &r.cmap
	if have, ok := cs.members[c.peerName]; ok && have.MaxVersion == peerMax {
		return
	}
	if _, ok := cs.members[c.peerName]; !ok && len(cs.members) >= r.cfg.MaxMembers {
		r.counters.MembersRefused++
		return
	}
	cs.members[c.peerName] = clustermap.Member{Name: c.peerName, MaxVersion: peerMax, Stamp: stamp(r.now, cs.members[c.peerName].Stamp)}
	cs.membersDirty[c.peerName] = c.id
}

// greetV4 sends a new version-4 connection the node's map and every member entry.
func (r *Replica) greetV4(c *conn) {
	if m := r.mapBody(); m != nil {
		r.checkConn(c, c.sess.V4().SendMap(*m))
	}
	if es := r.memberEntries(nil); len(es) > 0 {
		r.checkConn(c, c.sess.V4().SendMembers(es))
	}
}

// mapBody is the MAP body of the node's map, nil with none.
func (r *Replica) mapBody() *wire.Map {
	cs := &r.cmap
	if cs.cur.Generation == 0 {
		return nil
	}
	return &wire.Map{Generation: cs.cur.Generation, Document: cs.cur.Doc, Publisher: cs.publisher, Published: uint64(cs.published)}
}

// memberEntries lists the member entries, sorted by name: all of them, or those of names.
func (r *Replica) memberEntries(names map[string]ConnID) []wire.Member {
	var es []wire.Member
	for n, e := range r.cmap.members {
		if _, listed := names[n]; names == nil || listed {
			es = append(es, wire.Member{Name: n, MaxVersion: e.MaxVersion, Stamp: e.Stamp, Generation: e.Generation})
		}
	}
	slices.SortFunc(es, func(a, b wire.Member) int { return strings.Compare(a.Name, b.Name) })
	return es
}

// flushMembers stores and sends the entries that changed since the last settle.
func (r *Replica) flushMembers() {
	cs := &r.cmap
	if len(cs.membersDirty) == 0 {
		return
	}
	raw, err := wire.Marshal(storedMembers{Entries: r.memberEntries(nil)})
	if !r.check(err) || !r.check(r.store.PutControl(controlMembers, raw)) {
		return
	}
	changed := r.memberEntries(cs.membersDirty)
	origins := r.memberOrigins(changed)
	for _, c := range r.connList {
		if !c.established || c.version < v4 {
			continue
		}
		var es []wire.Member
		for i, e := range changed {
			if cs.membersDirty[e.Name] != c.id && !r.hearsDirectly(c, e.Name, origins[i]) {
				es = append(es, e)
			}
		}
		if len(es) > 0 {
			r.checkConn(c, c.sess.V4().SendMembers(es))
		}
	}
	clear(cs.membersDirty)
}

// memberOrigins is, for each entry, the origin of the member it names, when this node
// knows it (the zero id otherwise).
func (r *Replica) memberOrigins(es []wire.Member) []wire.OriginID {
	os := make([]wire.OriginID, len(es))
	if len(es) == 0 {
		return os
	}
	byName := make(map[string]wire.OriginID, len(r.originList))
	for _, st := range r.originList {
		if st.name != "" {
			byName[st.name] = st.id
		}
	}
	for i, e := range es {
		os[i] = byName[e.Name]
	}
	return os
}

// hearsDirectly reports whether the peer on a quiet link has a member's entries from the
// member itself, so that this node need not pass them on (docs/design.md §28.3): the peer
// is the member, or it takes the member's origin from the member's own node, which sends
// its own entry on every version-4 connection as it changes (and its version is observed
// in the handshake when the member is older). Without this, every node passed every
// other node's entry to every peer: a mesh's MEMBERS grew as N³. A peer that goes loud on
// the origin is sent the member's entry again (memberToLoud).
func (r *Replica) hearsDirectly(c *conn, name string, o wire.OriginID) bool {
	if !c.quietLink() || name == r.id.Name { // this node's own entry: only it sends it
		return false
	}
	return c.peerName == name || !o.IsZero() && c.peerQuiet[o]
}

// memberToLoud sends the peer on c the entry of the member whose origin it no longer takes
// directly, which this node held back while it did (hearsDirectly).
func (r *Replica) memberToLoud(c *conn, o wire.OriginID) {
	st := r.origins[o]
	if st == nil || st.name == "" {
		return
	}
	if st.name == c.peerName {
		return
	}
	if es := r.memberEntries(map[string]ConnID{st.name: 0}); len(es) > 0 {
		r.checkConn(c, c.sess.V4().SendMembers(es))
	}
}

// MapGeneration is the generation of the map this node holds (0: none).
func (r *Replica) MapGeneration() uint64 { return r.cmap.cur.Generation }

// MapStatus is the cluster map's status.
func (r *Replica) MapStatus() MapStatus {
	cs := &r.cmap
	s := MapStatus{Generation: cs.cur.Generation, Publisher: cs.publisher, Document: cs.cur.Doc, Conflict: cs.conflict}
	if cs.cur.Generation == 0 {
		s.Document = []byte(`{"generation":0}`)
	} else {
		s.AppliedAt = cs.appliedAt
	}
	for _, n := range cs.cur.Nodes {
		s.Members = append(s.Members, n.Name)
	}
	slices.Sort(s.Members)
	s.MembersBelowV4 = clustermap.BelowV4(cs.cur, cs.members)
	s.Placement = cs.cur.Placement
	for t := range cs.cur.Placement {
		if cs.cur.Carries(r.id.Name, []byte(t)) {
			s.Carried = append(s.Carried, t)
		}
	}
	slices.Sort(s.Carried)
	s.Removals = r.Removals()
	s.Filling = slices.Sorted(maps.Keys(r.fills))
	for _, e := range r.memberEntries(nil) {
		s.Versions = append(s.Versions, MemberVersion{Name: e.Name, MaxVersion: e.MaxVersion, Generation: e.Generation})
	}
	return s
}

// RequireV4 is the version-4 gate of a whole-cluster feature (docs/design.md §23.3): nil
// when every member of the map is known to speak version 4, otherwise the refusal.
func (r *Replica) RequireV4() *clustermap.Error {
	return clustermap.RequireV4(r.cmap.cur, r.cmap.members)
}

// turnsOnLocks reports whether map next turns on what map prev did not: lock homes where
// prev had none, or a table prev did not fence.
func turnsOnLocks(prev, next clustermap.Map) bool {
	if len(next.LockHomes) > 0 && len(prev.LockHomes) == 0 {
		return true
	}
	for _, t := range next.FencedTables {
		if !prev.Fenced([]byte(t)) {
			return true
		}
	}
	return false
}
