package main

import (
	"bytes"
	"testing"

	"plait/protocol/wire"
)

// TestNewOriginAbove: the new origin id is above the old one every time, also for an old
// id near the top, where few ids are above it; none is above the highest.
func TestNewOriginAbove(t *testing.T) {
	top := wire.OriginID{}
	for i := range top {
		top[i] = 0xff
	}
	nearTop := top
	nearTop[15] = 0xfe
	high := wire.OriginID{0xf4, 0x01, 0x61, 0xd1}
	for _, old := range []wire.OriginID{{}, high, nearTop} {
		for range 2000 {
			n, err := newOriginAbove(old)
			if err != nil || bytes.Compare(n[:], old[:]) <= 0 {
				t.Fatalf("above %x: %x, %v", old[:], n[:], err)
			}
		}
	}
	if n, _ := newOriginAbove(nearTop); n != top {
		t.Fatalf("above %x: %x, want the highest id", nearTop[:], n[:])
	}
	if n, err := newOriginAbove(top); err == nil {
		t.Fatalf("above the highest id: %x, want an error", n[:])
	}
}
