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

func mapOf(t testing.TB, doc string) clustermap.Map {
	t.Helper()
	m, err := clustermap.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse(%s): %v", doc, err)
	}
	return m
}

// TestDecide: the four outcomes, by generation alone.
func TestDecide(t *testing.T) {
	g2 := mapOf(t, `{"generation":2,"nodes":[{"name":"A"}]}`)
	g2again := mapOf(t, `{ "nodes" : [ {"name":"A"} ], "generation" : 2 }`)
	g2other := mapOf(t, `{"generation":2,"nodes":[{"name":"B"}]}`)
	g3 := mapOf(t, `{"generation":3}`)
	for _, c := range []struct {
		name              string
		current, incoming clustermap.Map
		want              clustermap.Decision
	}{
		{"none held", clustermap.Map{}, g2, clustermap.Adopt},
		{"a higher generation", g2, g3, clustermap.Adopt},
		{"the same map", g2, g2, clustermap.Same},
		{"the same map written otherwise", g2, g2again, clustermap.Same},
		{"another map of the generation", g2, g2other, clustermap.Conflict},
		{"and the other way round", g2other, g2, clustermap.Conflict},
		{"a lower generation", g3, g2, clustermap.Stale},
	} {
		if got := clustermap.Decide(c.current, c.incoming); got != c.want {
			t.Errorf("%s: Decide = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestDecideOrderIndependent: nodes that meet the same maps in different orders end on
// the same one, the highest generation: each meets every map of a set of distinct
// generations, in its own order, adopting as Decide says.
func TestDecideOrderIndependent(t *testing.T) {
	params := gopter.DefaultTestParametersWithSeed(20260401)
	params.MinSuccessfulTests = 500
	props := gopter.NewProperties(params)
	// A set of generations (duplicates dropped) and, per map, a sort key: the order one
	// node meets them in.
	gens := gen.SliceOf(gen.UInt64Range(1, 1<<63-1)).SuchThat(func(g []uint64) bool { return len(g) > 0 })
	props.Property("any order of distinct generations ends on the highest", prop.ForAll(
		func(generations []uint64, order []uint16) bool {
			slices.Sort(generations)
			generations = slices.Compact(generations)
			maps := make([]clustermap.Map, len(generations))
			for i, g := range generations {
				maps[i] = mapOf(t, fmt.Sprintf(`{"generation":%d,"nodes":[{"name":"n%d"}]}`, g, i))
			}
			// The permutation: maps sorted by their sort keys (order, cycled).
			idx := make([]int, len(maps))
			for i := range idx {
				idx[i] = i
			}
			slices.SortStableFunc(idx, func(a, b int) int {
				return int(order[a%len(order)]) - int(order[b%len(order)])
			})
			var held clustermap.Map
			for _, i := range idx {
				if clustermap.Decide(held, maps[i]) == clustermap.Adopt {
					held = maps[i]
				}
			}
			highest := maps[len(maps)-1]
			return held.Generation == highest.Generation && string(held.Doc) == string(highest.Doc)
		},
		gens, gen.SliceOfN(16, gen.UInt16())))
	props.TestingRun(t)
}

// TestNewer: the higher stamp wins; of equal stamps the entry held stays.
func TestNewer(t *testing.T) {
	have := clustermap.Member{Name: "A", MaxVersion: 4, Stamp: 10}
	for _, c := range []struct {
		in   clustermap.Member
		want bool
	}{
		{clustermap.Member{Name: "A", MaxVersion: 3, Stamp: 11}, true}, // a downgrade, reported later
		{clustermap.Member{Name: "A", MaxVersion: 5, Stamp: 10}, false},
		{clustermap.Member{Name: "A", MaxVersion: 5, Stamp: 9}, false},
	} {
		if got := clustermap.Newer(have, c.in); got != c.want {
			t.Errorf("Newer(%+v, %+v) = %v, want %v", have, c.in, got, c.want)
		}
	}
}

// TestBelowV4AndRequireV4: the members not known at version 4, sorted, and the gate.
func TestBelowV4AndRequireV4(t *testing.T) {
	m := mapOf(t, `{"generation":5,"nodes":[{"name":"D"},{"name":"B"},{"name":"A"},{"name":"C"}]}`)
	members := map[string]clustermap.Member{
		"A": {Name: "A", MaxVersion: 4, Stamp: 1},
		"B": {Name: "B", MaxVersion: 3, Stamp: 1},
		"C": {Name: "C", MaxVersion: 5, Stamp: 1},
		"E": {Name: "E", MaxVersion: 2, Stamp: 1}, // not a member: not counted
	}
	if got := clustermap.BelowV4(m, members); !slices.Equal(got, []string{"B", "D"}) {
		t.Errorf("BelowV4 = %q, want [B D] (B at 3, D unknown)", got)
	}
	err := clustermap.RequireV4(m, members)
	if err == nil || err.Code != "cluster-not-v4" || !strings.Contains(err.Message, "B, D") {
		t.Errorf("RequireV4 = %v; want cluster-not-v4 naming B, D", err)
	}

	members["B"] = clustermap.Member{Name: "B", MaxVersion: 4, Stamp: 2}
	members["D"] = clustermap.Member{Name: "D", MaxVersion: 4, Stamp: 2}
	if got := clustermap.BelowV4(m, members); got != nil {
		t.Errorf("BelowV4 with every member at 4 = %q, want nil", got)
	}
	if err := clustermap.RequireV4(m, members); err != nil {
		t.Errorf("RequireV4 with every member at 4 = %v, want nil", err)
	}

	noList := mapOf(t, `{"generation":6}`)
	if got := clustermap.BelowV4(noList, members); got != nil {
		t.Errorf("BelowV4 of a map without nodes = %q, want nil", got)
	}
	if err := clustermap.RequireV4(noList, members); err == nil || err.Code != "cluster-not-v4" || !strings.Contains(err.Message, "no member list") {
		t.Errorf("RequireV4 of a map without nodes = %v; want cluster-not-v4 saying it has no member list", err)
	}
	if err := clustermap.RequireV4(clustermap.Map{}, members); err == nil || err.Code != "cluster-not-v4" || !strings.Contains(err.Message, "no cluster map") {
		t.Errorf("RequireV4 with no map = %v; want cluster-not-v4 saying there is none", err)
	}

	big := mapOf(t, nodesDoc(20))
	err = clustermap.RequireV4(big, nil)
	if err == nil || !strings.Contains(err.Message, "20 of") || !strings.Contains(err.Message, "n0015 and 4 more") || strings.Contains(err.Message, "n0016") {
		t.Errorf("RequireV4 with 20 below = %v; want the first 16 named and 4 more counted", err)
	}
}
