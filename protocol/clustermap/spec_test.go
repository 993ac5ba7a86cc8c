package clustermap

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestSpecLockHome: the worked example of protocol/SPEC.md ("A key's lock home") is what
// the code computes: each home's SHA-256 input, its digest and value, and the home chosen,
// with every home and without the one chosen.
func TestSpecLockHome(t *testing.T) {
	spec, err := os.ReadFile("../SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	head := regexp.MustCompile(`(?m)^# lock home: homes ([a-z, ]+); table "([a-z]+)"; key "([a-z0-9]+)"$`).FindSubmatch(spec)
	if head == nil {
		t.Fatal("protocol/SPEC.md has no lock home example")
	}
	homes, table, key := strings.Split(string(head[1]), ", "), head[2], head[3]
	inputs := regexp.MustCompile(`(?m)^# ([a-z]+): SHA-256\(([0-9a-f ]+)\) = ([0-9a-f]{64})$`).FindAllSubmatch(spec, -1)
	if len(inputs) != len(homes) {
		t.Fatalf("protocol/SPEC.md's example lists %d hashes for homes %v", len(inputs), homes)
	}
	var values []string
	for i, in := range inputs {
		h := string(in[1])
		if h != homes[i] {
			t.Errorf("hash %d is of home %s, want %s", i, h, homes[i])
		}
		input, err := hex.DecodeString(strings.ReplaceAll(string(in[2]), " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		if want := bytes.Join([][]byte{[]byte(h), table, key}, []byte{0}); !bytes.Equal(input, want) {
			t.Errorf("%s: the example's input %x, want %x", h, input, want)
		}
		if sum := sha256.Sum256(input); hex.EncodeToString(sum[:]) != string(in[3]) {
			t.Errorf("%s: the example's digest %s, SHA-256 says %x", h, in[3], sum)
		}
		values = append(values, fmt.Sprintf("%s 0x%016x", h, homeValue(h, table, key)))
	}
	if want := "# values: " + strings.Join(values, ", ") + "\n"; !bytes.Contains(spec, []byte(want)) {
		t.Errorf("protocol/SPEC.md lacks the line %q", want)
	}
	all := Map{LockHomes: homes}
	home := all.Home(table, key)
	rest := Map{LockHomes: slicesWithout(homes, home)}
	if want := fmt.Sprintf("# home: %s (without %s: %s)\n", home, home, rest.Home(table, key)); !bytes.Contains(spec, []byte(want)) {
		t.Errorf("protocol/SPEC.md lacks the line %q", want)
	}
}

func slicesWithout(names []string, drop string) []string {
	var out []string
	for _, n := range names {
		if n != drop {
			out = append(out, n)
		}
	}
	return out
}
