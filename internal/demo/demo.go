package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"plait/internal/cluster"
	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// Run runs the demo, telling out what happens. It returns nil iff every running node
// ends with the same digest and no node received a duplicate.
func Run(out io.Writer) error {
	dir, err := os.MkdirTemp("", "plait-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	d := &demoCluster{out: out, dir: dir, nodes: map[string]*cluster.Node{}, writes: map[string]uint64{}}
	defer d.stopAll()

	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	say("plait demo: four nodes on 127.0.0.1, data in %s", dir)
	b2Listener, err := net.Listen("tcp", "127.0.0.1:0") // B2's address, known before it starts
	if err != nil {
		return err
	}
	for _, n := range []struct {
		name  string
		peers []string
	}{{"A", nil}, {"B", []string{"A"}}, {"C", []string{"B", "B2"}}} {
		if err := d.start(n.name, n.peers, nil, b2Listener.Addr().String()); err != nil {
			return err
		}
	}
	feed, err := d.follow("C", "t")
	if err != nil {
		return err
	}
	defer feed.stop()
	say("   (a consumer follows table t's change feed on C through the Go client: docs/contract.md §24, §25)")
	say("\n1. A -> B -> C (C also dials B2, which is not up yet); 20 writes on each of A, B, C")
	if err := d.writeAll(20, "A", "B", "C"); err != nil {
		return err
	}
	if err := d.until("C takes A through B, caught up", func() bool {
		o := d.origin("C", "A")
		return o.SourcePeer == "B" && o.AppliedSeq == 20
	}); err != nil {
		return err
	}
	d.table("C")

	say("\n2. B2 starts (it dials A); C connects to it; 20 more writes on each node")
	if err := d.start("B2", []string{"A"}, b2Listener, ""); err != nil {
		return err
	}
	if err := d.writeAll(20, "A", "B", "B2", "C"); err != nil {
		return err
	}
	if err := d.converged("A", "B", "B2", "C"); err != nil {
		return err
	}
	d.table("C")

	say("\n3. B stops; 20 more writes on A, B2 and C: A's channel on C moves to B2")
	if err := d.nodes["B"].Stop(); err != nil {
		return err
	}
	if err := d.writeAll(20, "A", "B2", "C"); err != nil {
		return err
	}
	if err := d.converged("A", "B2", "C"); err != nil {
		return err
	}
	d.table("C")

	say("\n4. digests of table t")
	var first string
	equal, dups := true, uint64(0)
	for _, name := range []string{"A", "B2", "C"} {
		count, sum, err := d.nodes[name].Local.Digest("t")
		if err != nil {
			return err
		}
		st, err := d.nodes[name].Status()
		if err != nil {
			return err
		}
		dups += st.Counters.DuplicatesReceived
		say("  %-3s %d records %s  duplicates received %d", name, count, sum[:16], st.Counters.DuplicatesReceived)
		if first == "" {
			first = sum
		}
		equal = equal && sum == first
	}
	o := d.origin("C", "A")
	say("  C takes A from %s after %d source change(s)", o.SourcePeer, o.SourceChanges)
	want := map[string]uint64{}
	for _, name := range []string{"A", "B", "B2", "C"} {
		want[name] = d.writes[name]
	}
	changes, feedErr := feed.await(want)
	say("  C's change feed: %d changes, each origin's seqs 1 to its last once and in order", changes)
	switch {
	case feedErr != nil:
		return feedErr
	case !equal:
		return errors.New("the digests differ")
	case dups > 0:
		return fmt.Errorf("%d entries were delivered twice", dups)
	case o.SourcePeer != "B2":
		return fmt.Errorf("C takes A from %q, not B2", o.SourcePeer)
	}
	say("digests equal, nothing delivered twice")
	return nil
}

type demoCluster struct {
	out    io.Writer
	dir    string
	nodes  map[string]*cluster.Node
	order  []string
	writes map[string]uint64 // transactions written on each node
}

var demoSecret = []byte("plait demo cluster secret, 32 bytes")

// start runs a node; peers are names of nodes started before, or B2 at b2addr.
func (d *demoCluster) start(name string, peers []string, l net.Listener, b2addr string) error {
	var ps []node.Peer
	for _, p := range peers {
		url := "ws://" + b2addr
		if n := d.nodes[p]; n != nil {
			url = n.URL
		}
		ps = append(ps, node.Peer{Name: p, URL: url})
	}
	n, err := cluster.StartLocal(node.Config{Name: name, DataDir: filepath.Join(d.dir, name), Listener: l, Peers: ps, RedialMax: 500 * time.Millisecond, Config: replica.Config{Secret: demoSecret}}, name == "C")
	if err != nil {
		return err
	}
	d.nodes[name] = n
	d.order = append(d.order, name)
	return nil
}

// stopAll stops every node, B again included (a no-op). The demo's outcome is decided by
// then; a node that fails to stop cannot change it.
func (d *demoCluster) stopAll() {
	for _, name := range d.order {
		_ = d.nodes[name].Stop() // cleanup after the verdict: the digests decided it
	}
}

// writeAll writes k transactions on each named node, interleaved.
func (d *demoCluster) writeAll(k int, names ...string) error {
	ctx := context.Background()
	for i := range k {
		for _, name := range names {
			key := fmt.Sprintf("%s-%d", name, i)
			if _, err := d.nodes[name].Local.Write(ctx, []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(key),
				Value: []byte(fmt.Sprintf("written on %s", name))}}); err != nil {
				return err
			}
			d.writes[name]++
		}
	}
	return nil
}

// origin is at's status of the origin of, or the zero value when at has none (or is
// stopping: every wait on it then runs into its bound).
func (d *demoCluster) origin(at, of string) httpapi.OriginDoc {
	st, err := d.nodes[at].Status()
	if err != nil {
		return httpapi.OriginDoc{}
	}
	o, _ := st.Origin(of)
	return o
}

// until polls cond for up to 30 s.
func (d *demoCluster) until(what string, cond func() bool) error {
	return cluster.WaitFor(what, 30*time.Second, cond)
}

// converged waits until every named node holds every named origin at its head.
func (d *demoCluster) converged(names ...string) error {
	return d.until("convergence", func() bool {
		for _, at := range names {
			for _, of := range names {
				if o := d.origin(at, of); o.LagSeq != 0 || o.AppliedSeq != d.origin(of, of).AppliedSeq {
					return false
				}
			}
		}
		return true
	})
}

// table prints a node's origins; a node that cannot tell them (stopping) prints none.
func (d *demoCluster) table(name string) {
	st, err := d.nodes[name].Status()
	if err != nil {
		return
	}
	t := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(t, "  %s:\tORIGIN\tAPPLIED\tHEAD\tLAG\tSOURCE\tCHANGES\n", name)
	for _, o := range st.Origins {
		fmt.Fprintf(t, "\t%s\t%d\t%d\t%d\t%s\t%d\n", o.Name, o.AppliedSeq, o.HeadSeq, o.LagSeq, dash(o.SourcePeer), o.SourceChanges)
	}
	t.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
