package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"plait/protocol/clustermap"
	"plait/protocol/lock"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// Locks under the simulator (docs/design.md §25): a fifth of the version-4 runs name lock
// homes and fence table c (a table of counters) in a map published on every node at the
// start, and a few clients, each on a node, read-modify-write the counters k0 to k3 under
// locks through their node: acquire, wait for the grant's fence, read, write the counter
// plus one under the token, ask the home to confirm it, and release. The run's crashes,
// partitions and faults go on meanwhile; homes crash too, and the nodes' clocks are apart
// by up to lockSkew (within the clock-offset guard's bound). A third of the lock runs put
// one node's clock beyond the bounds (drawBeyond): its rate off by more than ρ, or its
// offset past the guard's bound. The oracle checks, per key: within the bounds, the windows
// in which holders held their leases (from the grant's arrival to the holder deadline or
// the release) never overlap, and the grants' tokens rise in that order; always, every
// holder's read saw every write acknowledged before its grant, the version every node
// holds, when a holder reads and once the run heals, carries the highest token written to
// the key among the writes that node applied (no stale token beats a newer one), every
// node holds the same version once healed (the order is total), acknowledged values rise
// with their tokens (no acknowledged update lost), and every overlap a home can see (a
// write confirmed under a lease a later grant of that home had replaced) is in its
// overlaps counter (docs/design.md §25.8); once the run heals, every node's counter is at
// least the highest acknowledged value and carries a token no lower than the highest
// acknowledged write's, and, within the bounds, equals the number of acknowledged
// increments where every write made was acknowledged.

const (
	lockTable = "c"
	// lockTTL is the clients' lease, and the homes' longest (Config.Locks.MaxTTL): the
	// restart quarantine is then about 2.5 s, so that a home that crashes grants again
	// within the run.
	lockTTL = 2 * time.Second
	// lockSkew bounds how far a node's clock is from the simulation's in a lock run: two
	// nodes are at most 2·lockSkew apart, below replica.DefaultMaxClockOffset.
	lockSkew = 240 * time.Millisecond
	// lockFenceWait bounds a holder's wait for its grant's fence before it gives up.
	lockFenceWait = time.Second
)

// lockRun is a lock run's workload and what its oracle saw.
type lockRun struct {
	homes []string
	// moved, from generation moveGen on (0: never), are the homes of the later maps: half
	// the lock runs move them with a map the run publishes mid-flight (mapsAndRequests).
	moved   []string
	moveGen uint64
	clients []*lockClient
	pending map[askKey]func(replica.Answer) // lock requests started, by node, start and id
	early   map[askKey]replica.Answer       // answers that came before their id was returned
	keys    map[string]*lockKey
	end     time.Time // no cycle starts after it
	// beyond says which node's clock is beyond the bounds, and how ("" within them);
	// beyondNode is that node.
	beyond, beyondNode string
	// overlaps counts, by home and incarnation, the overlaps the oracle saw that home see.
	overlaps map[homeInc]uint64
	// Counts for the report.
	grants, acked, lost, gaveUp, homeCrashes int
	// delegated counts the grants a node's deputy made (docs/design.md §25.9), seen by the
	// rise of its count since the node's last start (deputyGranted).
	delegated     int
	deputyGranted map[string][2]uint64 // by node: its starts, and its deputy's grants then
	// viaAcked counts the writes acknowledged that were taken through a node other than
	// the holder's (lockVia), viaDelegatedAcked those of them under a delegated lease.
	viaAcked, viaDelegatedAcked int
}

type homeInc struct {
	home        string
	incarnation uint64
}

// lockKey is what the oracle saw of one counter key.
type lockKey struct {
	grants []*lockGrant  // in the order their answers arrived
	acks   []lockAck     // in the order their confirms arrived
	issued int           // tokened writes made
	writes []lockWritten // every write made, in order
	// maxAcked is the highest value acknowledged so far: a holder granted now must read at
	// least it.
	maxAcked uint64
}

// lockWritten is a write made to a counter key: its entry (Cluster.writes has its token).
type lockWritten struct {
	origin wire.OriginID
	seq    uint64
}

type lockAck struct {
	token lock.Token
	value uint64
}

// lockGrant is one lease a client held: from its grant's arrival until it stopped (its
// holder deadline, or the release it sent).
type lockGrant struct {
	node        string
	token       lock.Token
	from, until time.Time // simulation time
	ackedBefore uint64
	delegated   bool // granted by the holder node's deputy (docs/design.md §25.9)
}

// lockClient is one simulated client on a node; gen rises at every cycle, so that a late
// answer or a watchdog of an earlier one does nothing.
type lockClient struct {
	id   int
	node string
	rng  *rand.Rand
	gen  uint64
	// plain draws the cycles that first try a write without a token (lockPlainWrite), from
	// a source of its own so that the cycles' other draws stay the same.
	plain *rand.Rand
}

// drawLocks sets up a lock run, drawn from a source of its own so that the run's other
// draws, and the schedules of seeds without locks, stay the same: the homes and the map
// that names them, the clients, the nodes' clock skews, and home crashes. It publishes the
// map on every node now.
func (c *Cluster) drawLocks(rep *Report, seed uint64, names []string, end time.Time) {
	prng := rand.New(rand.NewPCG(seed, 0x6c6f636b73))
	homes := slices.Clone(names)
	prng.Shuffle(len(homes), func(i, j int) { homes[i], homes[j] = homes[j], homes[i] })
	homes = homes[:1+prng.IntN(min(3, len(homes)))]
	slices.Sort(homes)
	lr := &lockRun{homes: homes, pending: map[askKey]func(replica.Answer){}, early: map[askKey]replica.Answer{}, keys: map[string]*lockKey{}, end: end, overlaps: map[homeInc]uint64{}}
	c.locks = lr
	for _, name := range names {
		c.nodes[name].Skew = time.Duration(prng.Int64N(int64(2*lockSkew+1))) - lockSkew
	}
	// Generation 1 lists the members; generation 2 names the homes and fences c, which a
	// node takes only once it knows every member speaks version 4 (cluster-not-v4 before):
	// it is published on a drawn node every 100 ms until one takes it.
	doc := c.MapDoc(1, names)
	for _, name := range names {
		if _, err := c.PublishMap(name, doc); err != nil {
			rep.Failures = append(rep.Failures, err.Error())
			return
		}
	}
	var publish func()
	publish = func() {
		if c.maps.maxGen >= 2 {
			return
		}
		if node := names[prng.IntN(len(names))]; c.Node(node).Rep != nil && c.publishDrawn(rep, node, c.MapDoc(2, names)) {
			return
		}
		c.At(c.Now().Add(100*time.Millisecond), publish)
	}
	c.At(c.Now().Add(100*time.Millisecond), publish)
	for i := range 3 + prng.IntN(3) {
		cl := &lockClient{id: i, node: names[prng.IntN(len(names))], rng: rand.New(rand.NewPCG(seed, uint64(i))), plain: rand.New(rand.NewPCG(seed, 0x706c61696e+uint64(i)))}
		lr.clients = append(lr.clients, cl)
		c.At(c.Now().Add(time.Duration(100+prng.IntN(500))*time.Millisecond), func() { c.lockCycle(cl) })
	}
	// Homes crash: two to four times a run, a home drawn, for 300 ms to 1.5 s (shorter
	// than a lease, so that holders still hold what the restarted home forgot).
	for range 2 + prng.IntN(3) {
		h := homes[prng.IntN(len(homes))]
		at := c.Now().Add(time.Duration(1000+prng.IntN(12000)) * time.Millisecond)
		d := time.Duration(300+prng.IntN(1200)) * time.Millisecond
		c.At(at, func() {
			if c.Node(h).Rep == nil {
				return
			}
			rep.Crashes++
			lr.homeCrashes++
			_ = c.Crash(h) // running: checked
			c.At(c.Now().Add(d), func() {
				if c.Node(h).Rep == nil {
					_ = c.Restart(h, c.Node(h).MaxVersion) // down: checked
				}
			})
		})
	}
	lr.drawHomeMove(prng, names)
	c.drawBeyond(seed, names, homes, end)
}

// drawBeyond puts, in a third of the lock runs, one node's clock beyond the bounds §25.5
// assumes (drawn from a source of its own, so that the run's other draws stay the same): a
// home half the time, else any node. Half of them run at a rate off by 0.5% to 5% (5 to 50
// times ρ), the others are a further 0.6 s to 2 s off (past the clock-offset guard's
// 500 ms), from the start until the busy period ends, when the clock is put right (a step,
// as NTP makes): the healing and the end's checks run within the bounds. A home whose
// clock runs fast frees a key before its holder, on a true clock, has stopped; a holder
// whose clock runs slow writes after the home freed its key: the overlaps §25.8 says are
// counted, and the token order still decides.
func (c *Cluster) drawBeyond(seed uint64, names, homes []string, end time.Time) {
	prng := rand.New(rand.NewPCG(seed, 0x6265796f6e64))
	if prng.IntN(3) != 0 {
		return
	}
	name := names[prng.IntN(len(names))]
	if prng.IntN(2) == 0 {
		name = homes[prng.IntN(len(homes))]
	}
	n, sign := c.nodes[name], 1-2*prng.IntN(2)
	c.locks.beyondNode = name
	if prng.IntN(2) == 0 {
		c.driftNode(n, 0, float64(sign)*(0.005+0.045*prng.Float64()), end)
		c.locks.beyond = fmt.Sprintf("%s's clock runs %+.2f%% until %s", name, 100*n.Rate, end.Sub(Epoch))
	} else {
		c.driftNode(n, time.Duration(sign)*(600*time.Millisecond+time.Duration(prng.Int64N(int64(1400*time.Millisecond)))), 0, end)
		c.locks.beyond = fmt.Sprintf("%s's clock is %s further off until %s", name, n.Off, end.Sub(Epoch))
	}
	c.trace("beyond the clock bounds: %s", c.locks.beyond)
}

// drawHomeMove draws, for half the lock runs, other homes (one to three members, not all
// the same as before) that the maps of generation 3 or 4 and later name: mapsAndRequests
// publishes one to four generations from 3 on, under the run's faults, so the homes move
// mid-run (the new homes' move quarantine, the old homes' leases running on).
func (lr *lockRun) drawHomeMove(prng *rand.Rand, names []string) {
	if prng.IntN(2) == 0 || !movingHomes {
		return
	}
	moved := slices.Clone(names)
	prng.Shuffle(len(moved), func(i, j int) { moved[i], moved[j] = moved[j], moved[i] })
	moved = moved[:1+prng.IntN(min(3, len(moved)))]
	slices.Sort(moved)
	if slices.Equal(moved, lr.homes) {
		return
	}
	lr.moved, lr.moveGen = moved, uint64(3+prng.IntN(2))
}

// movingHomes turns on the lock runs whose later maps move the homes: a key's new home
// grants it only after its move quarantine and once it has applied its previous home's
// floor (docs/design.md §25.2; seed 284 lost an acknowledged update before the floor).
const movingHomes = true

// lockDoc is the lock members of a lock run's maps of generation gen ("" in other runs,
// and for generation 1): every later generation fences c (a fenced table stays fenced) and
// names the run's homes, or, from moveGen on, the homes they moved to.
func (c *Cluster) lockDoc(gen uint64) string {
	if c.locks == nil || gen < 2 {
		return ""
	}
	homes := c.locks.homes
	if c.locks.moveGen > 0 && gen >= c.locks.moveGen {
		homes = c.locks.moved
	}
	return fmt.Sprintf(`,"lock_homes":["%s"],"fenced_tables":[%q]`, strings.Join(homes, `","`), lockTable)
}

// lockAsk starts a lock request on a running node, and calls done with its answer.
func (c *Cluster) lockAsk(n *Node, op replica.LockOp, done func(replica.Answer)) {
	lr := c.locks
	var id replica.RequestID
	err := c.callErr(n, func(r *replica.Replica) error {
		var err error
		id, err = r.Lock(n.clock(c), "write", op)
		return err
	})
	if err != nil || id == 0 {
		done(replica.Answer{Code: wire.CodeInternal, Message: fmt.Sprint(err)})
		return
	}
	k := askKey{n.Name, n.starts, id}
	if a, ok := lr.early[k]; ok {
		delete(lr.early, k)
		done(a)
		return
	}
	lr.pending[k] = done
}

// lockAnswer takes an answer to a lock request (observeMap hands over every answer that is
// not a map request's).
func (c *Cluster) lockAnswer(n *Node, a replica.Answer) {
	lr := c.locks
	k := askKey{n.Name, n.starts, a.ID}
	if done, ok := lr.pending[k]; ok {
		delete(lr.pending, k)
		done(a)
		return
	}
	if _, ok := lr.early[k]; ok {
		c.inv.fail(c.now, "%s: lock request %d answered twice (%q after another)", n.Name, a.ID, a.Code)
	}
	lr.early[k] = a
}

// lockCycle starts one cycle of a client: acquire a drawn key, read, write, confirm,
// release; a watchdog starts the next cycle if this one is stuck (its node crashed under
// it, and its answers with it).
func (c *Cluster) lockCycle(cl *lockClient) {
	lr := c.locks
	cl.gen++
	g := cl.gen
	if !c.now.Before(lr.end) {
		return
	}
	n := c.nodes[cl.node]
	again := func(d time.Duration) {
		c.At(c.now.Add(d), func() {
			if cl.gen == g {
				c.lockCycle(cl)
			}
		})
	}
	if n.Rep == nil {
		again(200 * time.Millisecond)
		return
	}
	starts := n.starts
	var watch func()
	watch = func() {
		if cl.gen != g {
			return
		}
		if c.nodes[cl.node].starts != starts {
			c.lockCycle(cl)
			return
		}
		c.At(c.now.Add(time.Second), watch)
	}
	c.At(c.now.Add(time.Second), watch)
	key := "k" + strconv.Itoa(max(0, cl.rng.IntN(6)-2)) // k0 half the time: contended

	if lr.keys[key] == nil {
		lr.keys[key] = &lockKey{}
	}
	if cl.plain.IntN(4) == 0 {
		c.lockPlainWrite(n, key)
	}
	c.lockAsk(n, replica.LockOp{Kind: replica.KindLockAcquire, Table: lockTable, Key: []byte(key), TTL: lockTTL,
		Wait: 1500 * time.Millisecond, Holder: "client" + strconv.Itoa(cl.id)}, func(a replica.Answer) {
		if cl.gen != g {
			return
		}
		res, err := replica.ParseLockReply(a.Body)
		if a.Code != "" || err != nil {
			again(max(res.RetryAfter, 20*time.Millisecond) + time.Duration(cl.rng.IntN(50))*time.Millisecond)
			return
		}
		c.lockGranted(cl, g, starts, key, res)
	})
}

// lockGranted follows a grant: the holder waits for its fence on its node, then reads.
func (c *Cluster) lockGranted(cl *lockClient, g uint64, starts int, key string, res replica.LockResult) {
	lr, kl, n := c.locks, c.locks.keys[key], c.nodes[cl.node]
	h, ok := n.Rep.HeldLease(n.clock(c), res.Token)
	if !ok {
		c.lockRelease(cl, g, starts, key, res.Token, nil)
		return
	}
	lr.grants++
	delegated := false
	if g := n.Rep.LockStatus().Deputy.Granted; g > 0 {
		seen := lr.deputyGranted[cl.node]
		if seen[0] != uint64(n.starts) {
			seen = [2]uint64{uint64(n.starts), 0}
		}
		if g > seen[1] {
			lr.delegated++
			delegated = true
		}
		if lr.deputyGranted == nil {
			lr.deputyGranted = map[string][2]uint64{}
		}
		lr.deputyGranted[cl.node] = [2]uint64{uint64(n.starts), g}
	}
	gr := &lockGrant{node: cl.node, token: res.Token, from: c.now, until: n.simTime(c.now, h.Deadline), ackedBefore: kl.maxAcked, delegated: delegated}
	kl.grants = append(kl.grants, gr)
	since := c.now
	var wait func()
	wait = func() {
		if cl.gen != g || n.Rep == nil || n.starts != starts {
			return // the watchdog starts the next cycle
		}
		if _, ok := n.Rep.HeldLease(n.clock(c), res.Token); !ok {
			lr.gaveUp++
			c.lockRelease(cl, g, starts, key, res.Token, gr)
			return
		}
		for _, p := range h.Fence {
			if n.Rep.Origin(p.Origin).AppliedSeq < p.Seq {
				if c.now.Sub(since) > lockFenceWait {
					lr.gaveUp++
					c.lockRelease(cl, g, starts, key, res.Token, gr)
					return
				}
				c.At(c.now.Add(10*time.Millisecond), wait)
				return
			}
		}
		c.lockWrite(cl, g, starts, key, gr, h)
	}
	wait()
}

// lockWrite reads the counter on the holder's node, writes it plus one under the token
// (now, or, one time in three, just before the holder deadline, as a holder that paused
// does), on its node or, one time in three, through another (lockVia), and asks the home
// to confirm it there.
func (c *Cluster) lockWrite(cl *lockClient, g uint64, starts int, key string, gr *lockGrant, h replica.HeldLease) {
	lr, n := c.locks, c.nodes[cl.node]
	val, err := c.lockRead(n, key)
	if err != nil {
		c.inv.fail(c.now, "%s: reading %s/%s: %v", n.Name, lockTable, key, err)
		c.lockRelease(cl, g, starts, key, gr.token, gr)
		return
	}
	c.checkLockToken(n, key)
	if val < gr.ackedBefore {
		c.inv.fail(c.now, "%s: the holder of %s/%s granted at %s read %d after the fence, but %d was acknowledged before its grant",
			n.Name, lockTable, key, gr.from.Sub(Epoch), val, gr.ackedBefore)
	}
	write := func() {
		if cl.gen != g || n.Rep == nil || n.starts != starts {
			return
		}
		// One write in three is taken through another node, as a client of the API may
		// write through any node: that node checks the lease with the home (which, for a
		// delegated lease, asks the delegate), writes, and asks the confirm itself.
		if w := c.lockVia(cl, n); w != nil {
			wStarts := w.starts
			c.lockAsk(w, replica.LockOp{Kind: replica.KindLockCheck, Table: lockTable, Key: []byte(key), Token: gr.token}, func(a replica.Answer) {
				if cl.gen != g || n.Rep == nil || n.starts != starts {
					return
				}
				if a.Code != "" {
					lr.gaveUp++
					c.lockRelease(cl, g, starts, key, gr.token, gr)
					return
				}
				c.lockWriteOn(cl, g, starts, key, gr, val, w, wStarts)
			})
			return
		}
		c.lockWriteOn(cl, g, starts, key, gr, val, n, starts)
	}
	if cl.rng.IntN(3) == 0 {
		if late := n.simTime(c.now, h.Deadline).Add(-time.Duration(1+cl.rng.IntN(5)) * time.Millisecond); late.After(c.now) {
			c.At(late, write)
			return
		}
	}
	write()
}

// lockVia draws, one time in three, a running node other than the holder's n to write
// through (nil: write on n). The node whose clock is beyond the bounds is not drawn: its
// own clients' writes already carry its clock, and a write of another client through it
// late in the busy period leaves its peers' status of it stuck clock-ahead at the end's
// checks (seed 9049 when it is drawn), which is the clock guard's matter, not the locks'.
func (c *Cluster) lockVia(cl *lockClient, n *Node) *Node {
	if cl.rng.IntN(3) != 0 {
		return nil
	}
	w := c.nodes[c.names[cl.rng.IntN(len(c.names))]]
	if w == n || w.Rep == nil || w.Name == c.locks.beyondNode {
		return nil
	}
	return w
}

// lockWriteOn writes the counter val plus one under gr's token on w (the holder's node, or
// another one, started wStarts times), while the holder's deadline has not passed, and
// asks w to confirm it.
func (c *Cluster) lockWriteOn(cl *lockClient, g uint64, starts int, key string, gr *lockGrant, val uint64, w *Node, wStarts int) {
	lr, kl, n := c.locks, c.locks.keys[key], c.nodes[cl.node]
	if cl.gen != g || n.Rep == nil || n.starts != starts || w.Rep == nil || w.starts != wStarts {
		return // the watchdog starts the next cycle
	}
	if _, ok := n.Rep.HeldLease(n.clock(c), gr.token); !ok {
		lr.gaveUp++
		c.lockRelease(cl, g, starts, key, gr.token, gr)
		return
	}
	ops := []wire.Op{{Kind: wire.OpPut, Table: []byte(lockTable), Key: []byte(key), Value: []byte(strconv.FormatUint(val+1, 10) + "@" + gr.token.String())}}
	var seq uint64
	err := c.callErr(w, func(r *replica.Replica) error {
		var err error
		seq, err = r.WriteTokened(w.clock(c), replica.WireToken(gr.token), ops)
		return err
	})
	if err != nil || seq == 0 {
		c.lockRelease(cl, g, starts, key, gr.token, gr)
		return
	}
	c.noteWrite(w, seq, ops)
	kl.issued++
	kl.writes = append(kl.writes, lockWritten{origin: w.origin, seq: seq})
	wrote := c.now
	c.lockDurable(cl, g, w, wStarts, seq, func() { c.lockConfirm(cl, g, starts, key, gr, w, val, seq, wrote) })
}

// lockDurable calls then once n's write of seq is durable: at once, or, on nodes that hold
// what they did not sync (Options.SyncDelay), once n synced it. The API answers a write
// under a lock only then (node.WriteTokened, --sync origin), and its client asks the
// confirm after: a write acknowledged before would be lost with the writer's power, and,
// written on the home, confirmed by it at once.
func (c *Cluster) lockDurable(cl *lockClient, g uint64, n *Node, starts int, seq uint64, then func()) {
	if cl.gen != g || n.Rep == nil || n.starts != starts {
		return // the watchdog starts the next cycle
	}
	if c.opts.SyncDelay > 0 && n.Rep.SyncedSeq() < seq {
		c.At(c.now.Add(time.Millisecond), func() { c.lockDurable(cl, g, n, starts, seq, then) })
		return
	}
	then()
}

// lockConfirm asks the home to confirm the holder's write of val under its token (seq of
// n's origin, made at wrote), and releases once answered.
func (c *Cluster) lockConfirm(cl *lockClient, g uint64, starts int, key string, gr *lockGrant, n *Node, val, seq uint64, wrote time.Time) {
	lr, kl := c.locks, c.locks.keys[key]
	c.lockAsk(n, replica.LockOp{Kind: replica.KindLockConfirm, Table: lockTable, Key: []byte(key), Token: gr.token, Origin: n.origin, Seq: seq}, func(a replica.Answer) {
		if a.Code == wire.Code(lock.CodeLost) {
			c.lockOverlap(key, gr.token, wrote)
		}
		if a.Code == "" {
			lr.acked++
			if n.Name != cl.node {
				lr.viaAcked++
				if gr.delegated {
					lr.viaDelegatedAcked++
				}
			}
			kl.acks = append(kl.acks, lockAck{token: gr.token, value: val + 1})
			kl.maxAcked = max(kl.maxAcked, val+1)
		} else {
			lr.lost++
		}
		if cl.gen == g {
			c.lockRelease(cl, g, starts, key, gr.token, gr)
		}
	})
}

// lockRead is the counter on a node (0 when it has none). A write makes it the count and
// the writer's token ("N@TOKEN"), so that two writes of one count differ and the end's
// check of every record against the conflict order (checkOracle) tells which one won.
func (c *Cluster) lockRead(n *Node, key string) (uint64, error) {
	rec, found, err := n.Store.Get([]byte(lockTable), []byte(key))
	if err != nil || !found || rec.Deleted {
		return 0, err
	}
	count, _, _ := strings.Cut(string(rec.Value), "@")
	return strconv.ParseUint(count, 10, 64)
}

// lockRelease ends a holder's window now and releases its lease, then starts the client's
// next cycle after a pause.
func (c *Cluster) lockRelease(cl *lockClient, g uint64, starts int, key string, tok lock.Token, gr *lockGrant) {
	if gr != nil && c.now.Before(gr.until) {
		gr.until = c.now
	}
	next := func() {
		c.At(c.now.Add(time.Duration(20+cl.rng.IntN(200))*time.Millisecond), func() {
			if cl.gen == g {
				c.lockCycle(cl)
			}
		})
	}
	n := c.nodes[cl.node]
	if n.Rep == nil || n.starts != starts {
		return // the watchdog starts the next cycle
	}
	c.lockAsk(n, replica.LockOp{Kind: replica.KindLockRelease, Table: lockTable, Key: []byte(key), Token: tok}, func(replica.Answer) {
		if cl.gen == g {
			next()
		}
	})
}

// checkLocks is the end of a lock run's checks, every node up and the records converged.
func (c *Cluster) checkLocks(rep *Report) {
	lr := c.locks
	if lr == nil {
		return
	}
	rep.LockGrants, rep.LockAcked, rep.LockLost, rep.LockHomeCrashes = lr.grants, lr.acked, lr.lost, lr.homeCrashes
	rep.LockDelegated, rep.LockVia, rep.LockViaDelegated = lr.delegated, lr.viaAcked, lr.viaDelegatedAcked
	if lr.beyond != "" {
		rep.LockBeyond = 1
	}
	for _, n := range lr.overlaps {
		rep.LockOverlaps += int(n)
	}
	keys := make([]string, 0, len(lr.keys))
	for k := range lr.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		kl := lr.keys[key]
		for i := 1; i < len(kl.grants) && lr.beyond == ""; i++ { // exclusion: within the bounds
			a, b := kl.grants[i-1], kl.grants[i]
			if lock.Compare(b.token, a.token) <= 0 {
				c.inv.fail(c.now, "%s/%s: the grant that arrived at %s on %s has token %s, not above the one before it (%s on %s: %s)",
					lockTable, key, b.from.Sub(Epoch), b.node, b.token, a.from.Sub(Epoch), a.node, a.token)
			}
			if b.from.Before(a.until) {
				c.inv.fail(c.now, "%s/%s: two holders at once: %s held it from %s to %s, %s from %s",
					lockTable, key, a.node, a.from.Sub(Epoch), a.until.Sub(Epoch), b.node, b.from.Sub(Epoch))
			}
		}
		acks := slices.Clone(kl.acks)
		slices.SortFunc(acks, func(x, y lockAck) int { return lock.Compare(x.token, y.token) })
		var top lockAck
		var first *Node // the first running node: every other holds its version (the order is total)
		for i, a := range acks {
			if i > 0 && a.value <= acks[i-1].value {
				c.inv.fail(c.now, "%s/%s: an acknowledged update was lost: the write of %d under %s was acknowledged, and so was %d under the earlier %s",
					lockTable, key, a.value, a.token, acks[i-1].value, acks[i-1].token)
			}
			top = a
		}
		for _, name := range c.names {
			n := c.nodes[name]
			if n.Rep == nil {
				continue
			}
			rec, found, err := n.Store.Get([]byte(lockTable), []byte(key))
			val, perr := c.lockRead(n, key)
			c.checkLockToken(n, key)
			if first == nil {
				first = n
			} else if frec, ffound, ferr := first.Store.Get([]byte(lockTable), []byte(key)); err == nil && ferr == nil &&
				(found != ffound || found && (rec.Version() != frec.Version() || string(rec.Value) != string(frec.Value))) {
				c.inv.fail(c.now, "%s/%s: %s holds %q (version %v), %s holds %q (version %v): healed, the nodes disagree",
					lockTable, key, first.Name, frec.Value, frec.Version(), name, rec.Value, rec.Version())
			}
			switch {
			case err != nil || perr != nil:
				c.inv.fail(c.now, "%s: reading %s/%s: %v %v", name, lockTable, key, err, perr)
			case val < top.value:
				c.inv.fail(c.now, "%s: %s/%s is %d, below its acknowledged %d", name, lockTable, key, val, top.value)
			case len(acks) > 0 && (!found || replica.WireToken(top.token).Compare(rec.Token) > 0):
				c.inv.fail(c.now, "%s: %s/%s holds a version of token %v, below its highest acknowledged write's (%s)", name, lockTable, key, rec.Token, top.token)
			case lr.beyond == "" && kl.issued == len(acks) && val != uint64(len(acks)):
				c.inv.fail(c.now, "%s: %s/%s is %d, and every one of its %d writes was acknowledged", name, lockTable, key, val, len(acks))
			}
		}
	}
}

// checkLockToken checks that the version of c/key node n holds carries the highest token
// among the writes to the key that n applied (docs/design.md §25.4, §25.8): no stale token
// beats a newer one there, whatever the clocks did. A node restored from a backup and not
// reseeded issues seqs the oracle holds other writes for: it is not judged.
func (c *Cluster) checkLockToken(n *Node, key string) {
	kl := c.locks.keys[key]
	if kl == nil || n.Rep == nil || n.restored {
		return
	}
	var top wire.Token
	for _, w := range kl.writes {
		wr, ok := c.writes[w.origin][w.seq]
		if !ok || len(wr.ops) != 1 || string(wr.ops[0].Table) != lockTable || string(wr.ops[0].Key) != key {
			continue // lost with a power loss, its seq reissued
		}
		if n.Rep.Origin(w.origin).AppliedSeq >= w.seq && wr.tok.Compare(top) > 0 {
			top = wr.tok
		}
	}
	rec, _, err := n.Store.Get([]byte(lockTable), []byte(key))
	if err == nil && rec.Token.Compare(top) != 0 {
		c.inv.fail(c.now, "%s: %s/%s holds a version of token %s (%.20q), and this node applied a write of it under token %s",
			n.Name, lockTable, key, lock.Token(rec.Token), rec.Value, lock.Token(top))
	}
}

// lockOverlap takes a confirm of key's write under tok, made at wrote, that its home
// answered lock-lost. If a grant of a higher token of that home's same incarnation had
// reached its holder before the write was made, the home had freed tok's lease (it holds
// one lease of a key) before it answered: an overlap it can see, which it must have counted
// (docs/design.md §25.8). Only while the home is still that incarnation (its counters are
// since its table was made) and the homes never move (another home may have answered).
func (c *Cluster) lockOverlap(key string, tok lock.Token, wrote time.Time) {
	lr := c.locks
	if lr.moveGen != 0 {
		return
	}
	var home *Node
	for _, name := range c.names {
		if c.nodes[name].origin == tok.Home {
			home = c.nodes[name]
		}
	}
	if home == nil || home.Rep == nil {
		return
	}
	st := home.Rep.LockStatus()
	if !st.Home || st.Incarnation != tok.Incarnation {
		return
	}
	var later *lockGrant
	for _, g := range lr.keys[key].grants {
		if g.token.Home == tok.Home && g.token.Incarnation == tok.Incarnation && lock.Compare(g.token, tok) > 0 && g.from.Before(wrote) {
			later = g
			break
		}
	}
	if later == nil {
		return
	}
	hi := homeInc{home.Name, tok.Incarnation}
	lr.overlaps[hi]++
	if st.Table.Overlaps < lr.overlaps[hi] {
		c.inv.fail(c.now, "%s/%s: the write under %s was made at %s, after the grant under %s reached %s at %s; its home %s answered lock-lost, and counts %d overlaps where %d were seen",
			lockTable, key, tok, wrote.Sub(Epoch), later.token, later.node, later.from.Sub(Epoch), home.Name, st.Table.Overlaps, lr.overlaps[hi])
	}
}

// lockPlainWrite tries a write without a token of c/key on n, as a client that forgot the
// lock would: once n's map fences c, it must be refused lock-required and change nothing
// (docs/design.md §25.6). Taken, it would order below every token (§25.4): lost in silence
// where the key was written under a lock, and read by the next holder where it was not.
func (c *Cluster) lockPlainWrite(n *Node, key string) {
	var m struct {
		Fenced []string `json:"fenced_tables"`
	}
	if n.Rep == nil || json.Unmarshal(n.Rep.MapStatus().Document, &m) != nil || !slices.Contains(m.Fenced, lockTable) {
		return // not fenced here yet: the write would be taken, below every token
	}
	ops := []wire.Op{{Kind: wire.OpPut, Table: []byte(lockTable), Key: []byte(key), Value: []byte("1000000@plain")}}
	var seq uint64
	err := c.callErr(n, func(r *replica.Replica) error {
		var err error
		seq, err = r.Write(n.clock(c), ops)
		return err
	})
	var ce *clustermap.Error
	switch {
	case seq > 0:
		c.noteWrite(n, seq, ops)
		c.locks.keys[key].writes = append(c.locks.keys[key].writes, lockWritten{origin: n.origin, seq: seq})
		c.inv.fail(c.now, "%s: a write of %s/%s without a token was taken (seq %d), and its map fences %s", n.Name, lockTable, key, seq, lockTable)
	case err != nil && !errors.As(err, &ce):
		// refused for something of the node's own first (its storage): not judged
	case ce != nil && ce.Code != clustermap.CodeLockRequired:
		c.inv.fail(c.now, "%s: a write of %s/%s without a token was refused %s, not lock-required", n.Name, lockTable, key, ce.Code)
	}
}
