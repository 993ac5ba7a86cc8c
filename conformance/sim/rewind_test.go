package sim

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"plait/protocol/wire"
)

// TestRestoredBackup: A, B and C in a triangle write; A is backed up, writes more, and is
// restored from the backup (with writes made after the restore, before any peer's entry
// arrives, or none). Its peers refuse it with origin-rewound and keep its old timeline, it
// refuses writes with origin-rewound, and nothing diverges silently; after a reseed the
// cluster converges (equal records, the oracle's last-writer-wins) with every write that
// was acknowledged, those made after the restore included.
func TestRestoredBackup(t *testing.T) {
	for _, after := range []int{0, 3} {
		for _, syncDelay := range []time.Duration{0, 5 * time.Millisecond} {
			t.Run(fmt.Sprintf("writes-after-restore-%d-sync-%s", after, syncDelay), func(t *testing.T) {
				restoredBackup(t, after, syncDelay)
			})
		}
	}
}

func restoredBackup(t *testing.T, after int, syncDelay time.Duration) {
	c := New(Options{Seed: 14, SyncDelay: syncDelay})
	for _, n := range []string{"A", "B", "C"} {
		if err := c.AddNode(n, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range [][2]string{{"A", "B"}, {"B", "C"}, {"C", "A"}} {
		if err := c.Connect(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	acked := map[string]string{} // every acknowledged write's last value, by key
	write := func(node, k, v string) error {
		seq, err := c.Write(node, put(k, v))
		if err == nil && seq > 0 {
			acked[k] = v
		}
		return err
	}
	for i := range 10 {
		for _, n := range []string{"A", "B", "C"} {
			if err := write(n, fmt.Sprint(n, i), "v"); err != nil {
				t.Fatal(err)
			}
		}
		c.Run(10 * time.Millisecond)
	}
	c.Run(time.Second)
	backup, err := c.Backup("A")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // the writes the backup misses; shared keys too
		if err := write("A", fmt.Sprint("late", i), "old timeline"); err != nil {
			t.Fatal(err)
		}
		if err := write("A", "B1", fmt.Sprint("A's late ", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.Run(time.Second)
	if err := c.Crash("A"); err != nil {
		t.Fatal(err)
	}
	if err := c.RestoreBackup("A", backup); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart("A", 0); err != nil {
		t.Fatal(err)
	}
	for i := range after { // before any peer's position reaches A
		if err := write("A", fmt.Sprint("restored", i), "new timeline"); err != nil {
			t.Fatalf("write %d after the restore: %v", i, err)
		}
	}
	c.Run(2 * time.Second)
	a := c.Node("A")
	if rw := a.Rep.Rewound(); rw == nil {
		t.Fatal("A is not found rewound")
	}
	var we *wire.Error
	if _, err := c.Write("A", put("refused", "x")); !errors.As(err, &we) || we.Code != wire.CodeOriginRewound {
		t.Fatalf("A's write while rewound: %v, want origin-rewound", err)
	}
	for _, name := range []string{"B", "C"} {
		n := c.Node(name)
		o := n.Rep.Origin(a.origin)
		if o.Diverged || o.AppliedSeq != 20 {
			t.Errorf("%s's status of A = %+v, want its 20 entries kept, not diverged", name, o)
		}
		if e := n.Rep.LastError("A"); e == nil || e.Err.Code != wire.CodeOriginRewound {
			t.Errorf("%s's last error for A = %+v, want origin-rewound", name, e)
		}
		if d := n.Rep.Counters().Divergences; d != 0 {
			t.Errorf("%s counted %d divergences", name, d)
		}
		for i := range after {
			if _, ok, _ := n.Store.Get([]byte("t"), []byte(fmt.Sprint("restored", i))); ok {
				t.Errorf("%s took a write of the forked timeline before the reseed", name)
			}
		}
	}
	// B and C keep writing meanwhile; then the operator reseeds A.
	for i := range 3 {
		for _, n := range []string{"B", "C"} {
			if err := write(n, fmt.Sprint(n, "during", i), "v"); err != nil {
				t.Fatal(err)
			}
		}
	}
	old := a.origin
	if err := c.Crash("A"); err != nil {
		t.Fatal(err)
	}
	if err := c.Reseed("A"); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart("A", 0); err != nil {
		t.Fatal(err)
	}
	if err := write("A", "after-reseed", "v"); err != nil {
		t.Fatalf("A's write after the reseed: %v", err)
	}
	c.Run(3 * time.Second)
	c.CheckConverged()
	for _, name := range []string{"A", "B", "C"} {
		n := c.Node(name)
		if got := n.Rep.Origin(old).AppliedSeq; got != 20 {
			t.Errorf("%s holds the old origin of A up to %d, want 20", name, got)
		}
		for k, v := range acked {
			r, ok, err := n.Store.Get([]byte("t"), []byte(k))
			if err != nil || !ok || string(r.Value) != v {
				t.Errorf("%s: %s = %q (%v), want the acknowledged %q", name, k, r.Value, ok, v)
			}
		}
	}
	if f := c.Failures(); len(f) > 0 {
		t.Fatal(f)
	}
}
