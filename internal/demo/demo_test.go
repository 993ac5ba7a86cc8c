package demo

import (
	"bytes"
	"strings"
	"testing"
)

// TestDemo runs plait demo: it fails unless the four nodes converge, C moves A to B2,
// nothing is delivered twice and the digests are equal.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := Run(&out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"C takes A from B2 after", "duplicates received 0", "digests equal, nothing delivered twice"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
