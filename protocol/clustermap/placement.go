package clustermap

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"plait/protocol/wire"
)

// Placement (docs/design.md §24, docs/contract.md §23): which nodes carry a table. A table
// the map's placement names is carried by the nodes listed, every other table by every
// node. Every decision about who carries what asks Carries, Placed or CheckTables, so
// that no two places can answer it differently.

// checkPlacement reads a document's placement: an object of table name to a list of
// member names. nodes is the map's member list (nil: none); a placement needs one, since
// a carrier must be a member. The lists come back sorted, so that two tables placed on
// the same nodes in another order compare equal; an empty object places nothing (nil).
func checkPlacement(v any, nodes []Node) (map[string][]string, *Error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errorf(CodeBadPlacement, "placement is %s, not an object of table names to lists of nodes", kind(v))
	}
	if nodes == nil {
		return nil, errorf(CodeBadPlacement, "placement needs nodes: a table's carriers must be members, and the document has no member list")
	}
	if len(obj) > MaxPlacedTables {
		return nil, errorf(CodeTooManyTables, "placement names %d tables, over the %d allowed", len(obj), MaxPlacedTables)
	}
	if len(obj) == 0 {
		return nil, nil
	}
	members := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		members[n.Name] = true
	}
	out := make(map[string][]string, len(obj))
	for _, t := range slices.Sorted(maps.Keys(obj)) {
		if !wire.ValidName(t) {
			return nil, errorf(CodeBadName, "placement: the table name %s is not 1-%d bytes of [A-Za-z0-9_.-]", quoteShort(t), wire.MaxNameLen)
		}
		list, ok := obj[t].([]any)
		if !ok {
			return nil, errorf(CodeBadPlacement, "placement of table %s is %s, not an array of node names", t, kind(obj[t]))
		}
		if len(list) == 0 || len(list) > MaxNodes {
			return nil, errorf(CodeBadPlacement, "placement of table %s lists %d nodes, not 1 to %d", t, len(list), MaxNodes)
		}
		names := make([]string, len(list))
		seen := make(map[string]int, len(list))
		for i, n := range list {
			name, ok := n.(string)
			switch {
			case !ok:
				return nil, errorf(CodeBadPlacement, "placement of table %s: [%d] is %s, not a node name", t, i, kind(n))
			case !wire.ValidName(name):
				return nil, errorf(CodeBadName, "placement of table %s: [%d]: the node name %s is not 1-%d bytes of [A-Za-z0-9_.-]", t, i, quoteShort(name), wire.MaxNameLen)
			case !members[name]:
				return nil, errorf(CodeBadPlacement, "placement of table %s: the node %s is not a member (nodes)", t, name)
			}
			if j, dup := seen[name]; dup {
				return nil, errorf(CodeDuplicateNode, "placement of table %s lists the node %s twice ([%d] and [%d])", t, name, j, i)
			}
			seen[name] = i
			names[i] = name
		}
		slices.Sort(names)
		out[t] = names
	}
	return out, nil
}

// Carries reports whether node carries table under m: every node carries a table the
// placement does not name (and every table when m has none); a placed table is carried by
// the nodes its placement lists.
func (m Map) Carries(node string, table []byte) bool {
	carriers, placed := m.Placement[string(table)]
	if !placed {
		return true
	}
	_, found := slices.BinarySearch(carriers, node)
	return found
}

// Placed reports whether m's placement names table.
func (m Map) Placed(table []byte) bool {
	_, placed := m.Placement[string(table)]
	return placed
}

// CheckTables is the rule of what one transaction may touch (docs/design.md §24.1): nil
// when its tables are all placed alike (all unplaced, or all placed on the same nodes),
// otherwise an *Error of code mixed-placement naming the first table that differs from
// the first table and both placements. No node could apply all of such a transaction, and
// applying a part of it on each would break its atomicity.
func (m Map) CheckTables(tables [][]byte) *Error {
	if len(m.Placement) == 0 || len(tables) < 2 {
		return nil
	}
	// An unplaced table's carriers are nil, and a placed one's never empty, so comparing
	// the lists compares placed with unplaced too.
	first, firstPlaced := m.Placement[string(tables[0])]
	for _, t := range tables[1:] {
		carriers, placed := m.Placement[string(t)]
		if !slices.Equal(carriers, first) {
			return errorf(CodeMixedPlacement, "the tables %s (%s) and %s (%s) are not placed alike (cluster map generation %d): "+
				"a transaction's tables must all be unplaced or all carried by the same nodes",
				quoteShort(string(tables[0])), carriedBy(first, firstPlaced), quoteShort(string(t)), carriedBy(carriers, placed), m.Generation)
		}
	}
	return nil
}

// carriedBy says who carries a table, for a message: its first maxNamed carriers.
func carriedBy(carriers []string, placed bool) string {
	if !placed {
		return "carried by every node"
	}
	named, more := carriers, ""
	if len(named) > maxNamed {
		named, more = named[:maxNamed], " and "+strconv.Itoa(len(carriers)-maxNamed)+" more"
	}
	return "carried by " + strings.Join(named, ", ") + more
}
