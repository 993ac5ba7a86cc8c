package sim

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"plait/internal/mutate"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// Anti-entropy in the simulator (docs/design.md §19): records lost or altered in one
// node's store, around its log, are repaired from its peers; a newer version is never
// replaced; in-flight versions are left to the log; equal versions whose log entry is gone
// are flagged; a record whose tombstone retention dropped is not brought back.

func aeCluster(t *testing.T, opts Options, names ...string) *Cluster {
	t.Helper()
	if opts.Seed == 0 {
		opts.Seed = 7
	}
	if opts.AntiEntropyInterval == 0 {
		opts.AntiEntropyInterval = 100 * time.Millisecond
	}
	c := New(opts)
	for _, n := range names {
		if err := c.AddNode(n, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(names); i++ {
		if err := c.Connect(names[i], names[i-1]); err != nil {
			t.Fatal(err)
		}
	}
	c.Run(time.Second)
	return c
}

func record(t *testing.T, n *Node, table, key string) (store.Record, bool) {
	t.Helper()
	r, ok, err := n.Store.Get([]byte(table), []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return r, ok
}

// sameRecords runs the cluster until every running node's records, versions and
// tombstones included, are the same, or the deadline passes.
func sameRecords(c *Cluster, limit time.Duration) bool {
	deadline := c.Now().Add(limit)
	for {
		var first []byte
		same := true
		for _, name := range c.Names() {
			d, _ := c.recordsDigest(c.Node(name))
			if first == nil {
				first = d
			} else if !bytes.Equal(d, first) {
				same = false
			}
		}
		if same {
			return true
		}
		if !c.Now().Before(deadline) {
			return false
		}
		c.Run(100 * time.Millisecond)
	}
}

func stable(t *testing.T, c *Cluster) {
	t.Helper()
	if !c.Stabilize(30 * time.Second) {
		_, why := c.Converged()
		t.Fatal("not converged:", why, c.Failures())
	}
}

func noFailures(t *testing.T, c *Cluster) {
	t.Helper()
	if f := c.Failures(); len(f) > 0 {
		t.Fatal(f)
	}
}

// TestAntiEntropyRepairsStore: in a chain A-B-C holding 600 records over two tables
// (ranges of 256: several per pass), C loses a record and a tombstone, holds another at
// its version with another value, and a third at an older version; B loses one. Anti-
// entropy repairs all of them, the digests become equal, and the records are the last
// writes.
func TestAntiEntropyRepairsStore(t *testing.T) {
	c := aeCluster(t, Options{}, "A", "B", "C")
	for i := range 300 {
		tab := []byte("t")
		if i%2 == 1 {
			tab = []byte("u")
		}
		node := []string{"A", "C"}[i%2]
		if _, err := c.Write(node, []wire.Op{{Kind: wire.OpPut, Table: tab, Key: []byte(fmt.Sprintf("k%03d", i)), Value: []byte(node)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write("B", []wire.Op{{Kind: wire.OpPut, Table: []byte("v"), Key: []byte(fmt.Sprintf("b%03d", i)), Value: []byte("b")}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Write("A", []wire.Op{{Kind: wire.OpDelete, Table: []byte("t"), Key: []byte("k010")}}); err != nil {
		t.Fatal(err)
	}
	stable(t, c)
	if !sameRecords(c, 5*time.Second) {
		t.Fatal("records differ before any corruption")
	}
	C, B := c.Node("C"), c.Node("B")
	before := C.Rep.Counters()
	// Around the logs: C loses t/k002 and the tombstone t/k010, holds t/k004 at its
	// version with another value and u/k007 at an older version; B loses v/b123.
	C.Store.Corrupt([]byte("t"), []byte("k002"), nil)
	C.Store.Corrupt([]byte("t"), []byte("k010"), nil)
	r4, _ := record(t, C, "t", "k004")
	C.Store.Corrupt([]byte("t"), []byte("k004"), &store.Record{Value: []byte("rot"), HLC: r4.HLC, Origin: r4.Origin})
	r7, _ := record(t, C, "u", "k007")
	C.Store.Corrupt([]byte("u"), []byte("k007"), &store.Record{Value: []byte("old"), HLC: r7.HLC - 1, Origin: r7.Origin})
	B.Store.Corrupt([]byte("v"), []byte("b123"), nil)
	if sameRecords(c, 0) {
		t.Fatal("the corruption did not change the records")
	}
	if !sameRecords(c, 60*time.Second) {
		t.Fatalf("records still differ after a minute of anti-entropy; C's counters %+v", C.Rep.Counters())
	}
	c.CheckConverged()
	noFailures(t, c)
	if r, ok := record(t, C, "t", "k004"); !ok || string(r.Value) != "A" || r.HLC != r4.HLC {
		t.Errorf("t/k004 on C is %+v, want A's write at its version", r)
	}
	if r, ok := record(t, C, "t", "k010"); !ok || !r.Deleted {
		t.Errorf("the tombstone t/k010 on C is %+v (held %v), want it back", r, ok)
	}
	got := C.Rep.Counters()
	if n := got.AntiEntropyRecordsRepaired - before.AntiEntropyRecordsRepaired; n != 4 {
		t.Errorf("C repaired %d records, want 4", n)
	}
	if got.AntiEntropyRangesDiffering == before.AntiEntropyRangesDiffering || got.AntiEntropyRangesCompared < 3 {
		t.Errorf("C's counters %+v: want ranges compared and some differing", got)
	}
	if n := B.Rep.Counters().AntiEntropyRecordsRepaired; n != 1 {
		t.Errorf("B repaired %d records, want 1", n)
	}
	if c.inv.repaired != 5 {
		t.Errorf("the stores took %d repaired records, want 5", c.inv.repaired)
	}
}

// TestAntiEntropyKeepsNewer: B holds a record at an older version than its last write
// (a lost update). B takes the newer one back; A, which holds the newer, keeps it, and no
// store ever takes an older version (the recording store fails the run if one does).
func TestAntiEntropyKeepsNewer(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprint("broken=", broken), func(t *testing.T) {
			c := aeCluster(t, Options{Config: replica.Config{Mutations: mutate.Set{RepairOlder: broken}}}, "A", "B")
			c.Write("A", put("k", "first"))
			stable(t, c)
			first, _ := record(t, c.Node("B"), "t", "k")
			c.Run(10 * time.Millisecond)
			c.Write("B", put("k", "second"))
			stable(t, c)
			c.Node("B").Store.Corrupt([]byte("t"), []byte("k"), &first)
			sameRecords(c, 30*time.Second)
			failed := len(c.Failures()) > 0
			if broken {
				if !failed {
					t.Fatal("repairing older versions went unnoticed")
				}
				return
			}
			noFailures(t, c)
			for _, n := range []string{"A", "B"} {
				if r, _ := record(t, c.Node(n), "t", "k"); string(r.Value) != "second" {
					t.Errorf("%s holds %q, want the newer write", n, r.Value)
				}
			}
			if c.Node("A").Rep.Counters().AntiEntropyRecordsRepaired != 0 || c.Node("B").Rep.Counters().AntiEntropyRecordsRepaired != 1 {
				t.Errorf("repairs: A %d, B %d; want 0 and 1", c.Node("A").Rep.Counters().AntiEntropyRecordsRepaired,
					c.Node("B").Rep.Counters().AntiEntropyRecordsRepaired)
			}
		})
	}
}

// TestAntiEntropyInFlight: an entry dropped on the way from B to C (the last one: only
// the stall timeout shows the hole) is in flight for C while B's answers hold its record:
// C counts it and leaves it to the log, which brings it.
func TestAntiEntropyInFlight(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprint("broken=", broken), func(t *testing.T) {
			c := aeCluster(t, Options{Config: replica.Config{Mutations: mutate.Set{RepairInFlight: broken}}}, "A", "B", "C")
			c.Write("A", put("k1", "a"))
			stable(t, c)
			if err := c.Inject("B", "C", Drop); err != nil {
				t.Fatal(err)
			}
			c.Write("A", put("k2", "a"))
			stable(t, c)
			c.CheckConverged()
			noFailures(t, c)
			got := c.Node("C").Rep.Counters()
			wrong := got.AntiEntropyInFlight == 0 || got.AntiEntropyRecordsRepaired != 0
			if wrong != broken {
				t.Fatalf("C's counters %+v: in flight %d, repaired %d", got, got.AntiEntropyInFlight, got.AntiEntropyRecordsRepaired)
			}
		})
	}
}

// TestAntiEntropyEqualVersionFlagged: once the log entry is purged, a record held at the
// same version with another value cannot be told right or wrong: both nodes flag it in
// status and neither changes its record.
func TestAntiEntropyEqualVersionFlagged(t *testing.T) {
	c := aeCluster(t, Options{Config: replica.Config{RetainAge: time.Second, RetainHold: time.Second}}, "A", "B")
	c.Write("A", put("k", "right"))
	c.Write("A", put("other", "x"))
	stable(t, c)
	c.Run(5 * time.Second) // retention purges A's first entry everywhere
	B := c.Node("B")
	r, _ := record(t, B, "t", "k")
	B.Store.Corrupt([]byte("t"), []byte("k"), &store.Record{Value: []byte("wrong"), HLC: r.HLC, Origin: r.Origin})
	deadline := c.Now().Add(30 * time.Second)
	for len(B.Rep.Status(c.Now()).AntiEntropyConflicts) == 0 || len(c.Node("A").Rep.Status(c.Now()).AntiEntropyConflicts) == 0 {
		if !c.Now().Before(deadline) {
			t.Fatalf("no conflict flagged; B's counters %+v", B.Rep.Counters())
		}
		c.Run(100 * time.Millisecond)
	}
	f := B.Rep.Status(c.Now()).AntiEntropyConflicts[0]
	if string(f.Table) != "t" || string(f.Key) != "k" || f.HLC != r.HLC || f.Origin != r.Origin || f.Peer != "A" {
		t.Errorf("flagged %+v", f)
	}
	c.Run(2 * time.Second)
	if got, _ := record(t, B, "t", "k"); string(got.Value) != "wrong" {
		t.Errorf("B's record became %q: a value was chosen", got.Value)
	}
	if got, _ := record(t, c.Node("A"), "t", "k"); string(got.Value) != "right" {
		t.Errorf("A's record became %q: a value was chosen", got.Value)
	}
	if n := B.Rep.Counters().AntiEntropyConflicts; n != 1 {
		t.Errorf("B counted %d conflicts, want 1 (flagged once)", n)
	}
	if n := B.Rep.Counters().AntiEntropyRecordsRepaired + c.Node("A").Rep.Counters().AntiEntropyRecordsRepaired; n != 0 {
		t.Errorf("%d records repaired", n)
	}
	noFailures(t, c)
}

// TestAntiEntropyTombstoneHorizon: B deleted a record and dropped the tombstone once every
// origin wrote past it (retention). A peer that still holds the live version (here: put
// back around A's log) does not bring it back to B.
func TestAntiEntropyTombstoneHorizon(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprint("broken=", broken), func(t *testing.T) {
			c := aeCluster(t, Options{Config: replica.Config{RetainAge: time.Second, RetainHold: time.Second, Mutations: mutate.Set{RepairBelowHorizon: broken}}}, "A", "B")
			c.Write("A", put("k", "v"))
			stable(t, c)
			live, _ := record(t, c.Node("A"), "t", "k")
			c.Write("B", []wire.Op{{Kind: wire.OpDelete, Table: []byte("t"), Key: []byte("k")}})
			stable(t, c)
			for _, n := range []string{"A", "B"} { // every origin writes past the tombstone
				c.Write(n, put("later-"+n, "x"))
			}
			stable(t, c)
			c.Run(5 * time.Second)
			for _, n := range []string{"A", "B"} {
				if _, ok := record(t, c.Node(n), "t", "k"); ok {
					t.Fatalf("%s still holds the tombstone", n)
				}
			}
			c.Node("A").Store.Corrupt([]byte("t"), []byte("k"), &live)
			c.Run(5 * time.Second)
			_, back := record(t, c.Node("B"), "t", "k")
			if back != broken {
				t.Fatalf("B holds the deleted record: %v", back)
			}
			if !broken && c.Node("B").Rep.Counters().AntiEntropyBelowHorizon == 0 {
				t.Errorf("B's counters %+v: want the record counted below the horizon", c.Node("B").Rep.Counters())
			}
		})
	}
}
