package clustermap

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strconv"

	"plait/protocol/wire"
)

// Locks in the map (docs/design.md §25.2, docs/contract.md §22.8): the lock homes, among
// which every key of every table has one home (Home), and the fenced tables, whose writes
// need a lock's token (Fenced). A table once fenced stays fenced (CheckSuccessor): writes
// without tokens in a table whose versions order by token would order below every token
// written before.

// checkLockHomes reads a document's lock_homes: an array of member names, none twice.
// nodes is the map's member list (nil: none); homes need one, since a home must be a
// member. The list comes back sorted; an empty one is no home (nil).
func checkLockHomes(v any, nodes []Node) ([]string, *Error) {
	list, ok := v.([]any)
	if !ok {
		return nil, errorf(CodeBadLockHomes, "lock_homes is %s, not an array of node names", kind(v))
	}
	if nodes == nil {
		return nil, errorf(CodeBadLockHomes, "lock_homes needs nodes: a lock home must be a member, and the document has no member list")
	}
	if len(list) > MaxLockHomes {
		return nil, errorf(CodeBadLockHomes, "lock_homes lists %d nodes, over the %d allowed", len(list), MaxLockHomes)
	}
	if len(list) == 0 {
		return nil, nil
	}
	members := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		members[n.Name] = true
	}
	homes := make([]string, len(list))
	seen := make(map[string]int, len(list))
	for i, n := range list {
		name, ok := n.(string)
		switch {
		case !ok:
			return nil, errorf(CodeBadLockHomes, "lock_homes[%d] is %s, not a node name", i, kind(n))
		case !wire.ValidName(name):
			return nil, errorf(CodeBadName, "lock_homes[%d]: the node name %s is not 1-%d bytes of [A-Za-z0-9_.-]", i, quoteShort(name), wire.MaxNameLen)
		case !members[name]:
			return nil, errorf(CodeBadLockHomes, "lock_homes[%d]: the node %s is not a member (nodes)", i, name)
		}
		if j, dup := seen[name]; dup {
			return nil, errorf(CodeDuplicateNode, "lock_homes lists the node %s twice ([%d] and [%d])", name, j, i)
		}
		seen[name] = i
		homes[i] = name
	}
	slices.Sort(homes)
	return homes, nil
}

// checkFencedTables reads a document's fenced_tables: an array of table names, none twice.
// The list comes back sorted; an empty one fences no table (nil).
func checkFencedTables(v any) ([]string, *Error) {
	list, ok := v.([]any)
	if !ok {
		return nil, errorf(CodeBadFencedTables, "fenced_tables is %s, not an array of table names", kind(v))
	}
	if len(list) > MaxFencedTables {
		return nil, errorf(CodeTooManyTables, "fenced_tables lists %d tables, over the %d allowed", len(list), MaxFencedTables)
	}
	if len(list) == 0 {
		return nil, nil
	}
	tables := make([]string, len(list))
	seen := make(map[string]int, len(list))
	for i, n := range list {
		name, ok := n.(string)
		switch {
		case !ok:
			return nil, errorf(CodeBadFencedTables, "fenced_tables[%d] is %s, not a table name", i, kind(n))
		case !wire.ValidName(name):
			return nil, errorf(CodeBadName, "fenced_tables[%d]: the table name %s is not 1-%d bytes of [A-Za-z0-9_.-]", i, quoteShort(name), wire.MaxNameLen)
		}
		if j, dup := seen[name]; dup {
			return nil, errorf(CodeBadFencedTables, "fenced_tables lists the table %s twice ([%d] and [%d])", name, j, i)
		}
		seen[name] = i
		tables[i] = name
	}
	slices.Sort(tables)
	return tables, nil
}

// Fenced reports whether m fences table: every write of it needs a lock's token.
func (m Map) Fenced(table []byte) bool {
	_, found := slices.BinarySearch(m.FencedTables, string(table))
	return found
}

// Home is the lock home of key in table under m: of the map's lock homes, the one whose
// homeValue for (table, key) is the highest, the lower name on a tie; "" when the map has
// no lock homes. This is rendezvous hashing: a home taken out of the list moves only the
// keys it was the home of, each to the home with the next value, and a home added takes
// only keys from the others (about 1/n of them), never moves a key between two others.
// protocol/SPEC.md ("Version 4", "A key's lock home") defines it byte for byte, since
// every node, of every build, must choose the same home.
func (m Map) Home(table, key []byte) string {
	return highest(m.LockHomes, func(h string) uint64 { return homeValue(h, table, key) })
}

// homeValue is home's value for (table, key) in the rendezvous hash: the first 8 bytes,
// big-endian, of SHA-256(home ‖ 0x00 ‖ table ‖ 0x00 ‖ key). A name and a table never
// hold 0x00 (the name rule), so the separators make the input unambiguous; the key, which
// may, comes last.
func homeValue(home string, table, key []byte) uint64 {
	h := sha256.New()
	h.Write([]byte(home))
	h.Write([]byte{0})
	h.Write(table)
	h.Write([]byte{0})
	h.Write(key)
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}

// highest is the rendezvous choice: the home of the highest value, the lower name on a
// tie, whatever order homes are in; "" when there is none. The tie is compared here, not
// left to the list's order, so that a build that kept homes in another order would still
// choose alike.
func highest(homes []string, value func(home string) uint64) string {
	var best string
	var bestValue uint64
	for i, h := range homes {
		v := value(h)
		if i == 0 || v > bestValue || (v == bestValue && h < best) {
			best, bestValue = h, v
		}
	}
	return best
}

// CheckSuccessor refuses next as the map that follows prev when it unfences a table or
// lowers the leaf window: when next's generation is above prev's and prev fences a table
// next does not, it is an *Error of code unfenced naming the first such table in byte
// order (and how many more); else when next's leaf_window is below prev's (or gone), an
// *Error of code leaf-window-lowered (checkLeafWindowKept); nil otherwise, and for a next
// that is not prev's successor (Decide says what becomes of it). A table once fenced
// stays fenced (docs/design.md §25.2): its versions order by token, and a write without
// one would order below every token written before. A leaf window once published is
// never lowered (§27.4): every node's tombstone horizon holds back by it.
func CheckSuccessor(prev, next Map) *Error {
	if next.Generation <= prev.Generation {
		return nil
	}
	if err := checkUnfenced(prev, next); err != nil {
		return err
	}
	return checkLeafWindowKept(prev, next)
}

// checkUnfenced is CheckSuccessor's fencing rule.
func checkUnfenced(prev, next Map) *Error {
	var dropped []string
	for _, t := range prev.FencedTables {
		if !next.Fenced([]byte(t)) {
			dropped = append(dropped, t)
		}
	}
	if len(dropped) == 0 {
		return nil
	}
	more := ""
	if len(dropped) > 1 {
		more = " (and " + strconv.Itoa(len(dropped)-1) + " more)"
	}
	return errorf(CodeUnfenced, "the cluster map generation %d fences the table %s%s and generation %d does not: a table once fenced stays fenced",
		prev.Generation, quoteShort(dropped[0]), more, next.Generation)
}
