package clustermap_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"plait/protocol/clustermap"
)

// nodesDoc is a document of generation 1 listing n nodes named n0000, n0001, ...
func nodesDoc(n int) string {
	var b strings.Builder
	b.WriteString(`{"generation":1,"nodes":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"n%04d"}`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// padded is doc followed by spaces up to size bytes.
func padded(doc string, size int) string { return doc + strings.Repeat(" ", size-len(doc)) }

func nodeWithAPI(api string) string {
	return `{"generation":1,"nodes":[{"name":"A","api":"` + api + `"}]}`
}

// TestParse: every code of contract §22.2 at its limit and one past it, and the message
// naming what is wrong.
func TestParse(t *testing.T) {
	name64, name65 := strings.Repeat("a", 64), strings.Repeat("a", 65)
	url1024 := "https://a.example/" + strings.Repeat("p", 1024-len("https://a.example/"))
	for _, c := range []struct {
		name, doc string
		code      string // "" when Parse accepts it
		mention   string // what the message must name
	}{
		{"the contract's example", `{"generation":2,"nodes":[{"name":"A","api":"https://a.example:7401"},{"name":"B"}]}`, "", ""},
		{"no member list", `{"generation":1}`, "", ""},

		{"exactly MaxBytes", padded(`{"generation":1}`, clustermap.MaxBytes), "", ""},
		{"MaxBytes+1", padded(`{"generation":1}`, clustermap.MaxBytes+1), "map-too-large", "65537"},
		{"MaxBytes+1 of garbage, checked before parsing", strings.Repeat("x", clustermap.MaxBytes+1), "map-too-large", ""},

		{"not JSON", `{"generation":1`, "bad-json", ""},
		{"empty", ``, "bad-json", "empty"},
		{"an array", `[{"generation":1}]`, "bad-json", "not a JSON object"},
		{"two objects", `{"generation":1}{"generation":2}`, "bad-json", "more than one"},
		{"something after", `{"generation":1} x`, "bad-json", ""},
		{"not UTF-8", "{\"generation\":1,\"x\":\"\xff\"}", "bad-json", "UTF-8"},
		{"a key twice", `{"generation":1,"generation":2}`, "bad-json", `"generation" appears twice`},
		{"a key twice in a node", `{"generation":1,"nodes":[{"name":"A","name":"B"}]}`, "bad-json", `nodes[0]: the key "name" appears twice`},
		{"a key twice deep down", `{"generation":1,"x":[{"y":{"z":1,"z":1}}]}`, "bad-json", `x[0].y: the key "z" appears twice`},
		{"generation a string", `{"generation":"1"}`, "bad-json", "generation is a string"},
		{"generation null", `{"generation":null}`, "bad-json", "generation is null"},
		{"nodes an object", `{"generation":1,"nodes":{"name":"A"}}`, "bad-json", "nodes is an object"},
		{"nodes null", `{"generation":1,"nodes":null}`, "bad-json", "nodes is null"},
		{"a node a string", `{"generation":1,"nodes":["A"]}`, "bad-json", "nodes[0] is a string"},
		{"a name a number", `{"generation":1,"nodes":[{"name":1}]}`, "bad-json", "nodes[0].name is a number"},
		{"an api a boolean", `{"generation":1,"nodes":[{"name":"A","api":true}]}`, "bad-json", "nodes[0].api is a boolean"},

		{"an unknown field", `{"generation":1,"colour":"red"}`, "unknown-field", `"colour"`},
		{"lock_homes, a field of this build", `{"generation":1,"lock_homes":[],"nodes":[{"name":"A"}]}`, "", ""},
		{"fenced_tables, a field of this build", `{"generation":1,"fenced_tables":[]}`, "", ""},
		{"an unknown field beside the lock fields", `{"fenced_tables":[],"generation":1,"lock_home":["A"]}`, "unknown-field", `"lock_home"`},
		{"an unknown field of a node", `{"generation":1,"nodes":[{"name":"A"},{"name":"B","zone":"x"}]}`, "unknown-field", `nodes[1] has an unknown field "zone"`},
		{"an unknown field before a bad generation", `{"generation":0,"x":1}`, "unknown-field", `"x"`},

		{"generation 2^63-1", `{"generation":9223372036854775807}`, "", ""},
		{"generation 2^63", `{"generation":9223372036854775808}`, "bad-generation", "9223372036854775808"},
		{"generation 2^64", `{"generation":18446744073709551616}`, "bad-generation", "above"},
		{"generation 1", `{"generation":1}`, "", ""},
		{"generation 0", `{"generation":0}`, "bad-generation", "is 0"},
		{"generation -1", `{"generation":-1}`, "bad-generation", "negative"},
		{"generation 1.0", `{"generation":1.0}`, "bad-generation", "not an integer"},
		{"generation 1e3", `{"generation":1e3}`, "bad-generation", "not an integer"},
		{"no generation", `{"nodes":[{"name":"A"}]}`, "bad-generation", "no generation"},

		{"a name of 64 bytes", `{"generation":1,"nodes":[{"name":"` + name64 + `"}]}`, "", ""},
		{"a name of 65 bytes", `{"generation":1,"nodes":[{"name":"` + name65 + `"}]}`, "bad-name", name65},
		{"an empty name", `{"generation":1,"nodes":[{"name":""}]}`, "bad-name", `""`},
		{"a name with a space", `{"generation":1,"nodes":[{"name":"A"},{"name":"b c"}]}`, "bad-name", `nodes[1]: the node name "b c"`},
		{"a name with a slash", `{"generation":1,"nodes":[{"name":"a/b"}]}`, "bad-name", `"a/b"`},
		{"no name", `{"generation":1,"nodes":[{"api":"http://a"}]}`, "bad-name", "nodes[0] has no name"},

		{"an api of 1024 bytes", nodeWithAPI(url1024), "", ""},
		{"an api of 1025 bytes", nodeWithAPI(url1024 + "p"), "bad-url", "1025 bytes"},
		{"an http api", nodeWithAPI("http://10.0.0.1:7401"), "", ""},
		{"an api with a path", nodeWithAPI("https://a.example/plait?x=1#y"), "", ""},
		{"an IPv6 api", nodeWithAPI("http://[::1]:7401"), "", ""},
		{"an empty api", nodeWithAPI(""), "bad-url", "node A"},
		{"an ftp api", nodeWithAPI("ftp://a.example"), "bad-url", `"ftp://a.example"`},
		{"an api without a scheme", nodeWithAPI("a.example:7401"), "bad-url", "node A"},
		{"an api without a host", nodeWithAPI("http://"), "bad-url", "no host"},
		{"an api with only a port", nodeWithAPI("http://:7401/x"), "bad-url", "no host"},
		{"an api with a space", nodeWithAPI("http://a b"), "bad-url", "space"},
		{"an api with user information", nodeWithAPI("https://u:p@a.example"), "bad-url", "user information"},
		{"an api on port 0", nodeWithAPI("http://a:0"), "bad-url", "port"},
		{"an api on port 65536", nodeWithAPI("http://a:65536"), "bad-url", "port"},
		{"an api on port 65535", nodeWithAPI("http://a:65535"), "", ""},
		{"an api with an empty port", nodeWithAPI("http://a:"), "bad-url", "empty port"},
		{"an api with a bare IPv6 address", nodeWithAPI("http://::1"), "bad-url", "host"},
		{"an api with an unclosed bracket", nodeWithAPI("http://[::1"), "bad-url", "bracket"},

		{"a name twice", `{"generation":1,"nodes":[{"name":"A"},{"name":"B"},{"name":"A"}]}`, "duplicate-node", "node A is listed twice"},
		{"names differing in case", `{"generation":1,"nodes":[{"name":"A"},{"name":"a"}]}`, "", ""},

		{"1024 nodes", nodesDoc(1024), "", ""},
		{"1025 nodes", nodesDoc(1025), "too-many-nodes", "1025"},
		{"no nodes", `{"generation":1,"nodes":[]}`, "too-many-nodes", "0 members"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := clustermap.Parse([]byte(c.doc))
			if c.code == "" {
				if err != nil {
					t.Fatalf("Parse refused it: %v", err)
				}
				want, cerr := clustermap.Canonical([]byte(c.doc))
				if cerr != nil || string(m.Doc) != string(want) {
					t.Errorf("Doc = %s, want the canonical form %s (%v)", m.Doc, want, cerr)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted it (generation %d, %d nodes); want %s", m.Generation, len(m.Nodes), c.code)
			}
			if err.Code != c.code || !strings.Contains(err.Message, c.mention) {
				t.Errorf("Parse: %v; want code %s and a message naming %q", err, c.code, c.mention)
			}
		})
	}
}

// TestParseFields: what Parse reads of an accepted document.
func TestParseFields(t *testing.T) {
	m, err := clustermap.Parse([]byte(` {"nodes":[{"name":"B"},{"api":"https://a.example:7401","name":"A"}], "generation":7}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []clustermap.Node{{Name: "B"}, {Name: "A", API: "https://a.example:7401"}}
	if m.Generation != 7 || !slices.Equal(m.Nodes, want) {
		t.Errorf("Parse = generation %d, nodes %+v; want 7, %+v (in the document's order)", m.Generation, m.Nodes, want)
	}
	if got := `{"generation":7,"nodes":[{"name":"B"},{"api":"https://a.example:7401","name":"A"}]}`; string(m.Doc) != got {
		t.Errorf("Doc = %s, want %s", m.Doc, got)
	}
	if m, err := clustermap.Parse([]byte(`{"generation":3}`)); err != nil || m.Nodes != nil {
		t.Errorf("a map without nodes: %+v, %v; want Nodes nil (no member list)", m, err)
	}
}

// TestDecode: a document from a peer must be canonical already; it keeps what this build
// does not know, and is checked where this build does know.
func TestDecode(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		ok        bool
		code      string
	}{
		{"canonical", `{"generation":2,"nodes":[{"api":"https://a.example:7401","name":"A"},{"name":"B"}]}`, true, ""},
		{"unknown fields kept", `{"colour":"red","generation":2,"zzz":[1.50,{"a":null}]}`, true, ""},
		{"lock fields", `{"fenced_tables":["t"],"generation":2,"lock_homes":["A"],"nodes":[{"name":"A"}]}`, true, ""},
		{"lock_homes checked", `{"fenced_tables":["t"],"generation":2,"lock_homes":7}`, false, "bad-lock-homes"},
		{"fenced_tables checked", `{"fenced_tables":["t","t"],"generation":2}`, false, "bad-fenced-tables"},
		{"a placement", `{"generation":2,"nodes":[{"name":"A"},{"name":"B"}],"placement":{"t":["B","A"]}}`, true, ""},
		{"a placement without nodes", `{"generation":2,"placement":{"x":["A"]}}`, false, "bad-placement"},
		{"a placement of a node not a member", `{"generation":2,"nodes":[{"name":"A"}],"placement":{"x":["B"]}}`, false, "bad-placement"},
		{"a placement not an object", `{"generation":2,"nodes":[{"name":"A"}],"placement":["A"]}`, false, "bad-placement"},
		{"a placement naming a node twice", `{"generation":2,"nodes":[{"name":"A"}],"placement":{"x":["A","A"]}}`, false, "duplicate-node"},
		{"a placed table with a bad name", `{"generation":2,"nodes":[{"name":"A"}],"placement":{"a b":["A"]}}`, false, "bad-name"},
		{"1025 placed tables", placedDoc(1025, 1), false, "too-many-tables"},
		{"an unknown field of a node kept", `{"generation":2,"nodes":[{"name":"A","zone":"eu"}]}`, true, ""},
		{"a space", `{"generation": 2}`, false, "bad-json"},
		{"a trailing newline", "{\"generation\":2}\n", false, "bad-json"},
		{"keys out of order", `{"nodes":[{"name":"A"}],"generation":2}`, false, "bad-json"},
		{"keys of a node out of order", `{"generation":2,"nodes":[{"name":"A","api":"http://a"}]}`, false, "bad-json"},
		{"an escape canonical form does not use", `{"generation":2,"x":"\u00e9"}`, false, "bad-json"},
		{"an escaped slash", `{"generation":2,"x":"a\/b"}`, false, "bad-json"},
		{"a key twice", `{"generation":2,"generation":2}`, false, "bad-json"},
		{"not an object", `[]`, false, "bad-json"},
		{"no generation", `{"nodes":[{"name":"A"}]}`, false, "bad-generation"},
		{"generation 0", `{"generation":0}`, false, "bad-generation"},
		{"generation 2^63", `{"generation":9223372036854775808}`, false, "bad-generation"},
		{"a bad name", `{"generation":2,"nodes":[{"name":"a b"}]}`, false, "bad-name"},
		{"a bad api", `{"generation":2,"nodes":[{"api":"ftp://a","name":"A"}]}`, false, "bad-url"},
		{"a name twice", `{"generation":2,"nodes":[{"name":"A"},{"name":"A"}]}`, false, "duplicate-node"},
		{"no nodes", `{"generation":2,"nodes":[]}`, false, "too-many-nodes"},
		{"1025 nodes", nodesDoc(1025), false, "too-many-nodes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := clustermap.Decode([]byte(c.doc))
			if c.ok {
				if err != nil {
					t.Fatalf("Decode refused it: %v", err)
				}
				if string(m.Doc) != c.doc || m.Generation != 2 {
					t.Errorf("Decode = %+v; want the document kept byte for byte at generation 2", m)
				}
				return
			}
			e, ok := err.(*clustermap.Error)
			if !ok || e.Code != c.code {
				t.Errorf("Decode: %v; want code %s", err, c.code)
			}
		})
	}
}
