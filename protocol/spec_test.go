package protocol_test

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// TestSpecCapabilities: SPEC.md's table of capabilities lists exactly what this build's
// HELLO can offer: a session over TLS at the newest version, which offers every one.
func TestSpecCapabilities(t *testing.T) {
	spec, err := os.ReadFile("SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9.-]+)` \\| [0-9]+\\.[0-9]+ \\|")
	var documented []string
	for _, m := range row.FindAllStringSubmatch(string(spec), -1) {
		documented = append(documented, m[1])
	}
	cfg := prototest.Config(wire.RoleDialer, "a", 1)
	cfg.ChannelBinding = make([]byte, 32)
	s, err := protocol.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(prototest.Epoch, prototest.Nonce(1)); err != nil {
		t.Fatal(err)
	}
	rd := s.Ready()
	if len(rd.Messages) != 1 {
		t.Fatalf("%d messages after Start, want the HELLO", len(rd.Messages))
	}
	fs, werr := wire.DecodeMessage(rd.Messages[0], wire.DefaultMaxMessage, 0)
	if werr != nil || len(fs) != 1 || fs[0].Type != wire.TypeHello {
		t.Fatalf("frames %v, error %v: want one HELLO", fs, werr)
	}
	offered := fs[0].Value.(*wire.Hello).Caps
	slices.Sort(documented)
	if !slices.Equal(documented, offered) {
		t.Fatalf("SPEC.md's capabilities are %q, this build offers %q", documented, offered)
	}
}
