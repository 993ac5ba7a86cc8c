package replica

import (
	"testing"
	"time"
)

// TestChooseCarrier: of the reachable carriers, neighbours by their measured round trip
// (one not measured yet after those measured), then the others by name; none reachable,
// none chosen.
func TestChooseCarrier(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		cands []carrierCandidate
		want  string
	}{
		{"none", nil, ""},
		{"none reachable", []carrierCandidate{{name: "B", neighbour: true, rtt: ms}, {name: "C"}}, ""},
		{"the lowest round trip", []carrierCandidate{
			{name: "B", reachable: true, neighbour: true, rtt: 30 * ms},
			{name: "C", reachable: true, neighbour: true, rtt: 5 * ms},
			{name: "D", reachable: true, neighbour: true, rtt: 9 * ms}}, "C"},
		{"an unreachable neighbour is passed over", []carrierCandidate{
			{name: "B", reachable: true, neighbour: true, rtt: 30 * ms},
			{name: "C", neighbour: true, rtt: ms}}, "B"},
		{"a neighbour before a node further away", []carrierCandidate{
			{name: "A", reachable: true},
			{name: "Z", reachable: true, neighbour: true, rtt: time.Second}}, "Z"},
		{"a measured neighbour before one not measured yet", []carrierCandidate{
			{name: "A", reachable: true, neighbour: true},
			{name: "Z", reachable: true, neighbour: true, rtt: time.Second}}, "Z"},
		{"not measured: by name", []carrierCandidate{
			{name: "C", reachable: true, neighbour: true},
			{name: "B", reachable: true, neighbour: true}}, "B"},
		{"further away: by name", []carrierCandidate{
			{name: "D", reachable: true},
			{name: "C", reachable: true}}, "C"},
		{"equal round trips: by name", []carrierCandidate{
			{name: "D", reachable: true, neighbour: true, rtt: ms},
			{name: "C", reachable: true, neighbour: true, rtt: ms}}, "C"},
	} {
		if got := chooseCarrier(tc.cands); got != tc.want {
			t.Errorf("%s: chose %q, want %q", tc.name, got, tc.want)
		}
	}
}
