package sim

import (
	"fmt"
	"strings"

	"plait/protocol"
	"plait/protocol/wire"
)

// countFrames adds a message's frames to counts by type, as a session counts them: each
// frame whose header passes the reader's checks, up to the first that does not (a
// damaged message, whose receiver stops there too).
func countFrames(counts *protocol.FrameCounts, msg []byte) {
	r := wire.NewReader(msg, 0)
	for r.More() {
		f, err := r.Next()
		if err != nil {
			return
		}
		counts[protocol.FrameSlot(f.Type)]++
	}
}

// FramesSent and FramesDelivered are the frames the run's sessions sent and the frames
// delivered to them, by type, since the cluster was made.
func (c *Cluster) FramesSent() protocol.FrameCounts      { return c.framesOut }
func (c *Cluster) FramesDelivered() protocol.FrameCounts { return c.framesIn }

// reportTraffic puts the run's frame counts in its report.
func (c *Cluster) reportTraffic(rep *Report) {
	rep.FramesOut, rep.FramesIn = c.framesOut, c.framesIn
}

// Frames is the number of frames delivered in the run, every type.
func (r Report) Frames() uint64 { return total(&r.FramesIn) }

// FramesPerWrite is the frames delivered in the run per acknowledged write (0 without
// writes): the replication's cost, with everything that keeps the links up.
func (r Report) FramesPerWrite() float64 {
	if r.Writes == 0 {
		return 0
	}
	return float64(r.Frames()) / float64(r.Writes)
}

// FrameTable is the run's frames by type as a Markdown table (for BENCHMARKS.md): each
// type with a count, the frames sent and delivered (sent ones may be lost to a link's
// faults or a closed connection) and those delivered per write, then the totals.
func (r Report) FrameTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| frame | sent | delivered | delivered per write |\n|---|---:|---:|---:|\n")
	per := func(n uint64) string {
		if r.Writes == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(n)/float64(r.Writes))
	}
	for slot := range protocol.UsedFrameSlots() {
		out, in := r.FramesOut[slot], r.FramesIn[slot]
		if out == 0 && in == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s |\n", protocol.SlotName(slot), out, in, per(in))
	}
	fmt.Fprintf(&b, "| all | %d | %d | %s |\n", total(&r.FramesOut), total(&r.FramesIn), per(total(&r.FramesIn)))
	return b.String()
}

func total(c *protocol.FrameCounts) uint64 {
	var n uint64
	for _, v := range c {
		n += v
	}
	return n
}
