package clustermap_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"plait/protocol/clustermap"
)

// withLocks is a document of nodes A, B and C with the given fields (JSON members).
func withLocks(fields string) string {
	return `{"generation":1,"nodes":[{"name":"A"},{"name":"B"},{"name":"C"}],` + fields + `}`
}

// namesDoc is a document of nodes n0000..n(nodes-1) whose field lists count names of
// prefix: lock homes (prefix n) or fenced tables (any other prefix).
func namesDoc(field string, nodes, count int, prefix string) string {
	var b strings.Builder
	b.WriteString(`{"generation":1,"nodes":[`)
	for i := range nodes {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"n%04d"}`, i)
	}
	fmt.Fprintf(&b, `],"%s":[`, field)
	for i := range count {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%s%04d"`, prefix, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// TestParseLocks: every rule of lock_homes and fenced_tables (contract §22.8) at its limit
// and one past it, with the code and what the message names; Parse and Decode answer
// alike.
func TestParseLocks(t *testing.T) {
	name64, name65 := strings.Repeat("t", 64), strings.Repeat("t", 65)
	for _, c := range []struct {
		name, doc string
		code      string // "" when accepted
		mention   string
	}{
		{"the contract's example", `{"fenced_tables":["stock","balances"],"generation":4,"lock_homes":["C","A"],"nodes":[{"name":"A"},{"name":"B"},{"name":"C"}]}`, "", ""},
		{"no homes", withLocks(`"lock_homes":[]`), "", ""},
		{"64 homes", namesDoc("lock_homes", clustermap.MaxLockHomes+1, clustermap.MaxLockHomes, "n"), "", ""},
		{"65 homes", namesDoc("lock_homes", clustermap.MaxLockHomes+1, clustermap.MaxLockHomes+1, "n"), "bad-lock-homes", "lists 65 nodes, over the 64 allowed"},
		{"homes not an array", withLocks(`"lock_homes":{"A":1}`), "bad-lock-homes", "lock_homes is an object"},
		{"homes a string", withLocks(`"lock_homes":"A"`), "bad-lock-homes", "lock_homes is a string"},
		{"homes null", withLocks(`"lock_homes":null`), "bad-lock-homes", "lock_homes is null"},
		{"homes without nodes", `{"generation":1,"lock_homes":["A"]}`, "bad-lock-homes", "no member list"},
		{"no homes without nodes", `{"generation":1,"lock_homes":[]}`, "bad-lock-homes", "no member list"},
		{"a home not a string", withLocks(`"lock_homes":["A",1]`), "bad-lock-homes", "lock_homes[1] is a number"},
		{"a home outside the name rule", withLocks(`"lock_homes":["A","a b"]`), "bad-name", `lock_homes[1]: the node name "a b"`},
		{"a home not a member", withLocks(`"lock_homes":["A","D"]`), "bad-lock-homes", "lock_homes[1]: the node D is not a member"},
		{"a member in another case", withLocks(`"lock_homes":["a"]`), "bad-lock-homes", "the node a is not a member"},
		{"a home twice", withLocks(`"lock_homes":["B","A","B"]`), "duplicate-node", "lists the node B twice ([0] and [2])"},

		{"no fenced table", withLocks(`"fenced_tables":[]`), "", ""},
		{"fenced tables without nodes", `{"fenced_tables":["t"],"generation":1}`, "", ""},
		{"1024 fenced tables", namesDoc("fenced_tables", 1, clustermap.MaxFencedTables, "t"), "", ""},
		{"1025 fenced tables", namesDoc("fenced_tables", 1, clustermap.MaxFencedTables+1, "t"), "too-many-tables", "fenced_tables lists 1025 tables"},
		{"fenced tables not an array", withLocks(`"fenced_tables":{"t":true}`), "bad-fenced-tables", "fenced_tables is an object"},
		{"a fenced table not a string", withLocks(`"fenced_tables":["t",["u"]]`), "bad-fenced-tables", "fenced_tables[1] is an array"},
		{"a fenced table of 64 bytes", withLocks(`"fenced_tables":["` + name64 + `"]`), "", ""},
		{"a fenced table of 65 bytes", withLocks(`"fenced_tables":["` + name65 + `"]`), "bad-name", name65},
		{"a fenced table with a slash", withLocks(`"fenced_tables":["a/b"]`), "bad-name", `fenced_tables[0]: the table name "a/b"`},
		{"an empty fenced table", withLocks(`"fenced_tables":[""]`), "bad-name", `""`},
		{"a fenced table twice", withLocks(`"fenced_tables":["t","u","t"]`), "bad-fenced-tables", "lists the table t twice ([0] and [2])"},

		// The order of the checks: placement, then lock_homes, then fenced_tables.
		{"bad homes before bad fenced tables", withLocks(`"fenced_tables":7,"lock_homes":7`), "bad-lock-homes", "lock_homes is a number"},
		{"a bad placement before bad homes", withLocks(`"lock_homes":7,"placement":7`), "bad-placement", "placement is a number"},
		{"a bad node before bad homes", `{"generation":1,"lock_homes":["x"],"nodes":[{"name":"a b"}]}`, "bad-name", "nodes[0]"},
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
				if !slices.Equal(m.LockHomes, dm.LockHomes) || !slices.Equal(m.FencedTables, dm.FencedTables) {
					t.Errorf("Parse read %v %v, Decode %v %v", m.LockHomes, m.FencedTables, dm.LockHomes, dm.FencedTables)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted it (%d homes, %d fenced tables); want %s", len(m.LockHomes), len(m.FencedTables), c.code)
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

// TestLocksRead: what Parse reads of the lock fields: each list sorted, an empty one nil;
// Fenced answers by the list, byte for byte.
func TestLocksRead(t *testing.T) {
	m, err := clustermap.Parse([]byte(withLocks(`"fenced_tables":["u","s"],"lock_homes":["C","A"]`)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.LockHomes, []string{"A", "C"}) || !slices.Equal(m.FencedTables, []string{"s", "u"}) {
		t.Errorf("LockHomes %v, FencedTables %v; want [A C] and [s u], sorted", m.LockHomes, m.FencedTables)
	}
	for table, fenced := range map[string]bool{"s": true, "u": true, "t": false, "S": false, "": false, "uu": false} {
		if got := m.Fenced([]byte(table)); got != fenced {
			t.Errorf("Fenced(%q) = %v, want %v", table, got, fenced)
		}
	}
	for _, doc := range []string{withLocks(`"fenced_tables":[],"lock_homes":[]`), withLocks(`"placement":{}`), `{"generation":1}`} {
		m, err := clustermap.Parse([]byte(doc))
		if err != nil || m.LockHomes != nil || m.FencedTables != nil || m.Fenced([]byte("t")) {
			t.Errorf("%s: %v %v, %v; want no home and nothing fenced", doc, m.LockHomes, m.FencedTables, err)
		}
	}
}

// TestHome: a fixed vector of the rendezvous hash (protocol/SPEC.md, "A key's lock home"),
// computed once and pinned: any change to the hash's input moves some of these keys.
func TestHome(t *testing.T) {
	m, err := clustermap.Parse([]byte(withLocks(`"lock_homes":["C","A","B"]`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ table, key, home string }{
		{"users", "k0", "B"}, {"users", "k1", "B"}, {"users", "k2", "C"}, {"users", "k3", "C"},
		{"users", "k4", "B"}, {"users", "k5", "A"}, {"users", "k7", "C"},
		{"users", "", "B"}, {"users", "\x00", "A"}, {"users", "balance/42", "A"},
	} {
		if got := m.Home([]byte(c.table), []byte(c.key)); got != c.home {
			t.Errorf("Home(%q, %q) = %q, want %q", c.table, c.key, got, c.home)
		}
	}
	if got := (clustermap.Map{Generation: 1}).Home([]byte("users"), []byte("k0")); got != "" {
		t.Errorf("no homes: Home = %q, want \"\"", got)
	}
	if got := (clustermap.Map{LockHomes: []string{"C"}}).Home([]byte("users"), []byte("k0")); got != "C" {
		t.Errorf("one home: Home = %q, want C", got)
	}
}

// TestHomeRemoval: taking one home out of the list moves only the keys that home had,
// and adding it back moves them back; no other key changes home.
func TestHomeRemoval(t *testing.T) {
	params := gopter.DefaultTestParametersWithSeed(20260502)
	params.MinSuccessfulTests = 300
	props := gopter.NewProperties(params)
	props.Property("a removed home's keys move, no other", prop.ForAll(
		func(picks []uint8, removed uint8, table string, keys [][]byte) bool {
			var homes []string
			for _, p := range picks {
				homes = append(homes, fmt.Sprintf("n%d", p%24))
			}
			slices.Sort(homes)
			homes = slices.Compact(homes)
			if len(homes) < 2 {
				return true
			}
			gone := homes[int(removed)%len(homes)]
			all := clustermap.Map{LockHomes: homes}
			rest := clustermap.Map{LockHomes: slices.DeleteFunc(slices.Clone(homes), func(h string) bool { return h == gone })}
			for _, k := range keys {
				before, after := all.Home([]byte(table), k), rest.Home([]byte(table), k)
				if !slices.Contains(homes, before) || after == gone || after == "" {
					t.Logf("homes %v, key %x: %q then %q without %s", homes, k, before, after, gone)
					return false
				}
				if before != gone && after != before {
					t.Logf("homes %v without %s: key %x moved from %s to %s", homes, gone, k, before, after)
					return false
				}
			}
			return true
		},
		gen.SliceOfN(6, gen.UInt8()),
		gen.UInt8(),
		gen.OneConstOf("t", "users", "orders.v2"),
		gen.SliceOfN(40, gen.SliceOf(gen.UInt8())),
	))
	props.TestingRun(t)
}

// TestCheckSuccessor: a map that follows one fencing a table must fence it too; a map
// that does not follow (the same generation or lower) is Decide's, not refused here.
func TestCheckSuccessor(t *testing.T) {
	fences := func(gen int, tables string) clustermap.Map {
		return mapOf(t, fmt.Sprintf(`{"fenced_tables":[%s],"generation":%d}`, tables, gen))
	}
	for _, c := range []struct {
		name       string
		prev, next clustermap.Map
		mention    string // "" when nil
	}{
		{"no map held", clustermap.Map{}, fences(1, ``), ""},
		{"nothing fenced", fences(2, ``), fences(3, ``), ""},
		{"a table fenced", fences(2, ``), fences(3, `"t"`), ""},
		{"fenced still", fences(2, `"t","u"`), fences(3, `"u","t"`), ""},
		{"more fenced", fences(2, `"t"`), fences(3, `"t","u"`), ""},
		{"one unfenced", fences(2, `"t","u"`), fences(3, `"t"`), `generation 2 fences the table "u" and generation 3 does not`},
		{"all unfenced", fences(2, `"t","u"`), mapOf(t, `{"generation":9}`), `the table "t" (and 1 more) and generation 9`},
		{"unfenced, another table fenced", fences(2, `"t"`), fences(3, `"u"`), `the table "t" and`},
		{"the same generation", fences(2, `"t"`), fences(2, ``), ""},
		{"a lower generation", fences(2, `"t"`), fences(1, ``), ""},
	} {
		err := clustermap.CheckSuccessor(c.prev, c.next)
		switch {
		case c.mention == "" && err != nil:
			t.Errorf("%s: CheckSuccessor = %v, want nil", c.name, err)
		case c.mention != "" && (err == nil || err.Code != clustermap.CodeUnfenced || !strings.Contains(err.Message, c.mention)):
			t.Errorf("%s: CheckSuccessor = %v, want unfenced naming %s", c.name, err, c.mention)
		}
	}
}
