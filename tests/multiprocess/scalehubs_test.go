//go:build scale

package multiprocess

import (
	"testing"
	"time"
)

// TestScaleHubsAndLeaves is TestHubsAndLeaves at scale (make scale; docs/testing.md §13):
// a core of three, two hubs of 100 leaves each, 205 processes. Each leaf writes 5 records
// (1,000 in all), then one every 2 s while H1 is killed with kill -9 and started again
// (100 writers a second into the cluster). Every acknowledged leaf write ends on every
// node, once in the hubs' logs, and no leaf is an origin on the core; the time to converge
// is logged.
func TestScaleHubsAndLeaves(t *testing.T) {
	hubsAndLeaves(t, 2, 100, 5, 2*time.Second, 10*time.Minute)
}
