package httpapi_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"plait/internal/docsection"
	"plait/shells/native/httpapi"
)

// TestStatusExampleInContract: the JSON example of docs/contract.md §8 is a status
// document: it decodes into StatusDoc with no field StatusDoc lacks, and every object in it
// has every field of its type (a field left out only where the type leaves it out, as
// node.storage's code while ok). An example that is null stands for an object the type
// allows to be null. A field added to the document without the example, or written in the
// example and not the code, fails.
func TestStatusExampleInContract(t *testing.T) {
	rest := docsection.Section(t, "docs/contract.md", "8")
	start := strings.Index(rest, "```json\n")
	end := strings.Index(rest[start+8:], "```")
	if start < 0 || end < 0 {
		t.Fatal("docs/contract.md §8 has no JSON example")
	}
	example := []byte(rest[start+8 : start+8+end])
	dec := json.NewDecoder(bytes.NewReader(example))
	dec.DisallowUnknownFields()
	var d httpapi.StatusDoc
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("the example of docs/contract.md §8 is not a status document: %v", err)
	}
	var tree any
	if err := json.Unmarshal(example, &tree); err != nil {
		t.Fatal(err)
	}
	covers(t, "", reflect.TypeOf(d), tree)
}

// covers checks that v, the example at path, has every JSON field of type ty, recursively.
func covers(t *testing.T, path string, ty reflect.Type, v any) {
	t.Helper()
	for ty.Kind() == reflect.Pointer {
		ty = ty.Elem()
	}
	switch ty.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s: %v in the example, want an object", path, v)
			return
		}
		for f := range ty.Fields() {
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			fv, ok := obj[name]
			switch {
			case !ok && !slices.Contains(strings.Split(opts, ","), "omitempty"):
				t.Errorf("the example (docs/contract.md §8, §26.6) lacks %s.%s", path, name)
			case ok && fv != nil:
				covers(t, path+"."+name, f.Type, fv)
			}
		}
	case reflect.Slice:
		if arr, ok := v.([]any); ok && len(arr) > 0 && ty.Elem().Kind() != reflect.String {
			covers(t, path+"[]", ty.Elem(), arr[0])
		}
	}
}

// TestHubExampleInContract: the JSON example of docs/contract.md §26.6 is the hub and
// leaves of a status document: it decodes into StatusDoc with no field StatusDoc lacks,
// and has every field of HubDoc and LeavesDoc.
func TestHubExampleInContract(t *testing.T) {
	rest := docsection.Section(t, "docs/contract.md", "26.6")
	start := strings.Index(rest, "```json\n")
	if start < 0 {
		t.Fatal("docs/contract.md §26.6 has no JSON example")
	}
	end := strings.Index(rest[start+8:], "```")
	if end < 0 {
		t.Fatal("docs/contract.md §26.6's JSON example does not end")
	}
	example := []byte(rest[start+8 : start+8+end])
	dec := json.NewDecoder(bytes.NewReader(example))
	dec.DisallowUnknownFields()
	var d httpapi.StatusDoc
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("the example of docs/contract.md §26.6 is not a status document: %v", err)
	}
	var tree map[string]any
	if err := json.Unmarshal(example, &tree); err != nil {
		t.Fatal(err)
	}
	if d.Hub == nil || d.Leaves == nil {
		t.Fatalf("the example of docs/contract.md §26.6 lacks hub or leaves: %s", example)
	}
	covers(t, "hub", reflect.TypeOf(*d.Hub), tree["hub"])
	covers(t, "leaves", reflect.TypeOf(*d.Leaves), tree["leaves"])
}
