package sim

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// TestDiskFullDegradesAndRecovers: in a mesh A, B, C under writes on every node, B's disk
// fills for 3 s. B degrades at its next write: its own writes are refused with
// storage-full, it applies nothing of the others (its cursors stay), A and C keep
// replicating between them; once the space is back it recovers (a new replica on its
// store) and the cluster converges with every entry applied once.
func TestDiskFullDegradesAndRecovers(t *testing.T) {
	c := newV2Cluster(t, Options{Seed: 5}, []string{"A", "B", "C"}, [2]string{"A", "B"}, [2]string{"B", "C"}, [2]string{"C", "A"})
	write := func(i int) {
		for _, n := range []string{"A", "C"} {
			if _, err := c.Write(n, put(fmt.Sprint(n, i), n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 5 {
		write(i)
		c.Run(50 * time.Millisecond)
	}
	c.Run(time.Second)
	b := c.Node("B")
	c.FillDisk("B", 3*time.Second)
	refused := 0
	var applied map[string]uint64
	for i := 5; i < 25; i++ {
		write(i)
		_, err := c.Write("B", put(fmt.Sprint("B", i), "B"))
		var se *store.StorageError
		if errors.As(err, &se) && se.Code == wire.CodeStorageFull {
			refused++
		} else if err != nil {
			t.Fatalf("B's write while its disk is full: %v", err)
		}
		c.Run(100 * time.Millisecond)
		if i == 15 { // 1 s into the fill: B is degraded, and stays where it was
			if b.Rep.Degraded() == nil {
				t.Fatal("B is not degraded with its disk full")
			}
			applied = map[string]uint64{}
			for _, o := range b.Rep.Status(c.Now()).Origins {
				applied[o.Name] = o.AppliedSeq
			}
		}
	}
	if got := c.Node("C").Rep.Origin(c.Node("A").origin).AppliedSeq; got < 20 {
		t.Errorf("C applied A up to %d while B was degraded, want at least 20: A and C keep replicating", got)
	}
	if b.Rep != nil && b.Rep.Degraded() != nil {
		for _, o := range b.Rep.Status(c.Now()).Origins {
			if o.AppliedSeq != applied[o.Name] {
				t.Errorf("B applied %s up to %d while degraded, from %d", o.Name, o.AppliedSeq, applied[o.Name])
			}
		}
	}
	if !c.Stabilize(30 * time.Second) {
		_, why := c.Converged()
		t.Fatal("not converged after the disk had room again:", why, c.Failures())
	}
	c.CheckConverged()
	if b.Recoveries != 1 || b.Rep.Degraded() != nil {
		t.Errorf("B recovered %d times, degraded now: %v; want 1 recovery", b.Recoveries, b.Rep.Degraded())
	}
	// B's disk filled before its first write: it took none of its 20, and A has none.
	if got := c.Node("A").Rep.Origin(b.origin).AppliedSeq; refused != 20 || got != 0 {
		t.Errorf("B refused %d of its 20 writes, A applied B up to %d; want 20 refused, 0", refused, got)
	}
	if f := c.Failures(); len(f) > 0 {
		t.Fatal(f)
	}
}
