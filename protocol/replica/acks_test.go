package replica_test

import (
	"fmt"
	"testing"

	"plait/protocol"
	"plait/protocol/replica"
)

// TestAckLeavesInTheSameStep: a version-2 receiver acknowledges an entry in the very step
// that applied it, not with whatever it sends next (its PING a second later), and so
// returns a channel's credit at once: a catch-up larger than the window, which the sender
// sends a window at a time in one message, completes with the clock standing still.
func TestAckLeavesInTheSameStep(t *testing.T) {
	h := newHarness(t)
	// A channel window of two KiB: 50 entries of about 270 bytes run out of credit six
	// times, each window sent as one message.
	small := protocol.Limits{MaxFrameBody: 1 << 10, MaxMessage: 64 << 10, MaxChannelBuffer: 2 << 10}
	a := h.addNode("A", replica.Config{Limits: small})
	b := h.addNode("B", replica.Config{Limits: small})
	h.connect(b, a)

	a.write(put("t", "k0", "v"))
	h.pump() // no time passes
	if got := h.acked("B", "A", a.origin); got != 1 {
		t.Errorf("B acknowledged A's channel up to %d in the step that applied entry 1, want 1", got)
	}

	c := h.addNode("C", replica.Config{Limits: small})
	for i := 1; i <= 50; i++ {
		a.write(put("t", fmt.Sprint("k", i), string(make([]byte, 200))))
	}
	h.pump()
	h.connect(c, a) // a catch-up of 51 entries
	if got := c.applied()[a.origin]; got != 51 {
		t.Errorf("C applied A up to %d with the clock standing still, want 51: the sender waited for credit", got)
	}
	if got := h.acked("C", "A", a.origin); got != 51 {
		t.Errorf("C acknowledged A's channel up to %d, want 51", got)
	}
}
