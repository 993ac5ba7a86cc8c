package testnet

import (
	"net"
	"testing"
)

// FreeAddr is a 127.0.0.1 address whose port was free a moment ago (another process may
// take it before the caller binds it; tests that race for ports retry or fail loudly).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
