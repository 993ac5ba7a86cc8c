package clustermap

import (
	"encoding/json"
	"strconv"
	"time"
)

// The leaf window (docs/design.md §27.4, docs/contract.md §22.11): how far below a hub's
// clock a leaf's write may be and still be re-originated. Every node subtracts it from
// each origin's applied HLC in its tombstone horizon, since a hub's later entries may
// carry conflict HLCs that far below its own. A map that follows one with a window keeps
// it or raises it (CheckSuccessor): a lower window would let a node drop a tombstone that
// a leaf write re-originated under the higher one could still bring back.

// MaxLeafWindow bounds leaf_window: ten years, far past any sensible hold, and far below
// the HLC's 48 bits of milliseconds.
const MaxLeafWindow = 3650 * 24 * time.Hour

// checkLeafWindow reads a document's leaf_window: an integer literal of seconds, 1 to
// MaxLeafWindow's, in a map with a member list (the gate that lets a hub use it asks every
// member, so a map without members can never use it).
func checkLeafWindow(v any, nodes []Node) (time.Duration, *Error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, errorf(CodeBadLeafWindow, "leaf_window is %s, not a number of seconds", kind(v))
	}
	if nodes == nil {
		return 0, errorf(CodeBadLeafWindow, "leaf_window needs nodes: the document has no member list")
	}
	s := string(n)
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errorf(CodeBadLeafWindow, "leaf_window %s is not a whole number of seconds", quoteShort(s))
		}
	}
	maxSecs := uint64(MaxLeafWindow / time.Second)
	secs, err := strconv.ParseUint(s, 10, 64)
	if err != nil || secs > maxSecs {
		return 0, errorf(CodeBadLeafWindow, "leaf_window %s is over the %d seconds allowed", quoteShort(s), maxSecs)
	}
	if secs == 0 {
		return 0, errorf(CodeBadLeafWindow, "leaf_window is 0; it is at least 1 second (leave it out for none)")
	}
	return time.Duration(secs) * time.Second, nil
}

// checkLeafWindowKept refuses next as prev's successor when it lowers prev's leaf window
// or drops it: an *Error of code leaf-window-lowered; nil otherwise. next is prev's
// successor (a higher generation).
func checkLeafWindowKept(prev, next Map) *Error {
	if next.LeafWindow >= prev.LeafWindow {
		return nil
	}
	has := "has none"
	if next.LeafWindow > 0 {
		has = "has " + strconv.FormatInt(int64(next.LeafWindow/time.Second), 10) + " s"
	}
	return errorf(CodeLeafWindowLowered, "the cluster map generation %d has a leaf_window of %d s and generation %d %s: a leaf window is raised, never lowered or dropped",
		prev.Generation, int64(prev.LeafWindow/time.Second), next.Generation, has)
}
