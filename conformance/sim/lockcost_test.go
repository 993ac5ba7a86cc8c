package sim

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"plait/protocol/lock"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// TestLockCost measures what a lock costs (docs/design.md §25, BENCHMARKS.md §16): the
// frames on every link, by type, from a client's lock request until the answer to its
// release, and the virtual latency of the acquire (request to grant) and of the whole
// cycle (acquire, read, a write under the token, its confirm, release), on full meshes of
// 3, 5 and 12 nodes whose links take 1 ms each way, with one lock home (A). The cases: one
// client on a node other than the home, the same on the home, and four clients on nodes
// other than the home (four nodes; two each of two at 3 nodes), all on one key; and the
// first and the last again with delegation on (§25.9), its delegations long enough (60 s)
// to outlast the measure. This build has no release entry: a release is a lock-release
// request to the home (§25.7). Without delegation a repeat acquire costs what a first does;
// with it, the one client's acquires after its first (which is not measured) are its
// deputy's, with no frame, and four clients on one key make the home recall the key at
// nearly every acquire. It prints the table with
// -v and asserts no timing: only that every cycle was granted and confirmed, the counter
// holds every increment, and the one client's delegated cycles sent no frame.
//
//	go test ./conformance/sim -run TestLockCost -v
func TestLockCost(t *testing.T) {
	var rows []string
	for _, n := range []int{3, 5, 12} {
		four := []int{1, 1 + 1%(n-1), 1 + 2%(n-1), 1 + 3%(n-1)}
		for _, cs := range []struct {
			name     string
			clients  []int // the clients' nodes, by index (0 is the home)
			delegate bool
		}{
			{"1 client, remote home", []int{1}, false},
			{"1 client on the home", []int{0}, false},
			{"4 clients, one key", four, false},
			{"1 client, remote home, delegated", []int{1}, true},
			{"4 clients, one key, delegated", four, true},
		} {
			m := measureLocks(t, n, cs.clients, cs.delegate)
			if cs.delegate && len(cs.clients) == 1 && m.frames != 0 {
				// Every measured cycle is a repeat on the node that holds the delegation:
				// its acquire, confirm and release are its deputy's (docs/design.md §25.9).
				t.Errorf("%d nodes, %s: %.1f frames per cycle, want none", n, cs.name, m.frames)
			}
			rows = append(rows, fmt.Sprintf("| %d | %s | %.1f (%.1f) | %.1f | %s | %.1f | %.1f / %.1f | %.1f / %.1f |",
				n, cs.name, m.frames, m.messages, m.quiet, m.byType, m.background, m.acquire.p(50), m.acquire.p(99), m.cycle.p(50), m.cycle.p(99)))
		}
	}
	t.Log("\n| nodes | case | frames (messages) per acquire, request to release answered | frames until quiet | of them, by type | background meanwhile | acquire p50 / p99 (ms) | cycle p50 / p99 (ms) |\n|---|---|---|---|---|---|---|---|\n" +
		strings.Join(rows, "\n"))
}

type lockCost struct {
	// per acquire: frames and messages in the window (the request to the release's
	// answer), and until the cluster is quiet again; both without the background that
	// runs whatever happens (background: PING and PONG on an idle link, anti-entropy's
	// RANGEDIGEST and RANGERECORDS)
	frames, messages, quiet, background float64
	byType                              string // the frames until quiet, by type
	acquire, cycle                      durations
}

type durations []time.Duration

// p is the q-th percentile in milliseconds (nearest rank).
func (d durations) p(q int) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := max(0, (q*len(s)+99)/100-1)
	return float64(s[i]) / float64(time.Millisecond)
}

// measureLocks runs cycles of clients on the named nodes of an n-node mesh, all on key
// k0 of fenced table c, home A: one warm-up cycle each, then 40 measured cycles each. With
// one client, frames are counted in each cycle's window (request to release answered) and
// the cycles are 100 ms apart; with several, over the whole measured period (their windows
// overlap), divided by the acquires.
func measureLocks(t *testing.T, n int, clients []int, delegate bool) lockCost {
	t.Helper()
	const cycles = 40
	locks := lock.Config{MaxTTL: lockTTL}
	if delegate {
		locks.MaxDelegations, locks.DelegationBlock, locks.MaxDelegationTTL = 64, 1024, time.Minute
	}
	c := New(Options{Seed: 1, MinDelay: time.Millisecond, MaxDelay: time.Millisecond, Config: replica.Config{Locks: locks}})
	names := make([]string, n)
	for i := range names {
		names[i] = string(rune('A' + i))
		if err := c.AddNode(names[i], 0); err != nil {
			t.Fatal(err)
		}
	}
	c.SetV2Only(true)
	for i, a := range names {
		for _, b := range names[i+1:] {
			if err := c.Connect(a, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.locks = &lockRun{homes: []string{"A"}, pending: map[askKey]func(replica.Answer){}, early: map[askKey]replica.Answer{}, keys: map[string]*lockKey{}, overlaps: map[homeInc]uint64{}}
	for _, name := range names {
		if _, err := c.PublishMap(name, c.MapDoc(1, names)); err != nil {
			t.Fatal(err)
		}
	}
	c.Run(time.Second)
	if _, err := c.PublishMap("A", c.MapDoc(2, names)); err != nil {
		t.Fatal(err)
	}
	// The home's table is made as it adopts the map, in its restart quarantine (the
	// longest lease plus the bounds): the measure starts after it.
	c.Run(lockTTL + 2*time.Second)
	for _, name := range names {
		if g := c.Node(name).Rep.MapGeneration(); g != 2 {
			t.Fatalf("%s holds map generation %d, want 2", name, g)
		}
	}
	var m lockCost
	window, quiet := map[string]int{}, map[string]int{}
	messages, acquires, done := 0, 0, 0
	add := func(to map[string]int) {
		for k, v := range c.frames {
			to[k] += v
		}
	}
	var err error
	measured := false
	var cycle func(node string, left int)
	cycle = func(node string, left int) {
		if left == 0 {
			done++
			return
		}
		counted := len(clients) == 1 && measured
		if counted {
			if c.frames != nil {
				add(quiet) // the previous cycle's, until now
			}
			c.frames, c.messages = map[string]int{}, 0
		}
		start := c.now
		err = c.lockOnce(node, func(granted time.Time) {
			if measured {
				acquires++
				m.acquire = append(m.acquire, granted.Sub(start))
			}
		}, func(e error) {
			if e != nil {
				err = e
				return
			}
			if measured {
				m.cycle = append(m.cycle, c.now.Sub(start))
			}
			if counted {
				messages += c.messages
				add(window)
			}
			pause := time.Millisecond
			if len(clients) == 1 {
				pause = 100 * time.Millisecond
			}
			c.At(c.now.Add(pause), func() { cycle(node, left-1) })
		})
	}
	run := func(count int) {
		done = 0
		for _, i := range clients {
			cycle(names[i], count)
		}
		for deadline := c.now.Add(time.Minute); done < len(clients) && err == nil && c.now.Before(deadline); {
			c.Run(10 * time.Millisecond)
		}
		if err != nil || done < len(clients) {
			t.Fatalf("%d nodes, clients on %v: %d of them done: %v", n, clients, done, err)
		}
	}
	run(1) // each client's first acquire, not measured
	measured = true
	if len(clients) > 1 {
		c.frames, c.messages = map[string]int{}, 0
	}
	run(cycles)
	if len(clients) > 1 {
		messages = c.messages
		add(window)
	}
	c.Run(90 * time.Millisecond) // the last cycle's frames after its window
	add(quiet)
	c.frames = nil
	if f := c.Failures(); len(f) > 0 {
		t.Fatal(f)
	}
	if v, rerr := c.lockRead(c.Node("A"), "k0"); rerr != nil || v != uint64((cycles+1)*len(clients)) {
		t.Fatalf("%d nodes, clients on %v: the home's counter is %d (%v), want %d", n, clients, v, rerr, (cycles+1)*len(clients))
	}
	per := func(v int) float64 { return float64(v) / float64(acquires) }
	background := func(k string) bool { return k == "PING" || k == "PONG" || k == "RANGEDIGEST" || k == "RANGERECORDS" }
	sum := 0
	for k, v := range window {
		if !background(k) {
			sum += v
		}
	}
	m.frames, m.messages = per(sum), per(messages)
	sum = 0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(quiet)) {
		if background(k) {
			m.background += per(quiet[k])
			continue
		}
		sum += quiet[k]
		parts = append(parts, k+" "+strconv.FormatFloat(per(quiet[k]), 'f', 1, 64))
	}
	m.quiet, m.byType = per(sum), strings.Join(parts, ", ")
	return m
}

// lockOnce runs one cycle on node: acquire k0 (waiting up to 1.5 s), wait for the fence,
// read, write the counter plus one under the token, confirm, release. granted is called
// when the grant arrives, done when the release is answered (or with why the cycle failed).
func (c *Cluster) lockOnce(node string, granted func(time.Time), done func(error)) error {
	n := c.nodes[node]
	key := "k0"
	holder := fmt.Sprintf("cost-%s-%d", node, c.seq)
	c.lockAsk(n, replica.LockOp{Kind: replica.KindLockAcquire, Table: lockTable, Key: []byte(key), TTL: lockTTL, Wait: 1500 * time.Millisecond, Holder: holder}, func(a replica.Answer) {
		res, perr := replica.ParseLockReply(a.Body)
		if a.Code != "" || perr != nil {
			done(fmt.Errorf("%s: acquire answered %q %s (%v)", node, a.Code, a.Message, perr))
			return
		}
		granted(c.now)
		h, ok := n.Rep.HeldLease(n.clock(c), res.Token)
		if !ok {
			done(fmt.Errorf("%s: the grant is not held", node))
			return
		}
		var write func()
		write = func() {
			for _, p := range h.Fence {
				if n.Rep.Origin(p.Origin).AppliedSeq < p.Seq {
					c.At(c.now.Add(time.Millisecond), write)
					return
				}
			}
			val, err := c.lockRead(n, key)
			if err != nil {
				done(err)
				return
			}
			ops := []wire.Op{{Kind: wire.OpPut, Table: []byte(lockTable), Key: []byte(key), Value: []byte(strconv.FormatUint(val+1, 10) + "@" + res.Token.String())}}
			var seq uint64
			if err := c.callErr(n, func(r *replica.Replica) error {
				var err error
				seq, err = r.WriteTokened(n.clock(c), replica.WireToken(res.Token), ops)
				return err
			}); err != nil {
				done(err)
				return
			}
			c.noteWrite(n, seq, ops)
			c.lockAsk(n, replica.LockOp{Kind: replica.KindLockConfirm, Table: lockTable, Key: []byte(key), Token: res.Token, Origin: n.origin, Seq: seq}, func(a replica.Answer) {
				if a.Code != "" {
					done(fmt.Errorf("%s: confirm answered %q %s", node, a.Code, a.Message))
					return
				}
				c.lockAsk(n, replica.LockOp{Kind: replica.KindLockRelease, Table: lockTable, Key: []byte(key), Token: res.Token}, func(a replica.Answer) {
					if a.Code != "" {
						done(fmt.Errorf("%s: release answered %q %s", node, a.Code, a.Message))
						return
					}
					done(nil)
				})
			})
		}
		write()
	})
	return nil
}
