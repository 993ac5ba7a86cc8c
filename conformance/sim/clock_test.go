package sim

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/wire"
)

// TestNodeADayAhead: in a triangle A, B, C where C's clock runs a day ahead, the cluster
// keeps flowing and no clock runs away with the others. C's one write made before its
// peers measured its clock waits on A and B (stuck clock-ahead) instead of carrying their
// HLCs a day forward; once measured, C's writes are refused with clock-offset; A's and B's
// writes reach every node, C included, and every entry A and B make is stamped within the
// bound of their own clocks.
func TestNodeADayAhead(t *testing.T) {
	c := New(Options{Seed: 11})
	for _, n := range []string{"A", "B", "C"} {
		if err := c.AddNode(n, 0); err != nil {
			t.Fatal(err)
		}
	}
	c.Node("C").Skew = 24 * time.Hour
	c.SetV2Only(true)
	for _, l := range [][2]string{{"A", "B"}, {"B", "C"}, {"C", "A"}} {
		if err := c.Connect(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	// Before the handshakes: version 4's first PINGs and stamps measure each link within
	// two round trips of its handshake.
	if _, err := c.Write("C", put("early", "c")); err != nil {
		t.Fatalf("C's write before any measurement: %v", err)
	}
	c.Run(200 * time.Millisecond) // handshakes done
	c.Run(3 * time.Second)        // PINGs and stamps measure C's clock
	_, err := c.Write("C", put("late", "c"))
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeClockOffset {
		t.Fatalf("C's write once measured: %v, want clock-offset", err)
	}
	for i := range 20 {
		for _, n := range []string{"A", "B"} {
			if _, err := c.Write(n, put(fmt.Sprintf("%s%d", n, i), n)); err != nil {
				t.Fatal(err)
			}
		}
		c.Run(20 * time.Millisecond)
	}
	c.Run(2 * time.Second)
	for _, name := range []string{"A", "B", "C"} {
		n := c.Node(name)
		st := n.Rep.Status(n.clock(c))
		for _, o := range st.Origins {
			switch {
			case (o.Name == "A" || o.Name == "B") && o.AppliedSeq != 20:
				t.Errorf("%s applied %s up to %d, want 20", name, o.Name, o.AppliedSeq)
			case o.Name == "C" && name != "C" && (o.AppliedSeq != 0 || o.Stuck != replica.StuckClockAhead):
				t.Errorf("%s's status of C: %+v, want nothing applied, stuck clock-ahead", name, o)
			}
		}
	}
	for _, name := range []string{"A", "B"} {
		n := c.Node(name)
		raw, err := n.Store.Entry(n.origin, 20)
		if err != nil {
			t.Fatal(err)
		}
		v, err := wire.ParseTxn(raw)
		if err != nil {
			t.Fatal(err)
		}
		if ahead := int64(v.HLC.WallMillis()) - n.clock(c).UnixMilli(); ahead > replica.DefaultMaxClockOffset.Milliseconds() {
			t.Errorf("%s's last entry is stamped %d ms ahead of its clock: C dragged it forward", name, ahead)
		}
	}
	if f := c.Failures(); len(f) > 0 {
		t.Fatal(f)
	}
}
