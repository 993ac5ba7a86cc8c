package sim

import (
	"fmt"
	"testing"
	"time"

	"plait/protocol/wire"
)

func put(k, v string) []wire.Op {
	return []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(k), Value: []byte(v)}}
}

// newV2Cluster is a cluster of opts with the named nodes at the newest protocol version,
// promising that nothing is received twice (SetV2Only), and the links given (dialer,
// listener) connected.
func newV2Cluster(t *testing.T, opts Options, names []string, links ...[2]string) *Cluster {
	t.Helper()
	c := New(opts)
	for _, n := range names {
		if err := c.AddNode(n, 0); err != nil {
			t.Fatal(err)
		}
	}
	c.SetV2Only(true)
	for _, l := range links {
		if err := c.Connect(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func TestSmokeChain(t *testing.T) {
	c := New(Options{Seed: 1, Trace: func(s string) { t.Log(s) }})
	for _, n := range []string{"A", "B", "C"} {
		if err := c.AddNode(n, 0); err != nil {
			t.Fatal(err)
		}
	}
	c.SetV2Only(true)
	c.Connect("A", "B")
	c.Connect("B", "C")
	c.Run(time.Second)
	for i := 0; i < 20; i++ {
		c.Write("A", put(fmt.Sprint("k", i), "a"))
		c.Write("C", put(fmt.Sprint("k", i+5), "c"))
		c.Run(10 * time.Millisecond)
	}
	if !c.Stabilize(30 * time.Second) {
		_, why := c.Converged()
		t.Fatal("not converged:", why, c.Failures())
	}
	n, d := c.CheckConverged()
	t.Log(n, d)
	for _, o := range c.Node("C").Rep.Status(c.Now()).Origins {
		t.Logf("%+v", o)
	}
	if f := c.Failures(); len(f) > 0 {
		t.Fatal(f)
	}
}
