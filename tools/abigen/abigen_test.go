package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedFileIsCurrent: protocol/abi/compact_gen.go is what its message structs
// give, so a field added to EventMsg or StatusMsg (or any message they nest) without go
// generate fails here, on every go test ./... (make test's unit step).
func TestGeneratedFileIsCurrent(t *testing.T) {
	if err := Check(filepath.Join("..", "..", "protocol", "abi")); err != nil {
		t.Fatal(err)
	}
}

// TestUnknownTypeIsAnError: a field of a type the layout does not encode stops the
// generator, naming the field, rather than being left out of the compact records.
func TestUnknownTypeIsAnError(t *testing.T) {
	_, err := Generate(filepath.Join("testdata", "bad"))
	if err == nil || !strings.Contains(err.Error(), "ResultMsg.Ratio") || !strings.Contains(err.Error(), "float64") {
		t.Fatalf("err = %v", err)
	}
}

// TestKeys: a field's key is its compact tag's, else its cbor tag's; a field with neither,
// and two fields of one key, are errors.
func TestKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(fields string) {
		t.Helper()
		src := "package abi\n\ntype ResultMsg struct {\n" + fields + "\n}\n\ntype EventMsg struct{}\n\ntype StatusMsg struct{}\n"
		if err := os.WriteFile(filepath.Join(dir, "abi.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("A uint64 `cbor:\"1,keyasint\" compact:\"7\"`\nB bool `cbor:\"2,keyasint\"`")
	src, err := Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"w.uint(7, m.A)", "w.bool(2, m.B)", "case 7:\n\t\t\tm.A = r.uint(k, v)"} {
		if !strings.Contains(string(src), want) {
			t.Errorf("the generated code lacks %q:\n%s", want, src)
		}
	}
	for fields, want := range map[string]string{
		"A uint64": "ResultMsg.A: no key",
		"A uint64 `cbor:\"1\"`\nB bool `cbor:\"1\"`": "key 1 is also ResultMsg.A's",
		"A uint64 `cbor:\"200\"`":                    "ResultMsg.A: no key from 1 to 127",
		"A uint64 `cbor:\"1\" compact:\",cbor\"`":    "compact option cbor",
	} {
		write(fields)
		if _, err := Generate(dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", fields, err, want)
		}
	}
}
