package protocol

import (
	"testing"
	"time"

	"plait/protocol/wire"
)

// TestEveryStampedFrameIsStamped: the send path stamps every body stampOf lists, QUIET
// included, which no code of the session builds yet (the replica's quiet sets do): a frame
// gets its stamp from the list, not from code of its own. Below version 4, none is.
func TestEveryStampedFrameIsStamped(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, version := range []uint64{3, 4} {
		for _, b := range []wire.Body{&wire.Ping{ID: 1}, &wire.Pong{ID: 1}, &wire.Cursor{}, &wire.Credit{}, &wire.Heads{}, &wire.Quiet{}} {
			s := &Session{state: StateEstablished, info: HandshakeInfo{Version: version}, now: now}
			s.stamps.peer, s.stamps.peerAt = 5, now.Add(-time.Millisecond)
			stamped := s.stamp(b)
			p := stampOf(b)
			if p == nil {
				t.Errorf("%s is not on the list of stamped frames", b.FrameType())
				continue
			}
			st := *p
			switch {
			case version < 4 && (stamped || st != nil):
				t.Errorf("version %d: %s stamped", version, b.FrameType())
			case version >= 4 && (!stamped || st == nil || *st != wire.Stamp{Time: uint64(now.UnixMicro()), Echo: 5, Held: 1000}):
				t.Errorf("version %d: %s stamp %+v", version, b.FrameType(), st)
			}
		}
	}
}
