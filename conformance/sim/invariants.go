package sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"plait/protocol"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/store/memstore"
	"plait/protocol/wire"
)

// The invariants (docs/design.md §9.3), checked throughout a run and at its end:
//   - per-origin apply order strictly increasing, no transaction applied twice (recordingStore);
//   - cursors never ahead of data (at every apply);
//   - held bytes within the sessions' bound (after every step);
//   - every injected gap and corruption detected (around each delivery);
//   - under version 2 only, nothing at or below a receiver's vector is re-sent: no
//     duplicate is ever received; a move away from a lost source leaves it lost;
//   - after healing, every replica sees every origin and every live peer healthy;
//   - after healing, every replica holds every origin's whole log and the same records,
//     versions included, so last-writer-wins decided the same everywhere (Converged);
//   - and those records are last-writer-wins over every write that survived (the oracle):
//     no write lost anywhere, no deleted record brought back by a log, a copy or a
//     returning node;
//   - a base copy's cursor is written with the records of its chunk, and a resumed copy
//     merges no record twice (ApplyCopy);
//   - retention never purges an entry a live hold still keeps (checkPurges);
//   - on a link, a node sends no entry to a peer it does not send to, nor one that writes
//     only tables the link excludes, and applies no operation of an excluded table from
//     an entry that came over it (links.go).
//   - in a run with fan-in hubs, every leaf write on every core node once by its conflict
//     identity, no leaf write twice in one hub's log, and no core node's state growing
//     with the leaves (hubs.go).
//   - after every delivery, the receiving session's round trip is within its link's (the
//     two directions' largest delays) and its estimate of the peer's clock offset within
//     half of that round trip of the true one, when neither clock drifts or steps
//     (checkClock): what rtt_ms and clock_offset_ms promise, from PINGs or stamps.

type invariants struct {
	failures []string
	// copies: the records each node merged in the copy it is taking, and how many of them
	// were merged again after a resume (at most about one chunk per resume is allowed).
	copied   map[string]map[string]bool
	recopied int
	copies   int // copies completed
	repaired int // records anti-entropy wrote
	// V2Only makes receiving any duplicate a failure: set when no node speaks version 1.
	v2Only bool

	// placed: the run's placed tables (placement.go's carriers, nil: none), so that a
	// node's store notes the origins whose entries of one it applied since it started.
	placed map[string]map[string]bool
	// arriving: the delivery a node is taking in over a link that excludes tables, while
	// it does (links.go).
	arriving *arrival
	// hubs: the run's hubs and leaves, which watch every format-3 entry applied (hubs.go).
	hubs *hubRun

	maxHeld    int // the most bytes a session held after an input
	injections []*injection
	detected   int // faults the receiving session detected
	covered    int // dropped entries that reached the receiver another way first
	resent     int // dropped entries sent again (a resubscription after a stall or reconnect)
}

func (v *invariants) fail(now time.Time, format string, args ...any) {
	if len(v.failures) < 20 {
		v.failures = append(v.failures, fmt.Sprintf("%.3fs: ", now.Sub(Epoch).Seconds())+fmt.Sprintf(format, args...))
	}
}

// Failures lists the invariant violations so far (at most 20).
func (c *Cluster) Failures() []string { return slices.Clone(c.inv.failures) }

// SetV2Only declares that every node speaks version 2, so no duplicate may be received.
func (c *Cluster) SetV2Only(on bool) { c.inv.v2Only = on }

func (v *invariants) injected(inj *injection) { v.injections = append(v.injections, inj) }

// unresolvedDrop reports whether an entry of origin o was dropped and not yet seen again,
// nor revealed by a later one.
func (v *invariants) unresolvedDrop(o wire.OriginID) bool {
	for _, inj := range v.injections {
		if inj.kind == Drop && !inj.resolved && inj.origin == o {
			return true
		}
	}
	return false
}

func (v *invariants) crashed(n *Node) {
	for _, e := range n.ends {
		e.drops = nil
	}
	n.Store.placedSeen = nil // what the replica learned of its origins' tables is gone
}

// move checks a source change against the routing rule's reasons.
func (v *invariants) move(c *Cluster, n *Node, m replica.Move) {
	// A connection that drops takes away the sources of the origins it carried, and no
	// other: one origin's failover never moves another.
	if m.Reason == replica.ReasonDisconnected && m.LostAt.Equal(c.now) && c.dropping != "" && m.From != c.dropping {
		v.fail(c.now, "%s: origin %s lost its source %s when the connection to %s dropped", n.Name, c.originName(m.Origin), m.From, c.dropping)
	}
	// The relay rule (docs/design.md §24.2): an origin known to write a placed table this
	// node carries is taken from the origin itself or a relay that carries the table.
	if m.To != "" && m.To != c.originName(m.Origin) && n.Store.placedSeen[m.Origin] && n.Rep != nil {
		for t, cs := range n.Rep.MapStatus().Placement { // as the node's map has it
			if slices.Contains(cs, n.Name) && !slices.Contains(cs, m.To) {
				v.fail(c.now, "%s: took origin %s, which writes table %s, from %s, which does not carry it", n.Name, c.originName(m.Origin), t, m.To)
			}
		}
	}
}

// afterStep checks a node after each of its steps.
func (v *invariants) afterStep(c *Cluster, n *Node) {
	if n.Rep == nil {
		return
	}
	if v.v2Only {
		if d := n.Rep.Counters().DuplicatesReceived; d > 0 {
			v.fail(c.now, "%s: %d duplicates received under version 2: an applied entry was sent again", n.Name, d)
			v.v2Only = false // reported once
		}
	}
}

type deliverySnapshot struct {
	sess  replica.Session
	stats protocol.Stats
	// drops this message can reveal: a later entry of the dropped entry's origin, while the
	// receiver had not applied the dropped one
	reveals []*injection
}

func (v *invariants) beforeDelivery(e *end, d delivery) deliverySnapshot {
	snap := deliverySnapshot{sess: e.node.Rep.Session(e.id)}
	if snap.sess != nil {
		snap.stats = snap.sess.Stats()
	}
	if len(e.drops) == 0 {
		return snap
	}
	// The first entry of a dropped entry's origin at or above its seq: the dropped entry
	// itself (sent again after a resubscription) or a later one, which reveals the hole.
	entries := entryFrames(d.msg)
	keep := e.drops[:0]
	for _, inj := range e.drops {
		first := uint64(0)
		for _, ef := range entries {
			if ef.txn.Origin == inj.origin && ef.txn.Seq >= inj.seq {
				first = ef.txn.Seq
				break
			}
		}
		switch applied := e.node.Rep.Origin(inj.origin).AppliedSeq; {
		case first == 0:
			keep = append(keep, inj)
		case applied >= inj.seq:
			inj.resolved = true // the node got it another way first
			v.covered++
		case first == inj.seq:
			inj.resolved = true // it came again
			v.resent++
		default:
			snap.reveals = append(snap.reveals, inj)
		}
	}
	e.drops = keep
	return snap
}

func (v *invariants) afterDelivery(c *Cluster, e *end, d delivery, snap deliverySnapshot) {
	if snap.sess == nil {
		return
	}
	v.checkClock(c, e, snap.sess)
	after := snap.sess.Stats()
	// A later entry reveals a dropped one as a gap, unless its channel is closed (stale),
	// a resend is already under way (discarded), or the later entry is itself refused
	// (a divergence: the channel closes and is resumed from the applied seq).
	noticed := after.Gaps > snap.stats.Gaps || after.Stale > snap.stats.Stale || after.Discarded > snap.stats.Discarded ||
		after.Divergences > snap.stats.Divergences
	for _, inj := range snap.reveals {
		inj.resolved = true
		if !noticed {
			v.fail(c.now, "%s: the entry %s/%d dropped on the way was not detected as a gap", e.node.Name, c.originName(inj.origin), inj.seq)
			continue
		}
		v.detected++
	}
	if inj := d.check; inj != nil {
		inj.resolved = true
		if after.Divergences > snap.stats.Divergences || after.Stale > snap.stats.Stale {
			v.detected++
		} else {
			v.fail(c.now, "%s: the corrupted entry %s/%d was not detected", e.node.Name, c.originName(inj.origin), inj.seq)
		}
	}
}

// clockSlack is what the microseconds of the wire's times may add to a measurement.
const clockSlack = 10 * time.Microsecond

// checkClock checks the measurements of the session that took a delivery on end e: its
// round trip at most the link's largest round trip (a message waits in the link for none
// before it, which left no later than it), and its estimate of the peer's clock offset
// within half that round trip of the difference of the two nodes' skews. A node whose clock
// drifts or steps in the run is left out (a sample taken across a step is wrong by the
// step until the filter forgets it), and so is a version-1 link, whose reads pause.
func (v *invariants) checkClock(c *Cluster, e *end, sess replica.Session) {
	a, b := e.node, e.peer.node
	if sess.State() != protocol.StateEstablished || sess.Handshake().Version < 2 ||
		a.Off != 0 || a.Rate != 0 || b.Off != 0 || b.Rate != 0 {
		return
	}
	l := e.pair.link
	rtt := sess.RTT()
	if bound := 2*l.MaxDelay + clockSlack; rtt > bound {
		v.fail(c.now, "%s: the round trip to %s is %v, above the link's %v (version %d)", a.Name, b.Name, rtt, 2*l.MaxDelay,
			sess.Handshake().Version)
	}
	off, ok := sess.ClockOffset()
	if !ok {
		return
	}
	if want := b.Skew - a.Skew; off < want-rtt/2-clockSlack || off > want+rtt/2+clockSlack {
		v.fail(c.now, "%s: %s's clock offset estimated %v, truly %v: beyond half the round trip %v (version %d)", a.Name, b.Name,
			off, want, rtt, sess.Handshake().Version)
	}
}

// checkPurges checks what retention purged during a node's input against the holds its
// store keeps once the input is done (docs/contract.md §16): no log is purged past a
// peer's hold that has not lapsed. The retention step that purged writes the holds it
// purged by in the same input, so the store's holds are the ones the step obeyed. A
// hold's stored since may be older than the replica's (a hold at its log's head counts as
// advancing without being written), so a hold may look lapsed here while it is not: the
// check then passes it over, and never fails a purge the replica was allowed.
func (c *Cluster) checkPurges(n *Node) {
	s := n.Store
	if len(s.purged) == 0 {
		return
	}
	purged := s.purged
	s.purged = nil
	hold := c.opts.RetainHold
	if hold == 0 {
		hold = replica.DefaultRetainHold
	}
	holds, _ := s.Holds() // the in-memory store's reads never fail
	now := n.clock(c)
	for _, p := range purged {
		for _, h := range holds {
			if h.Origin == p.Origin && p.To > h.Seq && now.Sub(h.Since) < hold {
				c.inv.fail(c.now, "%s: retention purged origin %s to %d, past %s's hold at %d (advanced %s ago, lapses at %s)",
					n.Name, c.originName(p.Origin), p.To, h.Peer, h.Seq, now.Sub(h.Since), hold)
			}
		}
	}
}

// recordingStore is a node's store, checking the apply order of every origin. It keeps
// what its last Sync made durable, for a simulated power loss.
type recordingStore struct {
	*memstore.Store
	inv     *invariants
	node    string
	origin  wire.OriginID // the node's
	last    map[wire.OriginID]uint64
	durable *memstore.Store
	now     func() time.Time
	// onChunk, when set, is called after each copied chunk is written, with the chunks of
	// the copy so far (the fault that crashes a node in the middle of a copy).
	onChunk func(node string, chunks int)
	chunks  int
	// damaged makes these records (table "/" key) unreadable with ErrRecordDamaged, as a
	// bad disk or a file edited around the store would: the fault of one entry that
	// touches them (the retry budget), not of the storage.
	damaged map[string]bool
	// full: the node's disk is full (disk.go).
	full bool
	// placedSeen: the origins an entry of a placed table was applied from since the node
	// started: the node knows they write it, so a relay that does not carry the table is
	// no source of theirs for it (move).
	placedSeen map[wire.OriginID]bool
	// purged: the logs retention purged during the node's current input (checkPurges).
	purged []store.PurgeLog
}

// Damage makes a record of the node's store unreadable (a store.DamagedRecordError from
// Get and Scan) until it is written again (Apply, Repair) or Repair is called.
func (n *Node) Damage(table, key string) {
	if n.Store.damaged == nil {
		n.Store.damaged = map[string]bool{}
	}
	n.Store.damaged[table+"/"+key] = true
}

// Repair makes a damaged record readable again.
func (n *Node) Repair(table, key string) { delete(n.Store.damaged, table+"/"+key) }

func (s *recordingStore) damagedErr(table, key []byte) error {
	if !s.damaged[string(table)+"/"+string(key)] {
		return nil
	}
	return &store.DamagedRecordError{Table: bytes.Clone(table), Key: bytes.Clone(key), Err: fmt.Errorf("sim: %s's record is damaged", s.node)}
}

// Get reads a record, or refuses a damaged one.
func (s *recordingStore) Get(table, key []byte) (store.Record, bool, error) {
	if err := s.damagedErr(table, key); err != nil {
		return store.Record{}, false, err
	}
	return s.Store.Get(table, key)
}

// Scan stops at a damaged record with its error, as the RocksDB store's does.
func (s *recordingStore) Scan(table, after []byte, fn func(store.Record) bool) error {
	var err error
	serr := s.Store.Scan(table, after, func(r store.Record) bool {
		if err = s.damagedErr(r.Table, r.Key); err != nil {
			return false
		}
		return fn(r)
	})
	if err != nil {
		return err
	}
	return serr
}

// healed forgets the damage of records written again.
func (s *recordingStore) healed(recs []store.Record) {
	for _, r := range recs {
		delete(s.damaged, string(r.Table)+"/"+string(r.Key))
	}
}

func newRecordingStore(s *memstore.Store, inv *invariants, node string, now func() time.Time) *recordingStore {
	id, _ := s.Identity() // the in-memory store's reads never fail
	r := &recordingStore{Store: s, inv: inv, node: node, origin: id.Origin, last: map[wire.OriginID]uint64{}, durable: s.Clone(), now: now}
	vec, _ := s.Vector()
	for _, e := range vec.Entries() {
		r.last[e.Origin] = e.Seq
	}
	return r
}

// copying reports whether the node is taking a base copy: its store holds a copy state.
func (s *recordingStore) copying() bool {
	st, _ := s.Store.CopyState() // the in-memory store's reads never fail
	return st != nil
}

// lostPower is the store after a power loss: what the last Sync made durable.
func (s *recordingStore) lostPower() *recordingStore {
	r := newRecordingStore(s.durable.Clone(), s.inv, s.node, s.now)
	r.onChunk, r.full = s.onChunk, s.full
	return r
}

// Apply checks that an origin's entries are applied once each, in seq order.
func (s *recordingStore) Apply(b *store.Batch) (uint64, error) {
	first := b.Seq
	if b.Skip != nil {
		first = b.Skip.From // a run of seqs, one row
	}
	if first != s.last[b.Origin]+1 {
		s.inv.fail(s.now(), "%s: origin %s applied at seq %d after %d", s.node, b.Origin, first, s.last[b.Origin])
	}
	if err := s.diskFull("apply"); err != nil {
		return 0, err
	}
	// A version under a fencing token never replaces a newer one (docs/design.md §25.4: a
	// stale holder's write loses to its successor's, whatever their clocks say).
	for _, r := range b.Records {
		if r.Token.IsZero() {
			continue
		}
		if old, ok, _ := s.Store.Get(r.Table, r.Key); ok && store.NewerVersion(old.Version(), r.Version()) {
			s.inv.fail(s.now(), "%s: %s/%q at token %v (HLC %d) replaced by the older token %v (HLC %d) of %s seq %d",
				s.node, r.Table, r.Key, old.Token, old.HLC, r.Token, r.HLC, b.Origin, b.Seq)
		}
	}
	twice := s.inv.hubs != nil && s.inv.hubs.atOrBelowMark(s, b)
	pos, err := s.Store.Apply(b)
	if err == nil {
		if twice {
			s.inv.hubs.twice[s.node]++
		}
		s.inv.appliedExcluded(s.node, b, s.now())
		if s.inv.hubs != nil {
			s.inv.hubs.applied(s, b)
		}
		s.healed(b.Records)
		for _, r := range b.Records {
			if s.inv.placed[string(r.Table)] != nil {
				if s.placedSeen == nil {
					s.placedSeen = map[wire.OriginID]bool{}
				}
				s.placedSeen[b.Origin] = true
			}
		}
		s.last[b.Origin] = b.Seq
		// The cursor never ahead of the data: it names an entry the log holds.
		// (Cursor, not a copy of the whole vector: O(1) an apply, not O(origins).)
		raw, eerr := s.Store.Entry(b.Origin, b.Seq)
		if b.Skip != nil {
			// A run: the log holds it as one, and nothing to hash (docs/design.md §24.2).
			if _, ok := errors.AsType[*store.SkippedError](eerr); ok {
				raw, eerr = nil, nil
			}
		}
		if e := s.Store.Cursor(b.Origin); eerr != nil || e.Seq != b.Seq || e.Hash != b.Hash || b.Skip == nil && sha256.Sum256(raw) != e.Hash {
			s.inv.fail(s.now(), "%s: the cursor of %s at %d is not the entry applied", s.node, b.Origin, b.Seq)
		}
	}
	return pos, err
}

// ApplyCopy checks that the copy cursor moves with its chunk's records: it names the last
// record written or one after it, never one before (a cursor behind its data; one ahead of
// it cannot be seen here, since the replica writes both at once). It counts the records
// merged again after a resume.
func (s *recordingStore) ApplyCopy(b *store.CopyBatch) error {
	inv := s.inv
	if inv.copied == nil {
		inv.copied = map[string]map[string]bool{}
	}
	seen := inv.copied[s.node]
	if seen == nil {
		seen = map[string]bool{}
		inv.copied[s.node] = seen
	}
	for _, r := range b.Records {
		if c := bytes.Compare(r.Table, b.State.Table); c > 0 || c == 0 && bytes.Compare(r.Key, b.State.Key) > 0 {
			inv.fail(s.now(), "%s: the copy cursor %s/%q is behind its chunk's record %s/%q", s.node, b.State.Table, b.State.Key, r.Table, r.Key)
			break
		}
	}
	if err := s.diskFull("copy"); err != nil {
		return err
	}
	if err := s.Store.ApplyCopy(b); err != nil {
		return err
	}
	// Merged only once written: a chunk a full disk refused is merged again after the
	// resume, for the first time.
	for _, r := range b.Records {
		k := string(r.Table) + "\x00" + string(r.Key)
		if seen[k] {
			inv.recopied++
		}
		seen[k] = true
	}
	s.chunks++
	if s.onChunk != nil {
		s.onChunk(s.node, s.chunks)
	}
	return nil
}

// Repair checks that anti-entropy never replaces a version with an older one: each
// repaired version is newer than the record's (the conflict order: a token first, then
// last-writer-wins), or the same version re-read from its log entry.
func (s *recordingStore) Repair(recs []store.Record) error {
	defer s.healed(recs)
	for _, r := range recs {
		old, ok, _ := s.Store.Get(r.Table, r.Key) // the in-memory store's reads never fail
		if s.damagedErr(r.Table, r.Key) != nil {
			continue // its version is lost: any the peers hold may take its place
		}
		if ok && store.NewerVersion(old.Version(), r.Version()) {
			s.inv.fail(s.now(), "%s: anti-entropy replaced %s/%q at version %d of %s with the older %d of %s",
				s.node, r.Table, r.Key, old.HLC, old.Origin, r.HLC, r.Origin)
		}
	}
	s.inv.repaired += len(recs)
	return s.Store.Repair(recs)
}

// EndCopy records the logs a copy raised: their next entry follows the copied position.
func (s *recordingStore) EndCopy(e *store.CopyEnd) error {
	if err := s.diskFull("copy"); err != nil {
		return err
	}
	err := s.Store.EndCopy(e)
	if err == nil {
		for _, l := range e.Logs {
			s.last[l.Origin] = l.Position.Seq
		}
		delete(s.inv.copied, s.node)
		s.inv.copies++
		s.chunks = 0
	}
	return err
}

// Converged reports whether every running node holds, of every origin, the most any
// running node holds (a crashed node's origin included), and the same entry there. It
// returns why not.
func (c *Cluster) Converged() (bool, string) {
	heads := map[wire.OriginID]vecEntry{}
	for _, name := range c.names {
		n := c.nodes[name]
		if n.Rep == nil {
			continue
		}
		vec, _ := n.Store.Vector()
		for _, e := range vec.Entries() {
			if e.Seq > heads[e.Origin].seq {
				heads[e.Origin] = vecEntry{e.Seq, e.Hash}
			}
		}
	}
	for _, name := range c.names {
		n := c.nodes[name]
		if n.Rep == nil {
			continue
		}
		vec, _ := n.Store.Vector()
		for _, o := range c.heldOrigins(name) {
			want := heads[c.nodes[o].origin]
			got := vec.Get(c.nodes[o].origin)
			if got.Seq != want.seq || got.Hash != want.hash {
				return false, fmt.Sprintf("%s holds %s at %d of %d", name, o, got.Seq, want.seq)
			}
		}
	}
	if p := c.placementPending(); p != "" {
		return false, p
	}
	if c.hubs != nil {
		if p := c.hubs.pending(); p != "" {
			return false, p
		}
	}
	if ok, why := c.linkRecordsAlike(); !ok {
		return false, why
	}
	return true, ""
}

type vecEntry struct {
	seq  uint64
	hash wire.Hash
}

// CheckConverged checks the end state: converged logs and identical records, versions
// included, on every running node, and each node's store passes store.Audit (what
// plait check runs on a data directory). It records a failure when not, and returns the records' digest.
func (c *Cluster) CheckConverged() (count int, digest string) {
	if ok, why := c.Converged(); !ok {
		c.inv.fail(c.now, "not converged: %s", why)
		return 0, ""
	}
	var first []byte
	firstName := ""
	for _, name := range c.names {
		if c.nodes[name].Rep == nil {
			continue
		}
		d, live := c.recordsDigest(c.nodes[name])
		if first == nil {
			first, count, firstName = d, live, name
			continue
		}
		if !bytes.Equal(d, first) {
			c.inv.fail(c.now, "records of %s differ from those of %s", name, firstName)
		}
	}
	// A placed table is alike on its carriers, and nowhere else (placement.go).
	placedFirst := map[string]string{}
	placed := map[string][]byte{}
	for _, name := range c.names {
		if c.nodes[name].Rep == nil {
			continue
		}
		for t, d := range c.placedDigests(c.nodes[name]) {
			if _, ok := placed[t]; !ok {
				placed[t], placedFirst[t] = d, name
			} else if !bytes.Equal(d, placed[t]) {
				c.inv.fail(c.now, "records of table %s on %s differ from those on %s", t, name, placedFirst[t])
			}
		}
	}
	for _, f := range c.placementFindings() {
		c.inv.fail(c.now, "%s", f)
	}
	c.checkOracle()
	c.checkHealthy()
	for _, name := range c.names {
		if c.nodes[name].Rep == nil {
			continue
		}
		n := c.nodes[name]
		m := n.Rep.MapStatus() // the tables it carries, as its map has them
		problems, err := store.AuditCarried(n.Store, 5, func(t []byte) bool {
			cs, placed := m.Placement[string(t)]
			return !placed || slices.Contains(cs, name)
		})
		if err != nil {
			problems = append(problems, err.Error())
		}
		for _, p := range problems {
			c.inv.fail(c.now, "%s: audit: %s", name, p)
		}
	}
	if first == nil {
		return 0, ""
	}
	return count, hex.EncodeToString(first)[:16]
}

// checkHealthy checks the health rule (docs/contract.md §8.7) at the end state: once
// converged, every running node sees every origin healthy (nothing behind, held back or
// diverged), and every peer it is connected to with fresh liveness healthy too (none
// behind its own origin).
func (c *Cluster) checkHealthy() {
	for _, name := range c.names {
		n := c.nodes[name]
		if n.Rep == nil {
			continue
		}
		st := n.Rep.Status(n.clock(c))
		for _, o := range st.Origins {
			if o.Health != replica.HealthHealthy {
				c.inv.fail(c.now, "%s: converged, but origin %s is %s: %+v", name, c.originName(o.Origin), o.Health, o)
			}
		}
		for _, p := range st.Peers {
			if p.State == replica.PeerStreaming && p.Connected && p.Health != replica.HealthHealthy && !c.ackOnItsWay(n, p.Name) {
				c.inv.fail(c.now, "%s: converged, but peer %s is %s (behind: %+v)", name, p.Name, p.Health, p.Behind)
			}
		}
	}
}

// ackOnItsWay reports whether the peer named peer has applied n's origin up to its head
// and a message from it to n is still on its way: n learns the peer's position from it. A
// peer that was behind for a while (an entry lost at the tail of n's stream, found only at
// n's next write) and caught up at the convergence's last poll is still catching-up for n
// until then (seed 99, with a lock run's clock beyond the bounds).
func (c *Cluster) ackOnItsWay(n *Node, peer string) bool {
	pn := c.nodes[peer]
	if pn == nil || pn.Rep == nil || pn.Rep.Origin(n.origin).AppliedSeq < n.Rep.Origin(n.origin).AppliedSeq {
		return false
	}
	for _, e := range n.ends {
		if e.peer != nil && e.peer.node == pn && len(e.queue) > 0 {
			return true
		}
	}
	return false
}

// heads is, per origin, the highest seq any running node applied: at the end of a run,
// once the nodes converged, the origin's surviving head.
func (c *Cluster) heads() map[wire.OriginID]uint64 {
	heads := map[wire.OriginID]uint64{}
	for _, name := range c.names {
		if n := c.nodes[name]; n.Rep != nil {
			vec, _ := n.Store.Vector()
			for _, e := range vec.Entries() {
				heads[e.Origin] = max(heads[e.Origin], e.Seq)
			}
		}
	}
	return heads
}

// checkOracle compares every running node's live records with the conflict order
// (store.NewerVersion: a token first, then last-writer-wins) over the writes that survived: those at or below their origin's converged head.
func (c *Cluster) checkOracle() {
	heads := c.heads()
	want := map[string]store.Record{}
	for o, ws := range c.writes {
		for seq, w := range ws {
			if seq > heads[o] {
				continue // lost with a power loss, and never written again
			}
			for _, op := range w.ops {
				k := string(op.Table) + "\x00" + string(op.Key)
				if old, ok := want[k]; ok && store.NewerVersion(old.Version(), store.Version{Token: w.tok, HLC: w.hlc, Origin: o}) {
					continue
				}
				want[k] = store.Record{Table: op.Table, Key: op.Key, Value: op.Value, Deleted: op.Kind == wire.OpDelete, HLC: w.hlc, Origin: o, Token: w.tok}
			}
		}
	}
	for _, name := range c.names {
		n := c.nodes[name]
		if n.Rep == nil {
			continue
		}
		live := map[string]bool{}
		tables, _ := n.Store.Tables()
		for _, t := range tables {
			_ = n.Store.Scan(t, nil, func(r store.Record) bool {
				if r.Deleted {
					return true
				}
				k := string(r.Table) + "\x00" + string(r.Key)
				live[k] = true
				switch w, ok := want[k]; {
				case !ok:
					c.inv.fail(c.now, "%s: record %s/%s was never written", name, r.Table, r.Key)
				case w.Deleted:
					c.inv.fail(c.now, "%s: record %s/%s is back after its delete (version %d of %s)", name, r.Table, r.Key, w.HLC, c.originName(w.Origin))
				case !bytes.Equal(w.Value, r.Value):
					c.inv.fail(c.now, "%s: record %s/%s holds %.12q (version %d of %s), the last write made it %.12q (version %d of %s)",
						name, r.Table, r.Key, r.Value, r.HLC, c.originName(r.Origin), w.Value, w.HLC, c.originName(w.Origin))
				case c.hubs != nil && r.Version() != w.Version():
					// A leaf write's version is the leaf's (its HLC and origin), never the
					// hub's that re-originated it (docs/design.md §27.1).
					c.inv.fail(c.now, "%s: record %s/%s holds version %d of %s, the last write's is %d of %s",
						name, r.Table, r.Key, r.HLC, c.originName(r.Origin), w.HLC, c.originName(w.Origin))
				}
				return true
			})
		}
		for k, w := range want {
			if !w.Deleted && !live[k] && c.carries(name, w.Table) {
				c.inv.fail(c.now, "%s: the write of %s/%s (version %d of %s) is lost", name, w.Table, w.Key, w.HLC, c.originName(w.Origin))
			}
		}
	}
}

// recordsDigest hashes every record with its version, and counts the live ones.
// Tombstones take part unless retention runs: each node drops its own when its rule
// allows (docs/design.md §14), so they differ while the records agree.
func (c *Cluster) recordsDigest(n *Node) ([]byte, int) {
	h := sha256.New()
	live := 0
	// The in-memory store's reads never fail: there is no error to report.
	tables, _ := n.Store.Tables()
	for _, t := range tables {
		if _, placed := c.place.carriers[string(t)]; placed {
			continue // compared among its carriers alone (placedDigests)
		}
		_ = n.Store.Scan(t, nil, func(r store.Record) bool {
			if !r.Deleted {
				live++
			} else if c.opts.RetainAge > 0 || c.opts.RetainBytes > 0 {
				return true
			}
			fmt.Fprintf(h, "%q %q %q %v %d %x\n", r.Table, r.Key, r.Value, r.Deleted, r.HLC, r.Origin)
			return true
		})
	}
	return h.Sum(nil), live
}

// FaultReport accounts for every injected fault.
type FaultReport struct {
	Injected int // faults that hit an entry
	Detected int // found by the receiving session (a gap shown by a later entry, a corrupt entry)
	Covered  int // dropped entries the receiver got another way first
	Resent   int // dropped entries sent again before a later one showed the hole (a stall, a reconnect)
	Closed   int // dropped entries whose connection closed before anything showed the hole
}

// Faults accounts for the injected faults at the end of a run: it fails any dropped entry
// still unaccounted for on a connection that is up, unless the receiver holds it by now.
func (c *Cluster) Faults() FaultReport {
	r := FaultReport{Injected: len(c.inv.injections), Detected: c.inv.detected, Covered: c.inv.covered, Resent: c.inv.resent}
	for _, inj := range c.inv.injections {
		if inj.resolved {
			continue
		}
		switch e := inj.receiver; {
		case e.closed || e.node.Rep == nil:
			r.Closed++
		case e.node.Rep.Origin(inj.origin).AppliedSeq >= inj.seq:
			r.Covered++
		default:
			c.inv.fail(c.now, "%s: the entry %s/%d dropped on an open connection is still missing", e.node.Name,
				c.originName(inj.origin), inj.seq)
		}
	}
	return r
}

// Heal raises every link, disarms faults and restarts crashed nodes, then runs until the
// cluster converges or limit passes; it reports whether it converged.
func (c *Cluster) Heal(limit time.Duration) bool {
	c.Restore()
	return c.Stabilize(limit)
}

// Restore raises every link, disarms faults and restarts crashed nodes.
func (c *Cluster) Restore() {
	c.ClearFaults()
	for _, l := range c.sortedLinks() {
		l.Up = true
	}
	for _, name := range c.names {
		if n := c.nodes[name]; n.Rep == nil && !n.failed {
			_ = c.Restart(name, n.MaxVersion) // it is down (checked above): not refused
		}
	}
	for _, l := range c.sortedLinks() {
		c.maybeDial(l)
	}
}

// Stabilize runs until the cluster converges or limit passes.
func (c *Cluster) Stabilize(limit time.Duration) bool {
	deadline := c.now.Add(limit)
	for {
		if ok, _ := c.Converged(); ok {
			return true
		}
		if !c.now.Before(deadline) {
			return false
		}
		c.Run(50 * time.Millisecond)
	}
}
