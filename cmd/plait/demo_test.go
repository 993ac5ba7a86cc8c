package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDemo runs `plait demo`: it fails unless a wrong secret is refused, both rounds
// stream, and the two nodes end with equal digests.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := demo(&out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"auth-failed", "round 2:", "digests equal"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
