package handshake_test

import (
	"testing"

	"plait/protocol/handshake"
	"plait/protocol/wire"
)

func TestNegotiateTable(t *testing.T) {
	local := handshake.Range{Min: 1, Max: 1}
	for _, c := range []struct {
		peer handshake.Range
		want uint64 // 0: unsupported-version
	}{
		{handshake.Range{Min: 1, Max: 1}, 1},
		{handshake.Range{Min: 1, Max: 2}, 1},
		{handshake.Range{Min: 2, Max: 2}, 0},
		{handshake.Range{Min: 3, Max: 5}, 0},
	} {
		v, _, err := handshake.Negotiate(local, c.peer, nil, nil)
		if c.want == 0 {
			if err == nil || err.Code != wire.CodeUnsupportedVersion || err.Message != "no common protocol version: local 1..1, peer "+c.peer.String() {
				t.Errorf("peer %v: %v", c.peer, err)
			}
			continue
		}
		if err != nil || v != c.want {
			t.Errorf("peer %v: version %d, %v", c.peer, v, err)
		}
	}
	_, caps, _ := handshake.Negotiate(local, local, []string{"a", "c", "d"}, []string{"b", "c", "d", "e"})
	if len(caps) != 2 || caps[0] != "c" || caps[1] != "d" {
		t.Errorf("caps %v", caps)
	}
}

func TestClamp(t *testing.T) {
	if r, err := handshake.Clamp(0, 5); err != nil || r != handshake.Implemented() {
		t.Errorf("Clamp(0, 5) = %v, %v", r, err)
	}
	if _, err := handshake.Clamp(handshake.Implemented().Max+1, 0); err == nil || err.Code != wire.CodeBadArgument {
		t.Errorf("a minimum above the implemented range: %v", err)
	}
}

// TestMACBindsEverything: the MAC changes with the secret (also by a trailing zero byte,
// which HMAC alone would pad away), the sender's role and either HELLO.
func TestMACBindsEverything(t *testing.T) {
	d, l := []byte("dialer hello"), []byte("listener hello")
	base := handshake.MAC([]byte("s"), wire.RoleDialer, d, l)
	if !handshake.Verify([]byte("s"), wire.RoleDialer, d, l, base) {
		t.Fatal("does not verify its own MAC")
	}
	for name, m := range map[string]wire.MAC{
		"secret with a trailing zero": handshake.MAC([]byte("s\x00"), wire.RoleDialer, d, l),
		"empty secret":                handshake.MAC(nil, wire.RoleDialer, d, l),
		"role":                        handshake.MAC([]byte("s"), wire.RoleListener, d, l),
		"dialer hello":                handshake.MAC([]byte("s"), wire.RoleDialer, []byte("dialer hellp"), l),
		"listener hello":              handshake.MAC([]byte("s"), wire.RoleDialer, d, []byte("listener hellp")),
		"hellos swapped":              handshake.MAC([]byte("s"), wire.RoleDialer, l, d),
		"boundary moved":              handshake.MAC([]byte("s"), wire.RoleDialer, []byte("dialer hellol"), []byte("istener hello")),
	} {
		if m == base {
			t.Errorf("changing the %s leaves the MAC unchanged", name)
		}
	}
}
