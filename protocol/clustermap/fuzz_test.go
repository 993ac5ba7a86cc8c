package clustermap_test

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"plait/protocol/clustermap"
)

var fuzzSeeds = []string{
	`{"generation":2,"nodes":[{"name":"A","api":"https://a.example:7401"},{"name":"B"}]}`,
	`{"generation":1}`,
	` {"b":[1.50,1e3,-0,"é\u00e9<>&\u2028"],"a":{"z":null,"y":true}} `,
	`{"a":1,"a":2}`,
	`{"generation":9223372036854775808}`,
	`{"generation":1,"nodes":[{"name":"A","api":"http://[::1]:80"},{"name":"A"}]}`,
	`{"generation":1,"placement":{}}`,
	`{"generation":1,"nodes":[{"name":"A"},{"name":"B"}],"placement":{"t":["B","A"],"u":["A"]}}`,
	`{"generation":1,"nodes":[{"name":"A"}],"placement":{"t":["A","A"],"a b":[],"v":"A"}}`,
	`{"fenced_tables":["u","t"],"generation":1,"lock_homes":["B","A"],"nodes":[{"name":"A"},{"name":"B"}]}`,
	`{"generation":1,"lock_homes":["A","A","C"],"fenced_tables":["t","t",1]}`,
	`[]`, `{}{}`, `{"a":[1,]}`, "{\"\":\"\xff\"}", `{"":{"":[[[]]]}}`,
}

// FuzzCanonical: Canonical never panics; what it accepts is JSON that encoding/json reads
// to the same canonical form, and its output is its own canonical form; what it refuses
// that encoding/json reads as an object in UTF-8 is a key twice or a document too large.
func FuzzCanonical(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := clustermap.Canonical(doc)
		var obj map[string]any
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		stdErr := dec.Decode(&obj)
		if stdErr == nil {
			if _, e := dec.Token(); e != io.EOF {
				stdErr = errAfter
			}
		}
		if err != nil {
			e := err.(*clustermap.Error)
			if stdErr == nil && obj != nil && utf8.Valid(doc) && !strings.Contains(e.Message, "appears twice") && e.Code != "map-too-large" {
				t.Fatalf("Canonical refused %q (%v), which encoding/json reads as an object", doc, err)
			}
			return
		}
		if stdErr != nil || obj == nil {
			t.Fatalf("Canonical accepted %q, which encoding/json refuses: %v", doc, stdErr)
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(obj); err != nil || !bytes.Equal(bytes.TrimSuffix(b.Bytes(), []byte("\n")), c) {
			t.Fatalf("Canonical(%q) = %s; encoding/json makes %s (%v)", doc, c, b.Bytes(), err)
		}
		again, err := clustermap.Canonical(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("Canonical is not idempotent: %q -> %s -> %s, %v", doc, c, again, err)
		}
		if len(c) > clustermap.MaxBytes {
			t.Fatalf("a canonical form of %d bytes", len(c))
		}
		clustermap.Decode(c) // never panics
	})
}

type errString string

func (e errString) Error() string { return string(e) }

const errAfter = errString("something after the object")

// FuzzParse: Parse never panics; a map it accepts has its document in canonical form, is
// decoded alike from it (Decode) and parsed alike again (Parse of its Doc).
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		m, err := clustermap.Parse(doc)
		if _, derr := clustermap.Decode(doc); derr == nil && err == nil {
			// Both accept it: it was canonical already.
			if !bytes.Equal(m.Doc, doc) {
				t.Fatalf("Decode accepted %q, whose canonical form is %s", doc, m.Doc)
			}
		}
		if err != nil {
			if err.Code == "" || err.Message == "" {
				t.Fatalf("Parse(%q): an error without a code or a message: %+v", doc, err)
			}
			return
		}
		c, cerr := clustermap.Canonical(doc)
		if cerr != nil || !bytes.Equal(c, m.Doc) {
			t.Fatalf("Parse(%q).Doc = %s, Canonical = %s, %v", doc, m.Doc, c, cerr)
		}
		for what, again := range map[string]func() (clustermap.Map, error){
			"Decode": func() (clustermap.Map, error) { return clustermap.Decode(m.Doc) },
			"Parse":  func() (clustermap.Map, error) { m, err := clustermap.Parse(m.Doc); return m, errOrNil(err) },
		} {
			m2, err := again()
			if err != nil || m2.Generation != m.Generation || !slices.Equal(m2.Nodes, m.Nodes) || !bytes.Equal(m2.Doc, m.Doc) ||
				!maps.EqualFunc(m2.Placement, m.Placement, slices.Equal) || !slices.Equal(m2.LockHomes, m.LockHomes) ||
				!slices.Equal(m2.FencedTables, m.FencedTables) {
				t.Fatalf("%s of Parse(%q)'s Doc = %+v, %v; want %+v", what, doc, m2, err, m)
			}
		}
		if m.Generation == 0 || m.Generation > 1<<63-1 || (m.Nodes != nil && (len(m.Nodes) == 0 || len(m.Nodes) > clustermap.MaxNodes)) {
			t.Fatalf("Parse(%q) accepted %+v", doc, m)
		}
		if m.Placement != nil && (m.Nodes == nil || len(m.Placement) > clustermap.MaxPlacedTables) {
			t.Fatalf("Parse(%q) accepted a placement of %d tables with nodes %v", doc, len(m.Placement), m.Nodes)
		}
		if len(m.LockHomes) > clustermap.MaxLockHomes || (m.LockHomes != nil && m.Nodes == nil) || !sortedOnce(m.LockHomes) ||
			len(m.FencedTables) > clustermap.MaxFencedTables || !sortedOnce(m.FencedTables) {
			t.Fatalf("Parse(%q) accepted lock homes %v and fenced tables %v (nodes %v)", doc, m.LockHomes, m.FencedTables, m.Nodes)
		}
		for _, h := range m.LockHomes {
			if !slices.ContainsFunc(m.Nodes, func(n clustermap.Node) bool { return n.Name == h }) {
				t.Fatalf("Parse(%q): lock home %s, not a member", doc, h)
			}
		}
		for table, carriers := range m.Placement {
			if len(carriers) == 0 || !slices.IsSorted(carriers) || len(slices.Compact(slices.Clone(carriers))) != len(carriers) {
				t.Fatalf("Parse(%q): table %q placed on %v, not 1 or more names, sorted, each once", doc, table, carriers)
			}
			for _, c := range carriers {
				if !slices.ContainsFunc(m.Nodes, func(n clustermap.Node) bool { return n.Name == c }) {
					t.Fatalf("Parse(%q): table %q placed on %s, not a member", doc, table, c)
				}
			}
		}
	})
}

// sortedOnce reports whether names are sorted with none twice.
func sortedOnce(names []string) bool {
	return slices.IsSorted(names) && len(slices.Compact(slices.Clone(names))) == len(names)
}

// errOrNil keeps a nil *Error from becoming a non-nil error.
func errOrNil(e *clustermap.Error) error {
	if e == nil {
		return nil
	}
	return e
}
