package clustermap_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"plait/protocol/clustermap"
)

// placedDoc is a document of generation 2 whose nodes are n0000..n(nodes-1), with tables
// t0000..t(tables-1) each placed on every node, listed in reverse order.
func placedDoc(tables, nodes int) string {
	var b strings.Builder
	b.WriteString(`{"generation":2,"nodes":[`)
	for i := range nodes {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"n%04d"}`, i)
	}
	b.WriteString(`],"placement":{`)
	for t := range tables {
		if t > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"t%04d":[`, t)
		for i := nodes - 1; i >= 0; i-- {
			fmt.Fprintf(&b, `"n%04d"`, i)
			if i > 0 {
				b.WriteByte(',')
			}
		}
		b.WriteByte(']')
	}
	b.WriteString(`}}`)
	return b.String()
}

// withPlacement is a document of nodes A, B and C with the placement p (JSON).
func withPlacement(p string) string {
	return `{"generation":1,"nodes":[{"name":"A"},{"name":"B"},{"name":"C"}],"placement":` + p + `}`
}

// TestParsePlacement: every rule of contract §23.1 at its limit and one past it, with the
// code and what the message names; Parse and Decode answer alike.
func TestParsePlacement(t *testing.T) {
	name64, name65 := strings.Repeat("t", 64), strings.Repeat("t", 65)
	// 1025 entries in one list: 1024 members and one of them again.
	over := placedDoc(1, 1024)
	over = strings.Replace(over, `"t0000":["n1023",`, `"t0000":["n1023","n1023",`, 1)
	for _, c := range []struct {
		name, doc string
		code      string // "" when accepted
		mention   string
	}{
		{"the contract's example", `{"generation":3,"nodes":[{"name":"A"},{"name":"B"},{"name":"C"}],"placement":{"orders":["A","B"],"stock":["C"]}}`, "", ""},
		{"an empty placement", withPlacement(`{}`), "", ""},
		{"1024 tables", placedDoc(clustermap.MaxPlacedTables, 1), "", ""},
		{"1025 tables", placedDoc(clustermap.MaxPlacedTables+1, 1), "too-many-tables", "1025 tables"},
		{"a list of 1024 nodes", placedDoc(1, clustermap.MaxNodes), "", ""},
		{"a list of 1025 nodes", over, "bad-placement", "lists 1025 nodes"},
		{"an empty list", withPlacement(`{"t":[]}`), "bad-placement", "table t lists 0 nodes"},
		{"a table name of 64 bytes", withPlacement(`{"` + name64 + `":["A"]}`), "", ""},
		{"a table name of 65 bytes", withPlacement(`{"` + name65 + `":["A"]}`), "bad-name", name65},
		{"a table name with a slash", withPlacement(`{"a/b":["A"]}`), "bad-name", `"a/b"`},
		{"an empty table name", withPlacement(`{"":["A"]}`), "bad-name", `""`},
		{"not an object", withPlacement(`["A"]`), "bad-placement", "placement is an array"},
		{"null", withPlacement(`null`), "bad-placement", "placement is null"},
		{"a list not an array", withPlacement(`{"t":"A"}`), "bad-placement", "table t is a string"},
		{"a name not a string", withPlacement(`{"t":["A",1]}`), "bad-placement", "[1] is a number"},
		{"a node name outside the rule", withPlacement(`{"t":["a b"]}`), "bad-name", `"a b"`},
		{"not a member", withPlacement(`{"s":["A"],"t":["A","D"]}`), "bad-placement", "table t: the node D is not a member"},
		{"a member in another case", withPlacement(`{"t":["a"]}`), "bad-placement", "node a is not a member"},
		{"a node twice", withPlacement(`{"t":["B","A","B"]}`), "duplicate-node", "lists the node B twice ([0] and [2])"},
		{"without nodes", `{"generation":1,"placement":{"t":["A"]}}`, "bad-placement", "no member list"},
		{"empty without nodes", `{"generation":1,"placement":{}}`, "bad-placement", "no member list"},
		{"a placement before a bad node", `{"generation":1,"nodes":[{"name":"a b"}],"placement":{"t":["x"]}}`, "bad-name", "nodes[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := clustermap.Parse([]byte(c.doc))
			canon, cerr := clustermap.Canonical([]byte(c.doc))
			if cerr != nil {
				t.Fatalf("Canonical: %v", cerr)
			}
			dm, derr := clustermap.Decode(canon)
			if c.code == "" {
				if err != nil || derr != nil {
					t.Fatalf("Parse: %v; Decode: %v; want both to accept it", err, derr)
				}
				if !maps.EqualFunc(m.Placement, dm.Placement, slices.Equal) {
					t.Errorf("Parse read %v, Decode %v", m.Placement, dm.Placement)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted it (placement of %d tables); want %s", len(m.Placement), c.code)
			}
			if err.Code != c.code || !strings.Contains(err.Message, c.mention) {
				t.Errorf("Parse: %v; want code %s and a message naming %q", err, c.code, c.mention)
			}
			if e, ok := derr.(*clustermap.Error); !ok || e.Code != c.code {
				t.Errorf("Decode: %v; want code %s as Parse", derr, c.code)
			}
		})
	}
}

// TestPlacementRead: what Parse reads of a placement: each list sorted, an empty one nil.
func TestPlacementRead(t *testing.T) {
	m, err := clustermap.Parse([]byte(withPlacement(`{"t":["C","A"],"u":["B"]}`)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"t": {"A", "C"}, "u": {"B"}}
	if !maps.EqualFunc(m.Placement, want, slices.Equal) {
		t.Errorf("Placement = %v, want %v", m.Placement, want)
	}
	if m, err := clustermap.Parse([]byte(withPlacement(`{}`))); err != nil || m.Placement != nil {
		t.Errorf("an empty placement: %v, %v; want nil (nothing placed)", m.Placement, err)
	}
	if m, err := clustermap.Parse([]byte(`{"generation":1,"nodes":[{"name":"A"}]}`)); err != nil || m.Placement != nil {
		t.Errorf("no placement: %v, %v; want nil", m.Placement, err)
	}
}

// TestCarries: a placed table is carried by its list only, any other table by every node,
// and every table by every node of a map without placement (or no map).
func TestCarries(t *testing.T) {
	m, err := clustermap.Parse([]byte(withPlacement(`{"t":["C","A"],"u":["B"]}`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		node, table   string
		carries, plac bool
	}{
		{"A", "t", true, true}, {"B", "t", false, true}, {"C", "t", true, true},
		{"A", "u", false, true}, {"B", "u", true, true}, {"C", "u", false, true},
		{"A", "v", true, false}, {"B", "v", true, false}, {"D", "v", true, false},
		{"D", "t", false, true}, {"a", "t", false, true}, {"", "t", false, true},
		{"A", "T", true, false}, // table names are case-sensitive
	} {
		if got := m.Carries(c.node, []byte(c.table)); got != c.carries {
			t.Errorf("Carries(%s, %s) = %v, want %v", c.node, c.table, got, c.carries)
		}
		if got := m.Placed([]byte(c.table)); got != c.plac {
			t.Errorf("Placed(%s) = %v, want %v", c.table, got, c.plac)
		}
	}
	for _, none := range []clustermap.Map{{}, {Generation: 1}} {
		if !none.Carries("A", []byte("t")) || none.Placed([]byte("t")) {
			t.Errorf("a map without placement (%+v): Carries false or Placed true", none)
		}
	}
}

// TestCheckTables: a transaction's tables pass when all are unplaced or all placed on the
// same nodes, in any order, and are refused with mixed-placement otherwise.
func TestCheckTables(t *testing.T) {
	m, err := clustermap.Parse([]byte(withPlacement(`{"t":["C","A"],"t2":["A","C"],"u":["B"],"w":["A","B","C"]}`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tables  []string
		mention string // "" when it passes
	}{
		{[]string{"t"}, ""},
		{[]string{"x"}, ""},
		{[]string{"x", "y", "x"}, ""},
		{[]string{"t", "t2", "t"}, ""}, // the same nodes, listed in another order
		{[]string{"t", "u"}, `"t" (carried by A, C) and "u" (carried by B)`},
		{[]string{"t", "t2", "u"}, `"u" (carried by B)`},
		{[]string{"x", "t"}, `"x" (carried by every node) and "t" (carried by A, C)`},
		{[]string{"t", "x"}, `"x" (carried by every node)`},
		// Placed on every member is still placed: a member added later would not carry it.
		{[]string{"w", "x"}, `"w" (carried by A, B, C) and "x" (carried by every node)`},
	} {
		tables := make([][]byte, len(c.tables))
		for i, s := range c.tables {
			tables[i] = []byte(s)
		}
		err := m.CheckTables(tables)
		switch {
		case c.mention == "" && err != nil:
			t.Errorf("CheckTables(%v) = %v, want nil", c.tables, err)
		case c.mention != "" && (err == nil || err.Code != "mixed-placement" || !strings.Contains(err.Message, c.mention)):
			t.Errorf("CheckTables(%v) = %v, want mixed-placement naming %s", c.tables, err, c.mention)
		}
	}
	if err := (clustermap.Map{Generation: 1}).CheckTables([][]byte{[]byte("t"), []byte("u")}); err != nil {
		t.Errorf("without placement: %v", err)
	}
}
