package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"plait/internal/cluster"
	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/node"
)

// The fan-in hub measures (docs/design.md §27): a core node C, a hub H that dials it and
// takes leaves, and a leaf L that dials H, under a cluster map naming C and H with a leaf
// window (the hub's gate). A leaf's write costs the hub what a local write costs it (one
// entry of its own origin, written and synced) plus the leaf's link, so each leaf figure
// stands beside the same work done at the hub in the same run: H's local writes for the
// rate, a write on H timed until C serves it (one hop between peers) for the latency.

// hubMap is the hub measures' cluster map: C and H, never the leaf, and a leaf window of a
// day (no write of a run is older than that).
const hubMap = `{"generation":1,"leaf_window":86400,"nodes":[{"name":"C"},{"name":"H"}]}`

// hubResult is the hub measures of one run: the records per second H wrote as its own and
// re-originated from L (zero when --hub-records is 0), and the write -> visible p50 and p99
// from L to C through H, from H to C, and from L to H (zero when --hub-samples is 0).
type hubResult struct {
	local, reoriginated              float64
	leafToCore, hubToCore, leafToHub [2]time.Duration
}

// startHubNode starts a node of this process in dir/name: a hub taking up to maxLeaves
// leaves, or, with hub set, a leaf of that node, which it alone dials.
func (c *run) startHubNode(dir, name string, maxLeaves int, hub *cluster.Node, peers ...*cluster.Node) (*cluster.Node, error) {
	cfg := node.Config{Name: name, DataDir: filepath.Join(dir, name), Sync: c.Sync,
		Config: replica.Config{Secret: []byte(benchSecret), MaxLeaves: maxLeaves}}
	for _, p := range peers {
		cfg.Peers = append(cfg.Peers, p.Peer())
	}
	if hub != nil {
		cfg.Hub, cfg.Peers = hub.Name, []node.Peer{hub.Peer()}
	}
	return cluster.StartLocal(cfg, false)
}

// hubTree starts C, H and L in dir, publishes hubMap and returns once H has L connected
// with its gate open (L's hub link established); done stops the three.
func (c *run) hubTree(dir string) (core, hub, leaf *cluster.Node, done func(), err error) {
	if core, err = c.startHubNode(dir, "C", 0, nil); err != nil {
		return nil, nil, nil, nil, err
	}
	if hub, err = c.startHubNode(dir, "H", 1, nil, core); err != nil {
		stop(core)
		return nil, nil, nil, nil, err
	}
	done = func() { stop(hub); stop(core) }
	if err = cluster.WaitEvery("H connected to C", time.Minute, pollEvery, func() bool { return connected(hub, core) }); err != nil {
		done()
		return nil, nil, nil, nil, err
	}
	if err = c.publish(core, hubMap, core, hub); err != nil {
		done()
		return nil, nil, nil, nil, err
	}
	if leaf, err = c.startHubNode(dir, "L", 0, hub); err != nil {
		done()
		return nil, nil, nil, nil, err
	}
	done = func() { stop(leaf); stop(hub); stop(core) }
	if err = cluster.WaitEvery("L connected to its hub H, the gate open", time.Minute, pollEvery, func() bool {
		hs, herr := hub.Local.Status()
		ls, lerr := leaf.Local.Status()
		return herr == nil && lerr == nil && hs.Leaves != nil && hs.Leaves.Connected == 1 && hs.Leaves.Held == 0 &&
			ls.Hub != nil && ls.Hub.Connected
	}); err != nil {
		done()
		return nil, nil, nil, nil, err
	}
	return core, hub, leaf, done, nil
}

// hubMeasures runs the hub measures the load asks for on one tree of C, H and L.
func (c *run) hubMeasures() (hubResult, error) {
	var res hubResult
	core, hub, leaf, done, err := c.hubTree(filepath.Join(c.dir, "hubs"))
	if err != nil {
		return res, err
	}
	defer done()
	if c.HubRecords > 0 {
		if res.local, res.reoriginated, err = c.hubRates(hub, leaf); err != nil {
			return res, err
		}
	}
	if c.HubSamples > 0 {
		if res.leafToCore, res.hubToCore, res.leafToHub, err = c.hubLatency(core, hub, leaf); err != nil {
			return res, err
		}
	}
	return res, nil
}

// hubRates writes c.HubRecords records on H through the Go API (timed until the last is
// acknowledged: written and synced as its own) and then as many other records on L (timed
// from the first write until H re-originated the last, as H's counter says), each from
// c.Writers writers. It returns both rates in records per second.
func (c *run) hubRates(hub, leaf *cluster.Node) (local, reoriginated float64, err error) {
	begin := time.Now()
	if _, err = c.writeRecords(hub, 0, c.HubRecords, c.Writers, viaAPI); err != nil {
		return 0, 0, err
	}
	local = float64(c.HubRecords) / time.Since(begin).Seconds()
	before, err := hub.Local.Status()
	if err != nil {
		return 0, 0, err
	}
	begin = time.Now()
	txns, err := c.writeRecords(leaf, c.HubRecords, c.HubRecords, c.Writers, viaAPI)
	if err != nil {
		return 0, 0, err
	}
	want := before.Counters.LeafWritesReoriginated + txns
	if err = cluster.WaitEvery("H re-originated L's writes", benchBound, pollEvery, func() bool {
		st, err := hub.Local.Status()
		return err == nil && st.Counters.LeafWritesReoriginated >= want
	}); err != nil {
		return 0, 0, err
	}
	return local, float64(c.HubRecords) / time.Since(begin).Seconds(), nil
}

// hubLatency times c.HubSamples single writes on L until C and H serve them, alternated
// with as many on H until C serves them, and returns the p50 and p99 of L to C, H to C and
// L to H.
func (c *run) hubLatency(core, hub, leaf *cluster.Node) (leafToCore, hubToCore, leafToHub [2]time.Duration, err error) {
	// visible polls n's Go API every 20 µs, as latencyOf's does.
	visible := func(n *cluster.Node, key []byte, t0 time.Time, at *time.Duration) error {
		for time.Since(t0) < time.Minute {
			if _, found, err := n.Local.Get([]byte("l"), key); err != nil {
				return err
			} else if found {
				*at = time.Since(t0)
				return nil
			}
			time.Sleep(20 * time.Microsecond)
		}
		return errors.New("a write never became visible on " + n.Name)
	}
	write := func(n *cluster.Node, key []byte) error {
		_, err := n.Local.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("l"), Key: key, Value: c.value}})
		return err
	}
	var lc, hc, lh []time.Duration
	for i := range c.HubSamples {
		key := fmt.Appendf(nil, "leaf-%d", i)
		t0 := time.Now()
		if err = write(leaf, key); err != nil {
			return
		}
		var dc, dh time.Duration
		var eh error
		onHub := make(chan struct{})
		go func() { eh = visible(hub, key, t0, &dh); close(onHub) }()
		ec := visible(core, key, t0, &dc)
		<-onHub
		if err = errors.Join(ec, eh); err != nil {
			return
		}
		lc, lh = append(lc, dc), append(lh, dh)

		key = fmt.Appendf(nil, "hub-%d", i)
		t0 = time.Now()
		if err = write(hub, key); err != nil {
			return
		}
		if err = visible(core, key, t0, &dc); err != nil {
			return
		}
		hc = append(hc, dc)
	}
	return percentiles(lc), percentiles(hc), percentiles(lh), nil
}

// hubRows prints the hub measures' rows.
func (c *run) hubRows(row func(measure, result, ratio string), h hubResult) {
	if c.HubRecords > 0 {
		row(fmt.Sprintf("hub H writes %d records of its own through the Go API (the baseline)", c.HubRecords), rate(h.local, "records"), "1")
		row("hub H re-originates as many written on its leaf L, L's first write to H's last re-origination", rate(h.reoriginated, "records"),
			ratio(h.reoriginated, h.local, "H's own writes"))
	}
	if c.HubSamples > 0 {
		row(fmt.Sprintf("write on hub H -> visible on core node C (one hop between peers), p50 / p99 of %d single writes", c.HubSamples),
			h.hubToCore[0].String()+" / "+h.hubToCore[1].String(), "1")
		row("write on leaf L -> visible on core node C (one hop of hub: L -> H -> C), p50 / p99, alternated with the hop's",
			h.leafToCore[0].String()+" / "+h.leafToCore[1].String(),
			fmt.Sprintf("%.2f / %.2f of one hop", h.leafToCore[0].Seconds()/h.hubToCore[0].Seconds(), h.leafToCore[1].Seconds()/h.hubToCore[1].Seconds()))
		row("the same writes on leaf L -> visible on hub H (re-originated), p50 / p99", h.leafToHub[0].String()+" / "+h.leafToHub[1].String(), "")
	}
}
