package wire

import (
	"bytes"
	"strconv"
)

// Version 4 (SPEC.md, "Version 4: the cluster map and requests (draft)"): version 3 and
// more, a draft until release 0.4 freezes it. Its frame types are 0x50-0x5F, one sub-range
// per feature; this file holds the first one's, 0x50-0x53: the cluster map (MAP), what a
// node knows of the members' protocol versions (MEMBERS), and a request to a named node
// with its answer (REQUEST, RESPONSE). All four are connection-level frames of version-4
// connections only.

// Frame types of version 4's cluster map and requests.
const (
	TypeMap      Type = 0x50 // the sender's cluster map
	TypeMembers  Type = 0x51 // nodes' highest protocol versions, as the sender knows them
	TypeRequest  Type = 0x52 // a request for a named node, forwarded hop by hop
	TypeResponse Type = 0x53 // the answer to a request the receiver sent
)

// Bounds of version 4's bodies (SPEC.md, "Version 4").
const (
	// MaxMapDocument bounds a map's document, the canonical JSON the operator published.
	MaxMapDocument = 64 << 10
	// MaxMapBody bounds a MAP body: the largest document, the other keys and room for keys
	// a later build adds. Why a bound of its own: a document of 64 KiB does not fit
	// MaxControlBody with the keys around it.
	MaxMapBody = MaxMapDocument + 4<<10
	// MaxMembers bounds the entries of one MEMBERS frame (and a sender splits a longer
	// list into frames of at most this many).
	MaxMembers = 1024
	// MaxMembersBody bounds a MEMBERS body: MaxMembers entries of the longest name and
	// largest numbers take some 88 KiB.
	MaxMembersBody = 128 << 10
	// MaxRequestPath bounds the names of a REQUEST's path: the hops a request may pass.
	MaxRequestPath = 16
	// MaxRequestTimeout bounds a REQUEST's timeout, in milliseconds.
	MaxRequestTimeout = 60000
	// MaxRequestKind bounds a REQUEST's kind, in bytes.
	MaxRequestKind = 32
	// MaxGeneration is the highest generation a map may have (2^63-1), so that it reads
	// as a signed number wherever it is shown.
	MaxGeneration = 1<<63 - 1
)

// The scopes a REQUEST carries: the caller's token scope.
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
	ScopeAdmin = "admin"
)

// Map is the MAP body: the sender's cluster map. Generation is the document's own
// generation; Document the map's canonical JSON (protocol/clustermap); Publisher the node it was
// published on and Published that node's HLC when it was, which is informative only.
//
// The same body answers a request of kind map (SPEC.md, "Version 4"), where a node that
// holds no map answers the body of generation 0 and no other key (AppendMapAnswer,
// DecodeMapAnswer).
type Map struct {
	Generation uint64 `cbor:"1,keyasint"`
	Document   []byte `cbor:"2,keyasint"`
	Publisher  string `cbor:"3,keyasint"`
	Published  uint64 `cbor:"4,keyasint"`
	Unknown
}

func (*Map) FrameType() Type { return TypeMap }

func (m *Map) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, m, m.Extra) }

// Validate: a generation of 1 to MaxGeneration; a document of 1 to MaxMapDocument bytes; a
// publisher under the name rule. What the document holds (canonical JSON whose generation is
// Generation) is the map's own rule, checked once, by protocol/clustermap, where the node
// decides about the map (a receiving node closes with bad-field when it breaks it).
func (m *Map) Validate() error {
	switch {
	case m.Generation == 0 || m.Generation > MaxGeneration:
		return badField("MAP generation " + strconv.FormatUint(m.Generation, 10) + " is outside 1..2^63-1")
	case len(m.Document) == 0 || len(m.Document) > MaxMapDocument:
		return badField("MAP document of " + strconv.Itoa(len(m.Document)) + " bytes is outside 1.." + strconv.Itoa(MaxMapDocument))
	}
	if err := checkName("MAP publisher", m.Publisher); err != nil {
		return err
	}
	return nil
}

// mapNone is the answer of a node that holds no map: {1: 0}, the one encoding of that body
// in Core Deterministic Encoding.
var mapNone = []byte{0xa1, 0x01, 0x00}

// AppendMapAnswer appends the body that answers a request of kind map: m's MAP body, or,
// when m is nil (no map held), the body of generation 0 and no other key.
func AppendMapAnswer(dst []byte, m *Map) ([]byte, error) {
	if m == nil {
		return append(dst, mapNone...), nil
	}
	if err := m.Validate(); err != nil {
		return dst, err
	}
	return m.AppendBody(dst)
}

// DecodeMapAnswer decodes the body of an answer to a request of kind map: nil when the
// target holds no map, else its MAP body, checked as a MAP frame's is.
func DecodeMapAnswer(b []byte) (*Map, error) {
	if bytes.Equal(b, mapNone) {
		return nil, nil
	}
	body, err := registry[TypeMap].decode(b)
	if err != nil {
		return nil, err
	}
	return body.(*Map), nil
}

// Member is one entry of MEMBERS: node Name speaks protocol versions up to MaxVersion and
// holds the cluster map of Generation (0: none, or not known: a neighbour's report), as
// reported at Stamp (an HLC). Of two entries for one name the higher stamp wins.
type Member struct {
	Name       string `cbor:"1,keyasint"`
	MaxVersion uint64 `cbor:"2,keyasint"`
	Stamp      uint64 `cbor:"3,keyasint"`
	Generation uint64 `cbor:"4,keyasint,omitempty"`
}

// Members is the MEMBERS body: 1 to MaxMembers entries, strictly ascending by name.
type Members struct {
	Entries []Member `cbor:"1,keyasint"`
	Unknown
}

func (*Members) FrameType() Type { return TypeMembers }

func (m *Members) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, m, m.Extra) }

// Validate: 1 to MaxMembers entries, names under the name rule and strictly ascending, a
// max version and a stamp of at least 1.
func (m *Members) Validate() error {
	if len(m.Entries) == 0 || len(m.Entries) > MaxMembers {
		return badField("MEMBERS of " + strconv.Itoa(len(m.Entries)) + " entries; a frame holds 1 to " + strconv.Itoa(MaxMembers))
	}
	for i, e := range m.Entries {
		if err := checkName("member name", e.Name); err != nil {
			return err
		}
		if e.MaxVersion == 0 || e.Stamp == 0 {
			return badField("member " + strconv.Quote(e.Name) + ": a max version and a stamp of at least 1")
		}
		if i > 0 && m.Entries[i-1].Name >= e.Name {
			return badField("member names are not strictly ascending at " + strconv.Quote(e.Name))
		}
	}
	return nil
}

// Request is the REQUEST body: a request of Kind for the node named Target, which passed
// the nodes of Path (the caller first, the sender last). The receiver gives up on it
// TimeoutMS milliseconds after receiving it. Scope is the caller's token scope; Body the
// kind's argument, if any. ID is the sender's, strictly above every id it used on the
// connection.
type Request struct {
	ID        uint64   `cbor:"1,keyasint"`
	Target    string   `cbor:"2,keyasint"`
	Path      []string `cbor:"3,keyasint"`
	TimeoutMS uint64   `cbor:"4,keyasint"`
	Scope     string   `cbor:"5,keyasint"`
	Kind      string   `cbor:"6,keyasint"`
	Body      []byte   `cbor:"7,keyasint,omitempty"`
	Unknown
}

func (*Request) FrameType() Type { return TypeRequest }

func (r *Request) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, r, r.Extra) }

// Validate: an id of at least 1; a target and 1 to MaxRequestPath path names under the name
// rule, no name twice in the path; a timeout of 1 to MaxRequestTimeout ms; scope read, write
// or admin; a kind of 1 to MaxRequestKind bytes of [a-z0-9-].
func (r *Request) Validate() error {
	if r.ID == 0 {
		return badField("REQUEST id 0; ids start at 1")
	}
	if err := checkName("REQUEST target", r.Target); err != nil {
		return err
	}
	if len(r.Path) == 0 || len(r.Path) > MaxRequestPath {
		return badField("REQUEST path of " + strconv.Itoa(len(r.Path)) + " names; it holds 1 to " + strconv.Itoa(MaxRequestPath))
	}
	for i, n := range r.Path {
		if err := checkName("REQUEST path name", n); err != nil {
			return err
		}
		for _, m := range r.Path[:i] {
			if m == n {
				return badField("REQUEST path names " + strconv.Quote(n) + " twice")
			}
		}
	}
	switch {
	case r.TimeoutMS == 0 || r.TimeoutMS > MaxRequestTimeout:
		return badField("REQUEST timeout of " + strconv.FormatUint(r.TimeoutMS, 10) + " ms is outside 1.." + strconv.Itoa(MaxRequestTimeout))
	case r.Scope != ScopeRead && r.Scope != ScopeWrite && r.Scope != ScopeAdmin:
		return badField("REQUEST scope " + strconv.Quote(r.Scope) + " is none of read, write and admin")
	case len(r.Kind) > MaxRequestKind || !token(r.Kind):
		return badField("REQUEST kind " + strconv.Quote(r.Kind) + " is not 1-32 bytes of [a-z0-9-]")
	}
	return nil
}

// Response is the RESPONSE body: the answer to the request ID the receiver sent. Code is
// empty for a success, else a request code (no-route, too-many-requests, ...) or one of the
// kind's own; Message is for humans.
type Response struct {
	ID      uint64 `cbor:"1,keyasint"`
	Code    Code   `cbor:"2,keyasint,omitempty"`
	Message string `cbor:"3,keyasint,omitempty"`
	Body    []byte `cbor:"4,keyasint,omitempty"`
	Unknown
}

func (*Response) FrameType() Type { return TypeResponse }

func (r *Response) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, r, r.Extra) }

// Validate: an id of at least 1; a code, when present, of 1 to 64 bytes of [a-z0-9-]; a
// message of at most MaxCloseText bytes.
func (r *Response) Validate() error {
	switch {
	case r.ID == 0:
		return badField("RESPONSE id 0 answers no request")
	case r.Code != "" && !token(string(r.Code)):
		return badField("RESPONSE code " + strconv.Quote(string(r.Code)) + " is not 1-64 bytes of [a-z0-9-]")
	case len(r.Message) > MaxCloseText:
		return badField("RESPONSE message of " + strconv.Itoa(len(r.Message)) + " bytes exceeds 1024")
	}
	return nil
}

func init() {
	v4 := func(name string, maxBody uint32, decode func([]byte) (Body, error)) typeInfo {
		return typeInfo{name: name, maxBody: maxBody, version: 4, decode: decode}
	}
	register(TypeMap, v4("MAP", MaxMapBody, decodeControl[Map](4, (*Map).Validate, 1, 2, 3, 4)))
	register(TypeMembers, v4("MEMBERS", MaxMembersBody, decodeControl[Members](1, (*Members).Validate, 1)))
	// REQUEST and RESPONSE carry a body of the kind's, bounded by the frame body limit only.
	register(TypeRequest, v4("REQUEST", 0, decodeControl[Request](7, (*Request).Validate, 1, 2, 3, 4, 5, 6)))
	register(TypeResponse, v4("RESPONSE", 0, decodeControl[Response](4, (*Response).Validate, 1)))
}

// DecodeMap, DecodeMembers, DecodeRequest and DecodeResponse decode and check a body of
// their frame type, as a received frame's is (for the WASM ABI's events, which carry the
// bodies).
func DecodeMap(b []byte) (*Map, error)           { return decodeAs[*Map](TypeMap, b) }
func DecodeMembers(b []byte) (*Members, error)   { return decodeAs[*Members](TypeMembers, b) }
func DecodeRequest(b []byte) (*Request, error)   { return decodeAs[*Request](TypeRequest, b) }
func DecodeResponse(b []byte) (*Response, error) { return decodeAs[*Response](TypeResponse, b) }

func decodeAs[B Body](t Type, b []byte) (B, error) {
	var zero B
	body, err := registry[t].decode(b)
	if err != nil {
		return zero, err
	}
	return body.(B), nil
}

// Placement's frame (SPEC.md, "Version 4", "SKIP"): a run of an origin's entries left out
// of a subscriber's channel, in 0x54-0x57.

// TypeSkip is the run of left-out entries on a subscriber's channel.
const TypeSkip Type = 0x54

// MaxSkipTables bounds the placed tables one SKIP names: a sender ends a run where its
// tables would pass it, so a SKIP body stays far within MaxControlBody (64 names of 64
// bytes and the other keys take under 5 KiB).
const MaxSkipTables = 64

// Skip is the SKIP body: on the subscriber's Channel, the origin's entries From..To are left
// out (the subscriber takes none of their operations on this link). Prev is the chain hash
// of entry From-1, where the run joins the subscriber's position (all zero when From is 1),
// and Hash the chain hash of entry To, which the next entry extends; HLC is entry To's.
// Tables are the placed tables the run's entries write, and Generation the map generation
// the sender judged under (0: none, a link's own exclusions).
//
// SKIP is connection-level (its header's channel is 0, the channel is key 1, as PURGED's)
// and carries no credit: a run ends at each DATA the sender sends on the channel, so SKIPs
// are bounded by the DATA the credit bounds, plus one per advance of the sender's head.
type Skip struct {
	Channel    uint32   `cbor:"1,keyasint"`
	From       uint64   `cbor:"2,keyasint"`
	To         uint64   `cbor:"3,keyasint"`
	Prev       Hash     `cbor:"4,keyasint"`
	Hash       Hash     `cbor:"5,keyasint"`
	HLC        HLC      `cbor:"6,keyasint"`
	Tables     [][]byte `cbor:"7,keyasint,omitempty"`
	Generation uint64   `cbor:"8,keyasint"`
	Unknown
}

func (*Skip) FrameType() Type { return TypeSkip }

func (k *Skip) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, k, k.Extra) }

// Validate: a channel above 0; 1 <= From <= To; Prev all zero exactly when From is 1 (no
// entry precedes the first); a Hash that is not all zero; an HLC of at least 1; at most
// MaxSkipTables tables under the name rule, strictly ascending by their bytes.
func (k *Skip) Validate() error {
	switch {
	case k.Channel == 0:
		return badField("SKIP on channel 0")
	case k.From == 0 || k.To < k.From:
		return badField("SKIP run " + strconv.FormatUint(k.From, 10) + ".." + strconv.FormatUint(k.To, 10) + " is not 1 <= from <= to")
	case (k.Prev == Hash{}) != (k.From == 1):
		return badField("SKIP from " + strconv.FormatUint(k.From, 10) + ": prev is all zero exactly when the run starts at seq 1")
	case k.Hash == Hash{}:
		return badField("SKIP without the chain hash of its last entry")
	case k.HLC == 0:
		return badField("SKIP with HLC 0")
	case len(k.Tables) > MaxSkipTables:
		return badField("SKIP of " + strconv.Itoa(len(k.Tables)) + " tables; it names at most " + strconv.Itoa(MaxSkipTables))
	}
	for i, t := range k.Tables {
		if !validNameBytes(t) {
			return badField("SKIP table " + strconv.Quote(string(t)) + " is not 1-64 bytes of [A-Za-z0-9_.-]")
		}
		if i > 0 && bytes.Compare(k.Tables[i-1], t) >= 0 {
			return badField("SKIP tables are not strictly ascending at " + strconv.Quote(string(t)))
		}
	}
	return nil
}

func init() {
	register(TypeSkip, typeInfo{name: "SKIP", maxBody: MaxControlBody, version: 4,
		decode: decodeControl[Skip](8, (*Skip).Validate, 1, 2, 3, 4, 5, 6, 8)})
}

// DecodeSkip decodes and checks a SKIP body, as a received frame's is (for the WASM ABI's
// events, which carry the body).
func DecodeSkip(b []byte) (*Skip, error) { return decodeAs[*Skip](TypeSkip, b) }

// A link's settings (SPEC.md, "Version 4", "LINK"): the direction a node replicates in on
// one connection and the tables it leaves out of it, sent by each side so that both ends
// agree on what crosses the link (docs/design.md §24.6).

// TypeLink carries the sender's settings for the link.
const TypeLink Type = 0x55

// LinkMode is a node's direction for one link: what it lets cross it.
type LinkMode uint64

// The modes. The zero mode is both, the default of a link nobody configured.
const (
	LinkBoth    LinkMode = 0 // this node sends to the peer and receives from it
	LinkReceive LinkMode = 1 // this node only receives from the peer
	LinkSend    LinkMode = 2 // this node only sends to the peer
)

// String is the mode's name, as flags and the API spell it.
func (m LinkMode) String() string {
	switch m {
	case LinkBoth:
		return "both"
	case LinkReceive:
		return "receive"
	case LinkSend:
		return "send"
	}
	return "mode-" + strconv.FormatUint(uint64(m), 10)
}

// ParseLinkMode reads a mode's name: receive, send or both.
func ParseLinkMode(s string) (LinkMode, bool) {
	switch s {
	case "both":
		return LinkBoth, true
	case "receive":
		return LinkReceive, true
	case "send":
		return LinkSend, true
	}
	return 0, false
}

// Sends and Receives say what the mode lets this side do.
func (m LinkMode) Sends() bool    { return m != LinkReceive }
func (m LinkMode) Receives() bool { return m != LinkSend }

// MaxLinkTables bounds the tables one link excludes: a SKIP names at most MaxSkipTables,
// and a run of entries that write only excluded tables must fit one.
const MaxLinkTables = MaxSkipTables

// Link is the LINK body: the sender's mode for this link and the tables it excludes from
// it (sorted by their bytes, distinct, under the name rule), as the sender configured them.
type Link struct {
	Mode   LinkMode `cbor:"1,keyasint"`
	Tables [][]byte `cbor:"2,keyasint,omitempty"`
	Unknown
}

func (*Link) FrameType() Type { return TypeLink }

func (l *Link) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, l, l.Extra) }

// Validate: a mode of 0 (both), 1 (receive) or 2 (send); at most MaxLinkTables tables
// under the name rule, strictly ascending by their bytes.
func (l *Link) Validate() error {
	if l.Mode > LinkSend {
		return badField("LINK mode " + strconv.FormatUint(uint64(l.Mode), 10) + " is none of 0 (both), 1 (receive) and 2 (send)")
	}
	if len(l.Tables) > MaxLinkTables {
		return badField("LINK of " + strconv.Itoa(len(l.Tables)) + " tables; it excludes at most " + strconv.Itoa(MaxLinkTables))
	}
	for i, t := range l.Tables {
		if !validNameBytes(t) {
			return badField("LINK table " + strconv.Quote(string(t)) + " is not 1-64 bytes of [A-Za-z0-9_.-]")
		}
		if i > 0 && bytes.Compare(l.Tables[i-1], t) >= 0 {
			return badField("LINK tables are not strictly ascending at " + strconv.Quote(string(t)))
		}
	}
	return nil
}

func init() {
	register(TypeLink, typeInfo{name: "LINK", maxBody: MaxControlBody, version: 4,
		decode: decodeControl[Link](2, (*Link).Validate, 1)})
}

// DecodeLink decodes and checks a LINK body, as a received frame's is.
func DecodeLink(b []byte) (*Link, error) { return decodeAs[*Link](TypeLink, b) }

// What a copy's snapshot holds of a placed table (SPEC.md, "Version 4", "HOLDS"): a node's
// records of a table it does not carry, or is still filling, reflect that table's entries
// only up to some seq of each origin, while its COPYBEGIN positions say how far it applied
// each origin's log. HOLDS tells the copy's taker the difference, so that a fill or a base
// copy never takes a table's records for whole past what they hold (docs/design.md §24.4).

// TypeHolds says how far a copy's snapshot holds one placed table's entries.
const TypeHolds Type = 0x56

// MaxHoldsSeqs bounds the origins one HOLDS lists: a table whose list is longer goes in
// several HOLDS frames, so that a body stays far within MaxControlBody (512 pairs of a
// 16-byte origin and a seq take under 16 KiB).
const MaxHoldsSeqs = 512

// OriginSeq is one origin's seq in a HOLDS list.
type OriginSeq struct {
	_      struct{} `cbor:",toarray"`
	Origin OriginID
	Seq    uint64
}

// Holds is the HOLDS body: on the copy channel Channel, the snapshot holds table Table's
// records as they are after each listed origin's entries up to its Seq, and after none of
// an unlisted origin's. A table the sender sends no HOLDS for is held whole through the
// COPYBEGIN positions.
//
// Since (0: absent, no claim) is what the sender knows of its own origin's entries: none
// from seq Since on writes the table, because a node writes a table only while its map
// says it carries it, and the sender has not carried this one since before that seq. It
// says nothing of what the snapshot holds: it tells a taker that the entries of the
// sender's origin the snapshot lacks of the table lie below Since, so that a copy may raise
// that origin past the ones from Since on (docs/design.md §24.2, "Base copies"). Every
// frame of a table split across several carries the same Since.
type Holds struct {
	Channel uint32      `cbor:"1,keyasint"`
	Table   []byte      `cbor:"2,keyasint"`
	Seqs    []OriginSeq `cbor:"3,keyasint,omitempty"`
	Since   uint64      `cbor:"4,keyasint,omitempty"`
	Unknown
}

func (*Holds) FrameType() Type { return TypeHolds }

func (h *Holds) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, h, h.Extra) }

// Validate: a channel above 0; a table under the name rule; at most MaxHoldsSeqs origins,
// each non-zero at a seq of at least 1, strictly ascending. Since needs no check: 0 is its
// absence, and any seq from 1 up is a claim a sender may make.
func (h *Holds) Validate() error {
	switch {
	case h.Channel == 0:
		return badField("HOLDS on channel 0")
	case !validNameBytes(h.Table):
		return badField("HOLDS table " + strconv.Quote(string(h.Table)) + " is not 1-64 bytes of [A-Za-z0-9_.-]")
	case len(h.Seqs) > MaxHoldsSeqs:
		return badField("HOLDS of " + strconv.Itoa(len(h.Seqs)) + " origins; it lists at most " + strconv.Itoa(MaxHoldsSeqs))
	}
	for i, s := range h.Seqs {
		if s.Origin.IsZero() || s.Seq == 0 {
			return badField("a HOLDS origin needs a non-zero id and a seq >= 1")
		}
		if i > 0 && bytes.Compare(h.Seqs[i-1].Origin[:], s.Origin[:]) >= 0 {
			return badField("HOLDS origins are not strictly ascending")
		}
	}
	return nil
}

func init() {
	register(TypeHolds, typeInfo{name: "HOLDS", maxBody: MaxControlBody, version: 4,
		decode: decodeControl[Holds](4, (*Holds).Validate, 1, 2)})
}

// DecodeHolds decodes and checks a HOLDS body, as a received frame's is.
func DecodeHolds(b []byte) (*Holds, error) { return decodeAs[*Holds](TypeHolds, b) }

// Fan-in hubs (SPEC.md, "Version 4", "Hubs and leaves"; docs/design.md §27): a leaf
// dials its hub, which re-originates the leaf's entries as its own, and tells the leaf
// how far it got with LEAFSTATE. 0x5B-0x5C are the hubs' sub-range; 0x5C is reserved.

// CapLeaf is the capability of a side that knows the leaf role: a hub that takes leaves
// and a leaf that dials one. A leaf refuses a connection to its hub without it
// (no-leaf-capability), so a node that does not know the role never takes a leaf's origin
// for a peer's. Every side whose version range reaches 4 offers it.
const CapLeaf = "leaf"

// TypeLeafState carries a hub's state of the leaf it is connected to, hub to leaf.
const TypeLeafState Type = 0x5B

// MaxLeafReason bounds LEAFSTATE's reason text: a refusal reason is a short code.
const MaxLeafReason = 64

// LeafState is the LEAFSTATE body: what the hub did with the leaf's entries (docs/design.md
// §27.6). Seqs are the leaf's own (its origin's) except HubSeq, the hub's origin's.
type LeafState struct {
	// Horizon is the HLC below which the hub refuses a leaf write (too-old): its clock less
	// its map's leaf window (0: none told).
	Horizon HLC `cbor:"1,keyasint,omitempty"`
	// Reoriginated is the leaf's mark at the hub: its highest seq the hub re-originated or
	// refused, counted only once durable at the hub; HubSeq the hub's seq of the entry that
	// carries the highest re-originated one (0: none yet).
	Reoriginated uint64 `cbor:"2,keyasint,omitempty"`
	HubSeq       uint64 `cbor:"3,keyasint,omitempty"`
	// Core is the highest leaf seq whose carrying hub entry every member of the hub's map
	// has applied, as the hub knows from its peers' positions.
	Core uint64 `cbor:"4,keyasint,omitempty"`
	// Refused counts the leaf's entries the hub refused on this connection; LastRefused and
	// Reason name the newest refused seq and why (too-old, not-carried, fenced, too-large).
	Refused     uint64 `cbor:"5,keyasint,omitempty"`
	LastRefused uint64 `cbor:"6,keyasint,omitempty"`
	Reason      string `cbor:"7,keyasint,omitempty"`
	Unknown
}

func (*LeafState) FrameType() Type { return TypeLeafState }

func (l *LeafState) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, l, l.Extra) }

// Validate: Core and LastRefused at or below Reoriginated (the hub reports only what it
// passed); a reason exactly when a refused seq is named, of at most MaxLeafReason bytes of
// the name rule's characters.
func (l *LeafState) Validate() error {
	switch {
	case l.Core > l.Reoriginated:
		return badField("LEAFSTATE core seq " + strconv.FormatUint(l.Core, 10) + " above the re-originated " + strconv.FormatUint(l.Reoriginated, 10))
	case l.LastRefused > l.Reoriginated:
		return badField("LEAFSTATE last refused seq " + strconv.FormatUint(l.LastRefused, 10) + " above the re-originated " + strconv.FormatUint(l.Reoriginated, 10))
	case (l.LastRefused == 0) != (l.Reason == ""):
		return badField("LEAFSTATE names a refused seq without a reason, or a reason without a seq")
	case len(l.Reason) > MaxLeafReason:
		return badField("LEAFSTATE reason of " + strconv.Itoa(len(l.Reason)) + " bytes; at most " + strconv.Itoa(MaxLeafReason))
	case l.Reason != "" && !validNameBytes([]byte(l.Reason)):
		return badField("LEAFSTATE reason " + strconv.Quote(l.Reason) + " is not of [A-Za-z0-9_.-]")
	}
	return nil
}

func init() {
	register(TypeLeafState, typeInfo{name: "LEAFSTATE", maxBody: MaxControlBody, version: 4,
		decode: decodeControl[LeafState](7, (*LeafState).Validate)})
}

// DecodeLeafState decodes and checks a LEAFSTATE body, as a received frame's is.
func DecodeLeafState(b []byte) (*LeafState, error) { return decodeAs[*LeafState](TypeLeafState, b) }
