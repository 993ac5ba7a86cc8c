package clustermap

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
)

// Decision is what a node does with a map it meets (Decide).
type Decision uint8

const (
	// Adopt: the incoming map's generation is higher; it replaces the current one.
	Adopt Decision = iota + 1
	// Same: the incoming map is the current one (same generation, same canonical bytes).
	Same
	// Stale: the incoming map's generation is lower; the current one stays.
	Stale
	// Conflict: the same generation and another document; the current one stays, and
	// the conflict is counted and shown (docs/design.md §23.2).
	Conflict
)

func (d Decision) String() string {
	switch d {
	case Adopt:
		return "adopt"
	case Same:
		return "same"
	case Stale:
		return "stale"
	case Conflict:
		return "conflict"
	}
	return "decision(" + strconv.Itoa(int(d)) + ")"
}

// Decide is the one rule of which map a node keeps: the higher generation wins, by
// generation alone, and of two different maps of one generation the node keeps the one it
// had. No clock, publisher or arrival order takes part, so nodes that meet the same maps in
// any order end on the same one. current.Generation 0 is a node that holds no map, which
// any map replaces.
func Decide(current, incoming Map) Decision {
	switch {
	case incoming.Generation > current.Generation:
		return Adopt
	case incoming.Generation < current.Generation:
		return Stale
	case bytes.Equal(incoming.Doc, current.Doc):
		return Same
	}
	return Conflict
}

// Member is a member entry: a node's name and the highest protocol version it speaks,
// reported at Stamp (an HLC: the reporter's when it started, or when a version-4 node saw
// the node's HELLO offer less than 4; docs/design.md §23.3).
type Member struct {
	Name       string
	MaxVersion uint64
	Stamp      uint64
	Generation uint64 // the map generation the node holds (0: none, or not known)
}

// Newer reports whether in replaces have, two entries for one name: the higher stamp wins,
// since an entry reports a fact that changes and the newest report is the truth; of equal
// stamps the one held stays.
func Newer(have, in Member) bool { return in.Stamp > have.Stamp }

// BelowV4 lists the map's members not known to speak protocol version 4: the names of
// m.Nodes without an entry in members (by name) of MaxVersion 4 or more, sorted. It is
// nil when there are none, and when the map has no member list (RequireV4 tells the two
// apart).
func BelowV4(m Map, members map[string]Member) []string {
	var out []string
	for _, n := range m.Nodes {
		if members[n.Name].MaxVersion < 4 {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out
}

// maxNamed bounds the members a cluster-not-v4 message names; status lists them all.
const maxNamed = 16

// RequireV4 is the gate of a whole-cluster feature (docs/design.md §23.3): nil when the
// map has a member list and every member is known to speak version 4, otherwise an *Error
// of code cluster-not-v4 naming the members below (the first 16, and how many more), or
// saying that there is no map or that it lists no members.
func RequireV4(m Map, members map[string]Member) *Error {
	if m.Generation == 0 {
		return errorf(CodeClusterNotV4, "this node holds no cluster map: publish one that lists the members (nodes)")
	}
	if m.Nodes == nil {
		return errorf(CodeClusterNotV4, "the cluster map (generation %d) has no member list (nodes)", m.Generation)
	}
	below := BelowV4(m, members)
	if len(below) == 0 {
		return nil
	}
	named := below
	more := ""
	if len(named) > maxNamed {
		named = named[:maxNamed]
		more = " and " + strconv.Itoa(len(below)-maxNamed) + " more"
	}
	return errorf(CodeClusterNotV4, "%d of the cluster map's members are not known to speak protocol version 4: %s%s",
		len(below), strings.Join(named, ", "), more)
}
