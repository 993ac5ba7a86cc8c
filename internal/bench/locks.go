package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"plait/client"
	"plait/internal/cluster"
	"plait/protocol/clustermap"
	"plait/protocol/lock"
)

// The lock measures (docs/design.md §25): what one lock costs a client in time, through
// the HTTP API with package client, as a Go program would, on meshes of 3 and 5 nodes
// whose every member is a lock home and whose table c is fenced. A cycle is what a client of a fenced table does: acquire,
// read the key under the token (the freshness fence), write it under the token (answered
// once the key's home has the write), release. It is measured through the key's home and
// through a node that is not its home (each request then goes to the home over the request
// exchange), and with contenders: several clients cycling on one key through different
// nodes, each acquire waiting its turn. The frames each costs are the simulator's to count
// (BENCHMARKS.md), since a real link's frames are not counted per request.

// lockTable is the lock measures' fenced table.
const lockTable = "c"

// lockContenders is the clients of the contended measure, all on one key.
const lockContenders = 4

// lockTiming is one measure's p50 and p99 of an acquire and of a whole cycle.
type lockTiming struct {
	acquire, cycle [2]time.Duration
}

// lockResult is the lock measures of one mesh size.
type lockResult struct {
	nodes                      int
	viaHome, viaOther, contend lockTiming
}

// lockTTL is the lock measures' leases and their homes' longest (--lock-max-ttl): short,
// since a home that has just made its lease table grants nothing for the longest lease plus
// the bounds (its restart quarantine, docs/design.md §25.5), and the measures wait it out.
const lockTTL = 2 * time.Second

// lockMeasures runs the lock measures on 3 and 5 nodes.
func (c *run) lockMeasures() ([]lockResult, error) {
	var out []lockResult
	c.locks = lock.Config{MaxTTL: lockTTL}
	defer func() { c.locks = lock.Config{} }()
	for _, size := range []int{3, 5} {
		r, err := c.lockMesh(filepath.Join(c.dir, fmt.Sprintf("locks-%d", size)), size)
		if err != nil {
			return nil, fmt.Errorf("locks on %d nodes: %w", size, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// lockMesh starts a mesh of size nodes, every one a lock home, and times c.LockCycles
// cycles of each kind.
func (c *run) lockMesh(dir string, size int) (lockResult, error) {
	res := lockResult{nodes: size}
	var names, quoted []string
	for i := range size {
		name := string(rune('A' + i))
		names = append(names, name)
		quoted = append(quoted, strconv.Quote(name))
	}
	var nodeList []string
	for _, q := range quoted {
		nodeList = append(nodeList, `{"name":`+q+`}`)
	}
	doc := fmt.Sprintf(`{"generation":1,"nodes":[%s],"lock_homes":[%s],"fenced_tables":[%q]}`,
		strings.Join(nodeList, ","), strings.Join(quoted, ","), lockTable)
	m, perr := clustermap.Parse([]byte(doc))
	if perr != nil {
		return res, perr
	}
	nodes, done, err := c.startMesh(dir, doc, names...)
	if err != nil {
		return res, err
	}
	defer done()
	// A key homed on A, timed through A and through B: the same key each time, so the two
	// measures differ only in the node asked.
	key := keyHomedOn(m, "A")
	if err := waitQuarantines(nodes["A"], m, names); err != nil {
		return res, err
	}
	if res.viaHome, err = c.lockCycles([]*cluster.Node{nodes["A"]}, key); err != nil {
		return res, fmt.Errorf("through the home: %w", err)
	}
	if res.viaOther, err = c.lockCycles([]*cluster.Node{nodes["B"]}, key); err != nil {
		return res, fmt.Errorf("through another node: %w", err)
	}
	var via []*cluster.Node
	for i := range lockContenders {
		via = append(via, nodes[names[i%size]])
	}
	if res.contend, err = c.lockCycles(via, key); err != nil {
		return res, fmt.Errorf("contended: %w", err)
	}
	return res, nil
}

// waitQuarantines waits until every home grants: it runs a cycle through n on a key homed
// on each, until none is refused (a home answers quarantined until its restart quarantine
// is over).
func waitQuarantines(n *cluster.Node, m clustermap.Map, homes []string) error {
	api, err := lockClient(n)
	if err != nil {
		return err
	}
	return cluster.WaitEvery("the lock homes' quarantines ended", time.Minute, 100*time.Millisecond, func() bool {
		for _, h := range homes {
			if _, _, err := lockCycle(api, keyHomedOn(m, h)); err != nil {
				return false
			}
		}
		return true
	})
}

// keyHomedOn is the first of k0, k1, ... whose home under m is home.
func keyHomedOn(m clustermap.Map, home string) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("k%d", i); m.Home([]byte(lockTable), []byte(k)) == home {
			return k
		}
	}
}

// lockCycles runs c.LockCycles cycles on key from each client, client i through via[i],
// all at once, and returns the p50 and p99 over every client's acquires and cycles. Each
// cycle writes the count it read plus one, so two cycles that wrote one count were two
// holders at once, or one that did not see its predecessor's write: either is an error.
func (c *run) lockCycles(via []*cluster.Node, key string) (lockTiming, error) {
	var (
		mu              sync.Mutex
		acquires, whole []time.Duration
		wrote           = map[int]bool{}
		wg              sync.WaitGroup
		errs            = make(chan error, len(via))
	)
	for _, n := range via {
		wg.Add(1)
		go func() {
			defer wg.Done()
			api, err := lockClient(n)
			if err != nil {
				errs <- err
				return
			}
			for range c.LockCycles {
				acq, cyc, count, err := countCycle(api, key)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				twice := wrote[count]
				wrote[count] = true
				acquires, whole = append(acquires, acq), append(whole, cyc)
				mu.Unlock()
				if twice {
					errs <- fmt.Errorf("%s: two cycles under the lock wrote the count %d", key, count)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return lockTiming{}, err
	}
	return lockTiming{acquire: percentiles(acquires), cycle: percentiles(whole)}, nil
}

// lockClient is the client a cycle runs through n with: one attempt per call, so that a
// refusal (a quarantine) is the cycle's error, and a minute's bound.
func lockClient(n *cluster.Node) (*client.Client, error) {
	return n.Client(client.WithMaxAttempts(1), client.WithTimeout(time.Minute))
}

// lockCycle acquires key through api, reads it and writes it back plus one under the
// token, and releases it; it returns how long the acquire and the whole cycle took.
func lockCycle(api *client.Client, key string) (acquire, cycle time.Duration, err error) {
	acquire, cycle, _, err = countCycle(api, key)
	return acquire, cycle, err
}

// countCycle is lockCycle, and also returns the count it wrote.
func countCycle(api *client.Client, key string) (acquire, cycle time.Duration, wrote int, err error) {
	ctx, k := context.Background(), []byte(key)
	start := time.Now()
	lease, err := api.AcquireLock(ctx, lockTable, k, 2*time.Second, 2*time.Second)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("acquire: %w", err)
	}
	acquire = time.Since(start)
	// The first read of a key finds nothing (404); its counter is then 0.
	val, err := api.Get(ctx, lockTable, k, client.UnderLock(lease.Token))
	if errors.Is(err, client.ErrNotFound) {
		val, err = nil, nil
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read: %w", err)
	}
	count := 0
	if val != nil {
		if count, err = strconv.Atoi(string(val)); err != nil {
			return 0, 0, 0, fmt.Errorf("the counter holds %q", val)
		}
	}
	if _, err := api.Put(ctx, lockTable, k, []byte(strconv.Itoa(count+1)), client.UnderLock(lease.Token)); err != nil {
		return 0, 0, 0, fmt.Errorf("write: %w", err)
	}
	if err := api.ReleaseLock(ctx, lockTable, k, lease.Token); err != nil {
		return 0, 0, 0, fmt.Errorf("release: %w", err)
	}
	return acquire, time.Since(start), count + 1, nil
}

// lockRows writes the lock measures' rows.
func (c *run) lockRows(row func(measure, result, ratio string), rs []lockResult) {
	pp := func(d [2]time.Duration) string { return d[0].String() + " / " + d[1].String() }
	for _, r := range rs {
		row(fmt.Sprintf("%d nodes: lock acquire through the key's home, p50 / p99 of %d", r.nodes, c.LockCycles), pp(r.viaHome.acquire), "1")
		row(fmt.Sprintf("%d nodes: lock acquire through another node (one round trip to the home)", r.nodes), pp(r.viaOther.acquire),
			fmt.Sprintf("%.2f of the home's p50", r.viaOther.acquire[0].Seconds()/r.viaHome.acquire[0].Seconds()))
		row(fmt.Sprintf("%d nodes: acquire, read, write, release through the key's home", r.nodes), pp(r.viaHome.cycle), "")
		row(fmt.Sprintf("%d nodes: the same cycle through another node", r.nodes), pp(r.viaOther.cycle), "")
		row(fmt.Sprintf("%d nodes: %d clients on one key through different nodes: acquire (its wait included) / cycle, p50", r.nodes, lockContenders),
			r.contend.acquire[0].String()+" / "+r.contend.cycle[0].String(), "")
	}
}
