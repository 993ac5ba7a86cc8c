package sim

import (
	"encoding/json"
	"flag"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"plait/protocol/store"
	"plait/protocol/wire"
)

var faninLeaves = flag.String("fanin.leaves", "10", "TestFanInCost: the leaf counts, comma-separated (BENCHMARKS.md: 10,100,300,1000)")
var faninPeers = flag.Int("fanin.peers", 100, "TestFanInCost: the largest leaf count also run as direct peers (their run grows with peers × origins)")

// TestFanInCost measures what leaves cost a core node (docs/design.md §27, BENCHMARKS.md
// §18), with the leaves behind fan-in hubs against the same leaves as direct peers: a core
// of 3 nodes (a mesh), two relays that each dial two core nodes, and N nodes that each dial
// one relay and write twice (each core node and relay writes once). With hubs the relays are hubs (MaxLeaves), the N nodes their
// leaves, under a map whose nodes are the core and the relays, with a leaf window; as peers
// the relays are ordinary nodes and the N nodes ordinary peers, under no map. Once every
// write is on every core node and 2 s more have passed, it reads core node A's cost: its
// vector's entries, its status's origin and peer rows, its status's size as JSON, its
// store's bytes (records and logs), and its replica's memory (the bytes reachable from
// it, the store's apart: deepSize). It
// prints the table with -v, a row as each form ends, and asserts no size or timing, only that every write arrived
// and, with hubs, that A's vector names the members alone.
//
//	go test ./conformance/sim -run TestFanInCost -count=1 -v -timeout 60m -fanin.leaves 10,100,300,1000 -fanin.peers 300
func TestFanInCost(t *testing.T) {
	t.Log("\n| leaves | core node A: vector entries | status rows (origins + peers) | status, JSON bytes | store bytes | replica memory, bytes | the run (wall, messages) |\n|---|---|---|---|---|---|---|")
	for _, s := range strings.Split(*faninLeaves, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			t.Fatalf("-fanin.leaves: %q is not a positive count", s)
		}
		forms := []bool{true}
		if n <= *faninPeers {
			forms = append(forms, false)
		}
		for _, hubs := range forms {
			begin := time.Now()
			m := measureFanIn(t, n, hubs)
			form := "as direct peers"
			if hubs {
				form = "behind 2 hubs"
			}
			t.Logf("| %d %s | %d | %d | %d | %d | %d | %.1f s, %d messages |",
				n, form, m.vector, m.rows, m.statusBytes, m.storeBytes, m.heap, time.Since(begin).Seconds(), m.messages)
		}
	}
}

type faninCost struct {
	vector, rows, statusBytes, storeBytes, messages int
	heap                                            int64
}

// measureFanIn runs one form with n leaves and returns core node A's cost.
func measureFanIn(t *testing.T, n int, hubs bool) faninCost {
	t.Helper()
	c := New(Options{Seed: 1, MinDelay: time.Millisecond, MaxDelay: 3 * time.Millisecond})
	core, relays := []string{"A", "B", "C"}, []string{"H1", "H2"}
	for _, name := range core {
		if err := c.AddNode(name, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range relays {
		if err := c.addNode(name, 0, nil, func(nd *Node) {
			if hubs {
				nd.MaxLeaves = n
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	connect := func(from, to string) {
		if err := c.Connect(from, to); err != nil {
			t.Fatal(err)
		}
	}
	connect("B", "A")
	connect("C", "A")
	connect("C", "B")
	connect("H1", "A")
	connect("H1", "B")
	connect("H2", "B")
	connect("H2", "C")
	members := append(append([]string{}, core...), relays...)
	if hubs {
		// The map, on every member before a leaf starts: a hub takes leaves only once every
		// member holds it.
		var nodes []string
		for _, m := range members {
			nodes = append(nodes, fmt.Sprintf(`{"name":%q}`, m))
		}
		doc := []byte(`{"generation":1,"leaf_window":60,"nodes":[` + strings.Join(nodes, ",") + `]}`)
		for _, m := range members {
			if _, err := c.PublishMap(m, doc); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Each member writes once: their origins are in every vector in both forms.
	for _, m := range members {
		if _, err := c.Write(m, []wire.Op{{Kind: wire.OpPut, Table: []byte("m"), Key: []byte(m), Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	c.Run(time.Second)
	var leaves []string
	for i := range n {
		name, relay := fmt.Sprintf("L%04d", i), relays[i%2]
		if err := c.addNode(name, 0, nil, func(nd *Node) {
			if hubs {
				nd.Hub = relay
			}
		}); err != nil {
			t.Fatal(err)
		}
		connect(name, relay)
		leaves = append(leaves, name)
	}
	c.Run(2 * time.Second)
	const writes = 2
	for w := range writes {
		for _, l := range leaves {
			key := fmt.Appendf(nil, "%s-%d", l, w)
			if _, err := c.Write(l, []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: key, Value: []byte("v")}}); err != nil {
				t.Fatal(err)
			}
		}
		c.Run(200 * time.Millisecond)
	}
	// Every write is on every core node once A, B and C hold 2n records of t.
	held := func(name string) int {
		count := 0
		_ = c.Node(name).Store.Scan([]byte("t"), nil, func(store.Record) bool { count++; return true })
		return count
	}
	deadline := c.Now().Add(10 * time.Minute)
	for held("A") < writes*n || held("B") < writes*n || held("C") < writes*n {
		if c.Now().After(deadline) {
			t.Fatalf("%d leaves (hubs %v): after 10 virtual minutes A, B, C hold %d, %d, %d of %d writes", n, hubs, held("A"), held("B"), held("C"), writes*n)
		}
		c.Run(500 * time.Millisecond)
	}
	c.Run(2 * time.Second)
	a := c.Node("A")
	var m faninCost
	vec, _ := a.Store.Vector() // the in-memory store's reads never fail
	m.vector = len(vec.Entries())
	if hubs && m.vector != len(members) {
		t.Errorf("%d leaves behind hubs: A's vector has %d entries, want the %d members'", n, m.vector, len(members))
	}
	st := a.Rep.Status(a.clock(c))
	m.rows = len(st.Origins) + len(st.Peers)
	doc, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	m.statusBytes, m.storeBytes, m.messages = len(doc), storeBytes(a.Store), c.messages
	// The simulator's wrappers of A's sessions point at the cluster and its nodes, and the
	// replica at A's store: none of them is counted.
	apart := map[uintptr]bool{reflect.ValueOf(c).Pointer(): true}
	for _, nd := range c.nodes {
		apart[reflect.ValueOf(nd).Pointer()], apart[reflect.ValueOf(nd.Store).Pointer()] = true, true
	}
	m.heap = deepSize(reflect.ValueOf(a.Rep), apart)
	return m
}

// deepSize is the bytes reachable from v that seen does not hold yet (what is counted
// apart is put in it first), each allocation once: pointed-to values,
// slices' backing arrays to their capacity, strings, and maps as their entries (Go's
// buckets add to it). Functions are not followed: a closure's captures are the
// simulator's.
func deepSize(v reflect.Value, seen map[uintptr]bool) int64 {
	var size int64
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			size += int64(v.Type().Elem().Size())
			walk(v.Elem())
		case reflect.Interface:
			if v.IsNil() {
				return
			}
			e := v.Elem()
			if e.Kind() == reflect.Pointer {
				walk(e)
				return
			}
			size += int64(e.Type().Size())
			walk(e)
		case reflect.Slice:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			size += int64(v.Cap()) * int64(v.Type().Elem().Size())
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.String:
			size += int64(v.Len())
		case reflect.Map:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			kv := int64(v.Type().Key().Size() + v.Type().Elem().Size())
			size += int64(v.Len()) * kv
			for it := v.MapRange(); it.Next(); {
				walk(it.Key())
				walk(it.Value())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		case reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		}
	}
	walk(v)
	return size
}
