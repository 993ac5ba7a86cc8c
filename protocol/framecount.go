package protocol

import "plait/protocol/wire"

// FrameSlots is how many kinds of frame a FrameCounts tells apart: slot 0 for every type
// wire's registry does not hold (the unknown bucket: an ignorable frame skipped, a critical
// one refused), then one slot per registered type, in numeric order. A fixed array rather
// than a map or a slice: Stats stays a plain value, copied without an allocation and
// compared with ==, and counting a frame is one indexed add. 48 slots hold the registry's
// 34 types and room to grow; init refuses a build whose registry outgrows them, so a new
// frame type can never share a slot.
const FrameSlots = 48

// FrameCounts counts frames by type, one slot per registered type (FrameSlot).
type FrameCounts [FrameSlots]uint64

// Of is the count of frames of type t (of every unknown type when t is not registered).
func (c FrameCounts) Of(t wire.Type) uint64 { return c[frameSlot[t]] }

// Add adds every count of d to c.
func (c *FrameCounts) Add(d *FrameCounts) {
	for i := range c {
		c[i] += d[i]
	}
}

// FrameSlot is the slot of frame type t in a FrameCounts: 0 for a type the registry does
// not hold.
func FrameSlot(t wire.Type) int { return int(frameSlot[t]) }

// SlotType is the frame type a slot counts; ok is false for slot 0 (the unknown bucket)
// and for slots past the registry's types.
func SlotType(slot int) (t wire.Type, ok bool) {
	if slot <= 0 || slot >= FrameSlots || slot > len(slotTypes) {
		return 0, false
	}
	return slotTypes[slot-1], true
}

// SlotName is the name a slot's counts go by outside (the frame's name in SPEC.md, such
// as "HEADS"; "unknown" for slot 0): the bounded label set of the frame metrics.
func SlotName(slot int) string {
	if t, ok := SlotType(slot); ok {
		return t.String()
	}
	return "unknown"
}

// UsedFrameSlots is how many slots the registry uses, the unknown bucket included: slots
// at and past it are always 0.
func UsedFrameSlots() int { return len(slotTypes) + 1 }

var (
	frameSlot [256]uint8
	slotTypes []wire.Type
)

// frameSlotsFit reports whether a registry of n types fits FrameSlots, the unknown
// bucket included.
func frameSlotsFit(n int) bool { return n+1 <= FrameSlots }

func init() {
	slotTypes = wire.Registered()
	if !frameSlotsFit(len(slotTypes)) {
		panic("protocol: wire registers more frame types than FrameSlots counts apart")
	}
	for i, t := range slotTypes {
		frameSlot[t] = uint8(i + 1)
	}
}

// countIn counts one frame read from the peer, known or not.
func (s *Session) countIn(t wire.Type) {
	s.stats.FramesIn++
	s.stats.FramesInByType[frameSlot[t]]++
}

// countOut counts one frame queued for the peer.
func (s *Session) countOut(t wire.Type) {
	s.stats.FramesOut++
	s.stats.FramesOutByType[frameSlot[t]]++
}
