package sim

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/wire"
)

var idleSizes = flag.String("idle.nodes", "8,32", "TestIdleMeshTraffic: the mesh sizes, comma-separated (make scale adds 64)")

// TestIdleMeshTraffic: on an idle full mesh of version-4 nodes, liveness costs at most one
// message per link per second, both directions and PONGs counted (docs/design.md §28,
// BENCHMARKS.md §11): once every node wrote one entry and the mesh converged, 60 virtual
// seconds with no write. What still goes is the dialer's PING on a link idle for the
// idle-ping interval, its PONG, and anti-entropy's one range a second for all of a node's
// peers. It asserts the PINGs and PONGs, counts and never a time, and prints every
// message and frame per link per second with -v.
//
//	go test ./conformance/sim -run TestIdleMeshTraffic -v -idle.nodes=8,32,64
func TestIdleMeshTraffic(t *testing.T) {
	var rows []string
	for _, f := range strings.Split(*idleSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 {
			t.Fatalf("-idle.nodes: %q is not a mesh size", f)
		}
		names := make([]string, n)
		var links [][2]string
		for i := range names {
			names[i] = fmt.Sprintf("N%02d", i)
			for j := range i {
				links = append(links, [2]string{names[j], names[i]})
			}
		}
		c := newV2Cluster(t, Options{Seed: 1}, names, links...)
		c.Run(time.Second)
		for i, name := range names {
			if _, err := c.Write(name, put(fmt.Sprint("k", i), "v")); err != nil {
				t.Fatal(err)
			}
		}
		if !c.Stabilize(30 * time.Second) {
			_, why := c.Converged()
			t.Fatalf("%d nodes: not converged: %s %v", n, why, c.Failures())
		}
		c.Run(10 * time.Second) // the heads rounds and QUIET changes of the writes settle
		const idle = 60 * time.Second
		messages, frames, before := c.messages, total(&c.framesIn), c.framesIn
		c.Run(idle)
		if f := c.Failures(); len(f) > 0 {
			t.Fatal(f)
		}
		perLink := func(k uint64) float64 { return float64(k) / float64(len(links)) / idle.Seconds() }
		msgs, frs := perLink(uint64(c.messages-messages)), perLink(total(&c.framesIn)-frames)
		var kinds []string
		for slot := range protocol.UsedFrameSlots() {
			if d := c.framesIn[slot] - before[slot]; d > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %.3f", protocol.SlotName(slot), perLink(d)))
			}
		}
		rows = append(rows, fmt.Sprintf("| %d | %d | %.3f | %.3f | %s |", n, len(links), msgs, frs, strings.Join(kinds, ", ")))
		// The liveness traffic is what the quiet control plane bounds: anti-entropy's
		// comparisons are a pace of their own (--antientropy-interval, one range a second
		// for all of a node's peers: 4/(N-1) messages per link per second), reported beside.
		pings := perLink(c.framesIn.Of(wire.TypePing) - before.Of(wire.TypePing) + c.framesIn.Of(wire.TypePong) - before.Of(wire.TypePong))
		if pings > 1 {
			t.Errorf("%d nodes: %.3f PINGs and PONGs per link per second while idle, want at most 1", n, pings)
		}
	}
	t.Log("\n| nodes | links | messages per link per second, idle | frames | of them, by type |\n|---|---|---|---|---|\n" + strings.Join(rows, "\n"))
}
