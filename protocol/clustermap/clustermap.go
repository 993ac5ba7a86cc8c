package clustermap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"plait/protocol/wire"
)

const (
	// MaxBytes bounds a map's document, as published and in canonical form: a document
	// of exactly MaxBytes is a map, one byte more is not.
	MaxBytes = 64 << 10
	// MaxNodes bounds the members a map lists.
	MaxNodes = 1024
	// MaxURLBytes bounds a node's api URL.
	MaxURLBytes = 1024
	// MaxPlacedTables bounds the tables a map's placement names. Every node asks the
	// placement of each table a transaction writes, and learns the placed tables each
	// origin writes (docs/design.md §24.2), so its size is the bound of both.
	MaxPlacedTables = 1024
	// MaxLockHomes bounds a map's lock homes. A key's home is chosen by hashing it once
	// per home (Home), on every lock request and every write of a fenced table.
	MaxLockHomes = 64
	// MaxFencedTables bounds the tables a map fences, as MaxPlacedTables the placed ones.
	MaxFencedTables = 1024
)

// The codes of an *Error: the API's answers (docs/contract.md §22.2), and the gate's.
const (
	CodeBadJSON       = "bad-json"
	CodeUnknownField  = "unknown-field"
	CodeBadGeneration = "bad-generation"
	CodeBadName       = "bad-name"
	CodeBadURL        = "bad-url"
	CodeDuplicateNode = "duplicate-node"
	CodeTooManyNodes  = "too-many-nodes"
	CodeMapTooLarge   = "map-too-large"
	CodeClusterNotV4  = "cluster-not-v4"
	// CodeBadPlacement: placement is not an object of arrays of member names, or it is
	// given without nodes (docs/contract.md §23.1).
	CodeBadPlacement = "bad-placement"
	// CodeTooManyTables: placement names more than MaxPlacedTables tables.
	CodeTooManyTables = "too-many-tables"
	// CodeMixedPlacement refuses a transaction whose tables are not placed alike
	// (CheckTables, docs/design.md §24.1).
	CodeMixedPlacement = "mixed-placement"
	// CodeNotCarried: a request for a table this node does not carry, answered here
	// instead of by a carrier.
	CodeNotCarried = "not-carried"
	// CodeBadLockHomes: lock_homes is not an array of member names within MaxLockHomes,
	// or it is given without nodes (docs/contract.md §22.8).
	CodeBadLockHomes = "bad-lock-homes"
	// CodeBadFencedTables: fenced_tables is not an array of table names, or names one
	// twice (docs/contract.md §22.8).
	CodeBadFencedTables = "bad-fenced-tables"
	// CodeUnfenced refuses a map that follows one fencing a table and does not fence it
	// (CheckSuccessor, docs/design.md §25.2).
	CodeUnfenced = "unfenced"
	// CodeLockRequired refuses a write without a lock's token that writes a table the map
	// fences (docs/design.md §25.6).
	CodeLockRequired = "lock-required"
	// CodeBadLeafWindow: leaf_window is not a whole number of seconds within
	// MaxLeafWindow, or it is given without nodes (docs/contract.md §22.11).
	CodeBadLeafWindow = "bad-leaf-window"
	// CodeLeafWindowLowered refuses a map that follows one with a leaf window and has a
	// lower one or none (CheckSuccessor, docs/design.md §27.4).
	CodeLeafWindowLowered = "leaf-window-lowered"
)

// Map is a cluster map: its generation, its canonical document, and the members it lists.
type Map struct {
	// Generation is the document's generation, 1 to 2^63−1 (0: a node holds no map).
	Generation uint64
	// Doc is the document in canonical form: what is stored, sent and answered, fields
	// this build does not know included.
	Doc []byte
	// Nodes are the members in the order the document lists them; nil when the document
	// has no `nodes` (no member list).
	Nodes []Node
	// Placement is the document's placement: each placed table's carriers, sorted by
	// name. nil when no table is placed (no placement, or an empty one): every node
	// carries every table. Ask Carries, Placed and CheckTables rather than reading it.
	// Never changed once Parse or Decode made it: a node's status hands it out as it is.
	Placement map[string][]string
	// LockHomes are the document's lock homes, sorted by name: the members among which
	// every key has its home (Home). nil when there are none (no lock_homes, or an empty
	// one).
	LockHomes []string
	// FencedTables are the document's fenced tables, sorted: the tables whose writes
	// need a lock's token (Fenced). nil when none is fenced.
	FencedTables []string
	// LeafWindow is the document's leaf_window: how far below a hub's clock a leaf's
	// write may be and still be re-originated, in whole seconds (docs/design.md §27.4).
	// 0 when the document has none.
	LeafWindow time.Duration
}

// Node is one member of a map.
type Node struct {
	Name string
	// API is where clients reach the node's HTTP API ("" when the map does not say).
	API string
}

// Error is a map refused, or a feature refused by the version-4 gate: its code is the
// API's (docs/contract.md §22.2), its message names what is wrong.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func tooLarge(n int) *Error {
	return errorf(CodeMapTooLarge, "the document is %d bytes, over the %d allowed", n, MaxBytes)
}

// Parse checks a document published through the API, strictly: it refuses what this build
// cannot honour, a field it does not know or does not support yet among them. The size is
// checked before anything is parsed. The checks run in this order, and the first that
// fails is the answer:
//
//   - map-too-large: over MaxBytes (or over it in canonical form);
//   - bad-json: not one JSON object in UTF-8, a key twice in an object, or a field of
//     the wrong type (generation not a number, nodes not an array, a node not an object,
//     a name or an api not a string);
//   - unknown-field: a field other than generation, nodes, placement, lock_homes,
//     fenced_tables and leaf_window, of the document, or of a node other than name and api, the first in
//     key order;
//   - bad-generation: generation missing, not an integer, 0, negative, or above 2^63−1;
//   - too-many-nodes: nodes empty or longer than MaxNodes;
//   - then per node, in order: bad-name (missing, or outside the name rule of
//     wire.ValidName), bad-url (see url.go), duplicate-node (a name listed before);
//   - then placement (checkPlacement): bad-placement (not an object, or no nodes),
//     too-many-tables (over MaxPlacedTables), then per table in key order: bad-name (the
//     table's name), bad-placement (not an array, empty or longer than MaxNodes), then
//     per name in order: bad-placement (not a string), bad-name, bad-placement (not a
//     member), duplicate-node (listed before for the table);
//   - then lock_homes (checkLockHomes): bad-lock-homes (not an array, no nodes, or over
//     MaxLockHomes), then per name in order: bad-lock-homes (not a string), bad-name,
//     bad-lock-homes (not a member), duplicate-node (listed before);
//   - then fenced_tables (checkFencedTables): bad-fenced-tables (not an array),
//     too-many-tables (over MaxFencedTables), then per name in order: bad-fenced-tables
//     (not a string), bad-name, bad-fenced-tables (listed before);
//   - then leaf_window (checkLeafWindow): bad-leaf-window (not a number, no nodes, not a
//     whole number of seconds, over MaxLeafWindow, or 0).
//
// The Map it returns has Doc in canonical form.
func Parse(doc []byte) (Map, *Error) {
	obj, c, err := canonical(doc)
	if err != nil {
		return Map{}, err
	}
	m, err := check(obj, true)
	if err != nil {
		return Map{}, err
	}
	m.Doc = c
	return m, nil
}

// Decode checks a document received from a peer: it must be in canonical form already
// (byte for byte what Canonical makes of it), with a valid generation and, when it has
// nodes, placement, lock_homes, fenced_tables or leaf_window, valid ones (as Parse checks them: a
// placement or a lock field this node would refuse is one it cannot honour, so no node
// holds it). Fields this build does not know, of the
// document or of a node, are kept unchecked, in Doc, so that a map published by a newer
// node is relayed as it is (docs/design.md §23.1). The error is an *Error.
func Decode(doc []byte) (Map, error) {
	obj, c, err := canonical(doc)
	if err != nil {
		return Map{}, err
	}
	if !bytes.Equal(c, doc) {
		return Map{}, errorf(CodeBadJSON, "the document is not in canonical form")
	}
	m, err := check(obj, false)
	if err != nil {
		return Map{}, err
	}
	m.Doc = c
	return m, nil
}

// check reads the fields of a decoded document; strict refuses the fields Parse refuses.
func check(obj map[string]any, strict bool) (Map, *Error) {
	var m Map
	g, hasGen := obj["generation"]
	if hasGen {
		if _, isNum := g.(json.Number); !isNum {
			return m, errorf(CodeBadJSON, "generation is %s, not a number", kind(g))
		}
	}
	nodes, hasNodes := obj["nodes"]
	var list []any
	if hasNodes {
		var ok bool
		if list, ok = nodes.([]any); !ok {
			return m, errorf(CodeBadJSON, "nodes is %s, not an array", kind(nodes))
		}
		for i, n := range list {
			e, ok := n.(map[string]any)
			if !ok {
				return m, errorf(CodeBadJSON, "nodes[%d] is %s, not an object", i, kind(n))
			}
			for _, f := range []string{"name", "api"} {
				if v, ok := e[f]; ok {
					if _, isStr := v.(string); !isStr {
						return m, errorf(CodeBadJSON, "nodes[%d].%s is %s, not a string", i, f, kind(v))
					}
				}
			}
		}
	}
	if strict {
		if err := unknownFields(obj, list); err != nil {
			return m, err
		}
	}
	if !hasGen {
		return m, errorf(CodeBadGeneration, "the document has no generation")
	}
	gen, err := generation(g)
	if err != nil {
		return m, err
	}
	m.Generation = gen
	if hasNodes {
		if err := checkNodes(&m, list); err != nil {
			return Map{}, err
		}
	}
	if p, has := obj["placement"]; has {
		pl, err := checkPlacement(p, m.Nodes)
		if err != nil {
			return Map{}, err
		}
		m.Placement = pl
	}
	if h, has := obj["lock_homes"]; has {
		homes, err := checkLockHomes(h, m.Nodes)
		if err != nil {
			return Map{}, err
		}
		m.LockHomes = homes
	}
	if f, has := obj["fenced_tables"]; has {
		tables, err := checkFencedTables(f)
		if err != nil {
			return Map{}, err
		}
		m.FencedTables = tables
	}
	if w, has := obj["leaf_window"]; has {
		lw, err := checkLeafWindow(w, m.Nodes)
		if err != nil {
			return Map{}, err
		}
		m.LeafWindow = lw
	}
	return m, nil
}

// checkNodes reads the members of nodes into m.Nodes.
func checkNodes(m *Map, list []any) *Error {
	if len(list) == 0 || len(list) > MaxNodes {
		return errorf(CodeTooManyNodes, "nodes lists %d members, not 1 to %d", len(list), MaxNodes)
	}
	m.Nodes = make([]Node, len(list))
	seen := make(map[string]int, len(list))
	for i, n := range list {
		e := n.(map[string]any)
		name, ok := e["name"].(string)
		if !ok {
			return errorf(CodeBadName, "nodes[%d] has no name", i)
		}
		if !wire.ValidName(name) {
			return errorf(CodeBadName, "nodes[%d]: the node name %s is not 1-%d bytes of [A-Za-z0-9_.-]", i, quoteShort(name), wire.MaxNameLen)
		}
		api, _ := e["api"].(string)
		if _, has := e["api"]; has {
			if reason := checkURL(api); reason != "" {
				return errorf(CodeBadURL, "nodes[%d] (node %s): the api %s %s", i, name, quoteShort(api), reason)
			}
		}
		if j, dup := seen[name]; dup {
			return errorf(CodeDuplicateNode, "the node %s is listed twice in nodes (nodes[%d] and nodes[%d])", name, j, i)
		}
		seen[name] = i
		m.Nodes[i] = Node{Name: name, API: api}
	}
	return nil
}

// unknownFields refuses, in key order, a field of the document this build does not know,
// then a field of a node other than name and api.
func unknownFields(obj map[string]any, nodes []any) *Error {
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		switch {
		case k == "generation" || k == "nodes" || k == "placement" || k == "lock_homes" || k == "fenced_tables" || k == "leaf_window":
		default:
			return errorf(CodeUnknownField, "the document has an unknown field %s", quoteShort(k))
		}
	}
	for i, n := range nodes {
		for _, k := range slices.Sorted(maps.Keys(n.(map[string]any))) {
			if k != "name" && k != "api" {
				return errorf(CodeUnknownField, "nodes[%d] has an unknown field %s", i, quoteShort(k))
			}
		}
	}
	return nil
}

// generation reads the generation as written: an integer literal 1 to 2^63−1 (a fraction
// or an exponent is not one, even when its value is whole).
func generation(g any) (uint64, *Error) {
	s := string(g.(json.Number))
	bad := func(why string) (uint64, *Error) {
		return 0, errorf(CodeBadGeneration, "the generation %s %s", quoteShort(s), why)
	}
	if len(s) > 0 && s[0] == '-' {
		return bad("is negative")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return bad("is not an integer")
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > 1<<63-1 {
		return bad("is above 2^63-1")
	}
	if n == 0 {
		return bad("is 0; a map's is at least 1")
	}
	return n, nil
}

// kind names a decoded JSON value's type for a message.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	}
	return "an object"
}

// quoteShort quotes s for a message, cut to 100 bytes: a message must not carry a
// document's worth of one field.
func quoteShort(s string) string {
	if len(s) > 100 {
		cut := 100
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "..."
	}
	return strconv.Quote(s)
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
