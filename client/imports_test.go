package client_test

import (
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"plait/client"
)

// TestImportsOnlyStd: the package, built without cgo, depends on the standard library
// and the CBOR library (for batches whose keys are not UTF-8) alone: a program that talks
// to nodes links nothing of plait (nor RocksDB).
func TestImportsOnlyStd(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{"plait/client": true, "github.com/fxamacker/cbor/v2": true, "github.com/x448/float16": true}
	for _, p := range strings.Fields(string(out)) {
		if !allowed[p] {
			t.Errorf("plait/client depends on %s, beside the standard library and the CBOR library", p)
		}
	}
	build := exec.Command("go", "build", "-o", os.DevNull, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Errorf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
}

// TestEveryContractCodeHasASentinel: each code of docs/contract.md §6.3's table (and
// of the feeds' §24 where the contract has it) has a sentinel whose code it is.
func TestEveryContractCodeHasASentinel(t *testing.T) {
	raw, err := os.ReadFile("../docs/contract.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "\n### 6.3 Errors\n")
	end := strings.Index(doc, "\n### 6.4 ")
	if start < 0 || end < start {
		t.Fatal("docs/contract.md has no §6.3 before §6.4")
	}
	row := regexp.MustCompile("(?m)^\\| ((?:`[a-z0-9-]+`(?:, )?)+) \\|")
	code := regexp.MustCompile("`([a-z0-9-]+)`")
	var codes []string
	for _, m := range row.FindAllStringSubmatch(doc[start:end], -1) {
		for _, c := range code.FindAllStringSubmatch(m[1], -1) {
			codes = append(codes, c[1])
		}
	}
	if len(codes) < 60 {
		t.Fatalf("read %d codes of §6.3's table, want its 60 or more: %v", len(codes), codes)
	}
	sort.Strings(codes)
	for _, c := range codes {
		s, ok := client.Sentinel(c)
		if !ok || client.Code(s) != c {
			t.Errorf("the contract's code %s has no sentinel", c)
		}
	}
}
