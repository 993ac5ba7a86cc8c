package clustermap_test

import (
	"strings"
	"testing"

	"plait/protocol/clustermap"
)

// TestCanonical: the canonical form's examples: keys sorted by their bytes at every
// depth, no space between tokens, numbers as written, strings re-encoded by encoding/json
// without HTML escaping.
func TestCanonical(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"key order", `{"b":1,"a":2,"c":{"z":1,"y":2}}`, `{"a":2,"b":1,"c":{"y":2,"z":1}}`},
		{"keys by bytes", `{"é":1,"a":2,"B":3,"_":4}`, `{"B":3,"_":4,"a":2,"é":1}`},
		{"spacing", " {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\" : { } , \"c\" : [ ] } \n", `{"a":[1,2],"b":{},"c":[]}`},
		{"numbers as written", `{"a":[1.50,1e3,1E+3,-0,0.0,100000000000000000000000000001,-1.5e-7]}`, `{"a":[1.50,1e3,1E+3,-0,0.0,100000000000000000000000000001,-1.5e-7]}`},
		{"literals", `{"a":[true,false,null]}`, `{"a":[true,false,null]}`},
		{"unicode as UTF-8", `{"a":"\u00e9é\u65e5本\ud83d\ude00😀"}`, `{"a":"éé日本😀😀"}`},
		{"no HTML escaping", `{"a":"<b>&amp;</b>"}`, `{"a":"<b>&amp;</b>"}`},
		{"escapes JSON needs", `{"a":"q\"b\\s\/n\nt\tc\u0001"}`, `{"a":"q\"b\\s/n\nt\tc\u0001"}`},
		{"line and paragraph separators escaped", "{\"a\":\"\u2028\u2029\"}", `{"a":"\u2028\u2029"}`},
		{"array order kept", `{"a":[3,1,2]}`, `{"a":[3,1,2]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := clustermap.Canonical([]byte(c.in))
			if err != nil {
				t.Fatalf("Canonical: %v", err)
			}
			if string(got) != c.want {
				t.Errorf("Canonical = %s, want %s", got, c.want)
			}
			again, err := clustermap.Canonical(got)
			if err != nil || string(again) != string(got) {
				t.Errorf("Canonical of the canonical form = %s, %v; want it unchanged", again, err)
			}
		})
	}
}

// TestCanonicalBounds: a document within MaxBytes whose canonical form is over it (each
// U+2028, 3 bytes, becomes a 6-byte escape) is refused, so that no node holds a map its
// peers would refuse; a deeply nested document is decoded without trouble.
func TestCanonicalBounds(t *testing.T) {
	n := (clustermap.MaxBytes - len(`{"a":""}`)) / 3
	doc := `{"a":"` + strings.Repeat("\u2028", n) + `"}`
	if len(doc) > clustermap.MaxBytes {
		t.Fatalf("the document is %d bytes", len(doc))
	}
	_, err := clustermap.Canonical([]byte(doc))
	if e, ok := err.(*clustermap.Error); !ok || e.Code != "map-too-large" || !strings.Contains(e.Message, "canonical form") {
		t.Errorf("Canonical of %d bytes that are %d in canonical form: %v; want map-too-large", len(doc), len(doc)+3*n, err)
	}
	depth := (clustermap.MaxBytes - len(`{"a":}`)) / 2
	deep := `{"a":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
	got, err := clustermap.Canonical([]byte(deep))
	if err != nil || string(got) != deep {
		t.Errorf("Canonical of %d nested arrays: %d bytes, %v; want the document unchanged", depth, len(got), err)
	}
}

// TestCanonicalMessageBounded: a key twice at the bottom of 6000 levels is named by the
// last steps of its path, not by all of them.
func TestCanonicalMessageBounded(t *testing.T) {
	const depth = 6000
	doc := `{"a":` + strings.Repeat(`[{"k":`, depth) + `{"z":1,"z":2}` + strings.Repeat(`}]`, depth) + `}`
	_, err := clustermap.Canonical([]byte(doc))
	e, ok := err.(*clustermap.Error)
	if !ok || e.Code != "bad-json" || !strings.HasPrefix(e.Message, "...[0].k") || !strings.Contains(e.Message, `[0].k[0].k: the key "z" appears twice`) || len(e.Message) > 200 {
		t.Errorf("Canonical: %v; want bad-json naming the key by the end of its path, in at most 200 bytes", err)
	}
}
