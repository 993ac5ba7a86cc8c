package abi

import (
	"encoding/binary"
	"strconv"
	"time"

	"github.com/fxamacker/cbor/v2"

	"plait/protocol/wire"
)

// Version is the ABI version this build implements; the guest exports it as abi_version.
// Released versions are frozen: a new version only adds commands, record kinds or keys.
// Version 2 adds the commands of protocol version 2, version 3 those of protocol version 3
// (floors, the purged answer and the base copy), version 4 the compact records
// (ConfigMsg.Compact, compact.go), version 5 (a draft, with protocol version 4) the
// commands and events of protocol version 4: the cluster map, member entries and requests.
const Version = 5

// Op is a command's opcode. A session command's payload layout and the session method
// it calls are its row in commands.go.
type Op uint8

const (
	OpConfigure Op = 0x01 // CBOR ConfigMsg: create the session
	OpStart     Op = 0x02 // i64 now | nonce
	OpReceive   Op = 0x03 // i64 now | message
	OpTick      Op = 0x04 // i64 now
	OpSubscribe Op = 0x05 // CBOR SubscribeMsg
	OpOffer     Op = 0x06 // u64 position | transaction encoding
	OpAck       Op = 0x07 // u64 position
	OpObserve   Op = 0x08 // origin[16] | u64 seq | hash[32]
	OpName      Op = 0x09 // origin[16] | name
	OpClose     Op = 0x0A // CBOR CloseMsg
	OpDecode    Op = 0x0B // a message, decoded statelessly with the default limits

	// ABI version 2: the commands of protocol version 2.
	OpSubscribeOrigins   Op = 0x0C // CBOR SubscribeMsg, its vector (key 2) only
	OpUnsubscribeOrigins Op = 0x0D // CBOR OriginsMsg
	OpAckOrigin          Op = 0x0E // origin[16] | u64 seq
	OpSend               Op = 0x0F // a transaction encoding
	OpAdvertiseHeads     Op = 0x10 // CBOR HeadsMsg
	OpWithdrawHeads      Op = 0x11 // CBOR OriginsMsg
	// OpReady hands over the session's output (empty payload). In a session configured with
	// DeferReady, a batch carries MESSAGE and EVENT records only when it holds an OpReady.
	OpReady Op = 0x12

	// ABI version 3: the commands of protocol version 3.
	OpAdvertiseFloors Op = 0x13 // CBOR HeadsMsg, its floors (key 3) only
	OpPurged          Op = 0x14 // origin[16] | u64 seq | hash[32]
	OpRequestCopy     Op = 0x15 // CBOR CopyMsg, its resume point (keys 3 and 4) only
	OpAckChunk        Op = 0x16 // empty
	OpAbortCopy       Op = 0x17 // CBOR AbortCopyMsg
	OpBeginCopy       Op = 0x18 // CBOR CopyBeginMsg, without its channel (key 1)
	OpSendChunk       Op = 0x19 // a CHUNK body
	OpEndCopy         Op = 0x1A // empty
	// Anti-entropy (ABI 3, added with protocol capability anti-entropy; a guest that
	// predates it answers unknown-command, and never negotiates the capability).
	OpAskRange    Op = 0x1B // a RANGEDIGEST body
	OpAnswerRange Op = 0x1C // a RANGERECORDS body

	// ABI version 5 (a draft until release 0.4): the commands of protocol version 4.
	OpSendMap     Op = 0x1D // CBOR wire.Map: a MAP body
	OpSendMembers Op = 0x1E // CBOR wire.Members: a MEMBERS body
	OpRequest     Op = 0x1F // CBOR wire.Request: a REQUEST body, its id (key 1) ignored; the RESULT's key 4 is the id given
	OpRespond     Op = 0x20 // CBOR wire.Response: a RESPONSE body, its id (key 1) the request answered
	OpForget      Op = 0x21 // u64 id
	OpSkip        Op = 0x22 // CBOR SkipMsg: a run of an origin's entries left out of its channel
	OpLink        Op = 0x23 // CBOR wire.Link: a LINK body, this side's settings for the link
	OpCopyHolds   Op = 0x24 // CBOR CopyHoldsMsg: how far the snapshot of the copy served holds one placed table
	OpLeafState   Op = 0x25 // CBOR wire.LeafState: a LEAFSTATE body, a hub's state of the leaf on the other end
	OpQuiet       Op = 0x26 // CBOR wire.Quiet: a QUIET body, the origins this side now takes directly and no longer does
)

// Kind is an output record's kind.
type Kind uint8

const (
	KindResult  Kind = 0x01 // CBOR ResultMsg: the outcome of one command
	KindMessage Kind = 0x02 // one wire message to send
	KindEvent   Kind = 0x03 // CBOR EventMsg
	KindStatus  Kind = 0x04 // CBOR StatusMsg; always the last record of a batch
	KindDecoded Kind = 0x05 // CBOR DecodedMsg: the answer to OpDecode
)

// recordHeader is the size of a command's or record's header: kind or op, u32 length.
const recordHeader = 5

// MaxBatch bounds an input batch: the guest's alloc refuses more (returns 0).
const MaxBatch = 256 << 20

// Batch builds an input batch.
type Batch struct{ b []byte }

// Bytes returns the encoded batch.
func (b *Batch) Bytes() []byte { return b.b }

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() { b.b = b.b[:0] }

func (b *Batch) add(op Op, parts ...[]byte) {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b.b = append(b.b, byte(op))
	b.b = binary.BigEndian.AppendUint32(b.b, uint32(n))
	for _, p := range parts {
		b.b = append(b.b, p...)
	}
}

// Raw appends a command with an arbitrary opcode and payload (for tests of unknown ones).
func (b *Batch) Raw(op Op, payload []byte) { b.add(op, payload) }

// Configure appends OpConfigure.
func (b *Batch) Configure(c ConfigMsg) error {
	p, err := encMode.Marshal(&c)
	if err != nil {
		return err
	}
	b.add(OpConfigure, p)
	return nil
}

// Decode appends OpDecode.
func (b *Batch) Decode(msg []byte) { b.add(OpDecode, msg) }

// Ready appends OpReady.
func (b *Batch) Ready() { b.add(OpReady) }

// The session commands below are each its row of commands.go appended (Append), spelled as
// tests and tools like to call them; a new command needs no method here.

// Start appends OpStart.
func (b *Batch) Start(now time.Time, nonce []byte) {
	_ = Append(b, CmdStart, TimedMsg{Now: now, Data: nonce}) // a fixed layout: never an error
}

// Receive appends OpReceive.
func (b *Batch) Receive(now time.Time, msg []byte) {
	_ = Append(b, CmdReceive, TimedMsg{Now: now, Data: msg})
}

// Tick appends OpTick.
func (b *Batch) Tick(now time.Time) { _ = Append(b, CmdTick, TimedMsg{Now: now}) }

// Subscribe appends OpSubscribe.
func (b *Batch) Subscribe(m SubscribeMsg) error { return Append(b, CmdSubscribe, m) }

// Offer appends OpOffer.
func (b *Batch) Offer(position uint64, txn []byte) {
	_ = Append(b, CmdOffer, OfferMsg{Position: position, Txn: txn})
}

// Ack appends OpAck.
func (b *Batch) Ack(position uint64) { _ = Append(b, CmdAck, position) }

// Observe appends OpObserve.
func (b *Batch) Observe(origin wire.OriginID, seq uint64, hash wire.Hash) {
	_ = Append(b, CmdObserve, CursorMsg{Origin: origin, Seq: seq, Hash: hash})
}

// Name appends OpName.
func (b *Batch) Name(origin wire.OriginID, name string) {
	_ = Append(b, CmdName, NameMsg{Origin: origin, Name: name})
}

// Close appends OpClose.
func (b *Batch) Close(code wire.Code, message string) error {
	return Append(b, CmdClose, CloseMsg{Code: string(code), Message: message})
}

// SubscribeOrigins appends OpSubscribeOrigins.
func (b *Batch) SubscribeOrigins(vec []CursorMsg) error {
	return Append(b, CmdSubscribeOrigins, SubscribeMsg{Vector: vec})
}

// UnsubscribeOrigins appends OpUnsubscribeOrigins.
func (b *Batch) UnsubscribeOrigins(origins []wire.OriginID) error {
	return Append(b, CmdUnsubscribeOrigins, OriginsMsg{Origins: origins})
}

// AckOrigin appends OpAckOrigin.
func (b *Batch) AckOrigin(origin wire.OriginID, seq uint64) {
	_ = Append(b, CmdAckOrigin, AckOriginMsg{Origin: origin, Seq: seq})
}

// Send appends OpSend.
func (b *Batch) Send(txn []byte) { _ = Append(b, CmdSend, txn) }

// AdvertiseHeads appends OpAdvertiseHeads.
func (b *Batch) AdvertiseHeads(heads []wire.Head) error {
	return Append(b, CmdAdvertiseHeads, HeadsMsg{Heads: heads})
}

// WithdrawHeads appends OpWithdrawHeads.
func (b *Batch) WithdrawHeads(origins []wire.OriginID) error {
	return Append(b, CmdWithdrawHeads, OriginsMsg{Origins: origins})
}

// AdvertiseFloors appends OpAdvertiseFloors.
func (b *Batch) AdvertiseFloors(floors []wire.Floor) error {
	return Append(b, CmdAdvertiseFloors, HeadsMsg{Floors: floors})
}

// Purged appends OpPurged.
func (b *Batch) Purged(origin wire.OriginID, seq uint64, hash wire.Hash) {
	_ = Append(b, CmdPurged, CursorMsg{Origin: origin, Seq: seq, Hash: hash})
}

// RequestCopy appends OpRequestCopy.
func (b *Batch) RequestCopy(table, key []byte) error {
	return Append(b, CmdRequestCopy, CopyMsg{Table: table, Key: key})
}

// AckChunk appends OpAckChunk.
func (b *Batch) AckChunk() { _ = Append(b, CmdAckChunk, struct{}{}) }

// AbortCopy appends OpAbortCopy.
func (b *Batch) AbortCopy(outgoing bool, code wire.Code, msg string) error {
	return Append(b, CmdAbortCopy, AbortCopyMsg{Outgoing: outgoing, Code: string(code), Message: msg})
}

// BeginCopy appends OpBeginCopy.
func (b *Batch) BeginCopy(positions []wire.CopyPosition, tables, records, size uint64) error {
	return Append(b, CmdBeginCopy, CopyBeginMsg{Positions: positions, Tables: tables, Records: records, Bytes: size})
}

// SendChunk appends OpSendChunk.
func (b *Batch) SendChunk(body []byte) { _ = Append(b, CmdSendChunk, body) }

// EndCopy appends OpEndCopy.
func (b *Batch) EndCopy() { _ = Append(b, CmdEndCopy, struct{}{}) }

// AskRange appends OpAskRange.
func (b *Batch) AskRange(d *wire.RangeDigest) error { return Append(b, CmdAskRange, d) }

// AnswerRange appends OpAnswerRange.
func (b *Batch) AnswerRange(body []byte) { _ = Append(b, CmdAnswerRange, body) }

// SendMap appends OpSendMap.
func (b *Batch) SendMap(m wire.Map) error { return Append(b, CmdSendMap, m) }

// SendMembers appends OpSendMembers.
func (b *Batch) SendMembers(entries []wire.Member) error {
	return Append(b, CmdSendMembers, wire.Members{Entries: entries})
}

// Request appends OpRequest.
func (b *Batch) Request(r wire.Request) error { return Append(b, CmdRequest, r) }

// Respond appends OpRespond: r answers request id.
func (b *Batch) Respond(id uint64, r wire.Response) error {
	r.ID = id
	return Append(b, CmdRespond, r)
}

// Forget appends OpForget.
func (b *Batch) Forget(id uint64) { _ = Append(b, CmdForget, id) }

// Skip appends OpSkip.
func (b *Batch) Skip(origin wire.OriginID, to uint64, hash wire.Hash, hlc wire.HLC, tables [][]byte, generation uint64) error {
	return Append(b, CmdSkip, SkipMsg{Origin: origin, To: to, Hash: hash, HLC: hlc, Tables: tables, Generation: generation})
}

// Link appends OpLink.
func (b *Batch) Link(l wire.Link) error { return Append(b, CmdLink, l) }

// Quiet appends OpQuiet.
func (b *Batch) Quiet(quiet, loud []wire.OriginID) error {
	return Append(b, CmdQuiet, wire.Quiet{Quiet: quiet, Loud: loud})
}

// LeafState appends OpLeafState.
func (b *Batch) LeafState(l wire.LeafState) error { return Append(b, CmdLeafState, l) }

// CopyHolds appends OpCopyHolds.
func (b *Batch) CopyHolds(table []byte, seqs []wire.OriginSeq, since uint64) error {
	return Append(b, CmdCopyHolds, CopyHoldsMsg{Table: table, Seqs: seqs, Since: since})
}

// SkipMsg is OpSkip's payload: V4().Skip's arguments.
type SkipMsg struct {
	Origin     wire.OriginID `cbor:"1,keyasint"`
	To         uint64        `cbor:"2,keyasint"`
	Hash       wire.Hash     `cbor:"3,keyasint"`
	HLC        wire.HLC      `cbor:"4,keyasint"`
	Tables     [][]byte      `cbor:"5,keyasint,omitempty"`
	Generation uint64        `cbor:"6,keyasint,omitempty"`
}

// CopyHoldsMsg is OpCopyHolds's payload: V4().CopyHolds's arguments.
type CopyHoldsMsg struct {
	Table []byte           `cbor:"1,keyasint"`
	Seqs  []wire.OriginSeq `cbor:"2,keyasint,omitempty"`
	Since uint64           `cbor:"3,keyasint,omitempty"`
}

// OriginsMsg is a list of origins.
type OriginsMsg struct {
	Origins []wire.OriginID `cbor:"1,keyasint"`
}

// HeadsMsg carries heads, withdrawn origins and (ABI 3) floors, as the HEADS frame does.
type HeadsMsg struct {
	Heads     []wire.Head     `cbor:"1,keyasint,omitempty"`
	Withdrawn []wire.OriginID `cbor:"2,keyasint,omitempty"`
	Floors    []wire.Floor    `cbor:"3,keyasint,omitempty"`
}

// CopyMsg (ABI 3) is a copy request, as the COPY frame carries it.
type CopyMsg struct {
	Channel uint32 `cbor:"1,keyasint,omitempty"`
	Credit  uint64 `cbor:"2,keyasint,omitempty"`
	Table   []byte `cbor:"3,keyasint,omitempty"`
	Key     []byte `cbor:"4,keyasint,omitempty"`
}

// CopyBeginMsg (ABI 3) is a COPYBEGIN's content.
type CopyBeginMsg struct {
	Channel   uint32              `cbor:"1,keyasint,omitempty"`
	Positions []wire.CopyPosition `cbor:"2,keyasint,omitempty"`
	Tables    uint64              `cbor:"3,keyasint,omitempty"`
	Records   uint64              `cbor:"4,keyasint,omitempty"`
	Bytes     uint64              `cbor:"5,keyasint,omitempty"`
}

// AbortCopyMsg (ABI 3) is OpAbortCopy's payload.
type AbortCopyMsg struct {
	Outgoing bool   `cbor:"1,keyasint,omitempty"`
	Code     string `cbor:"2,keyasint"`
	Message  string `cbor:"3,keyasint,omitempty"`
}

// CreditMsg is the credit Send has for one origin's channel. CBOR has it as an array; the
// compact layout as a message of keys 1 and 2, its origin written even when zero.
type CreditMsg struct {
	_      struct{}      `cbor:",toarray"`
	Origin wire.OriginID `compact:"1,always"`
	Credit uint64        `compact:"2"`
}

// ConfigMsg is OpConfigure's payload.
type ConfigMsg struct {
	Role         uint8         `cbor:"1,keyasint"`
	Name         string        `cbor:"2,keyasint"`
	Origin       wire.OriginID `cbor:"3,keyasint"`
	Secret       []byte        `cbor:"4,keyasint,omitempty"`
	MinVersion   uint64        `cbor:"5,keyasint,omitempty"`
	MaxVersion   uint64        `cbor:"6,keyasint,omitempty"`
	Capabilities []string      `cbor:"7,keyasint,omitempty"`
	ExpectedPeer string        `cbor:"8,keyasint,omitempty"`
	Limits       LimitsMsg     `cbor:"9,keyasint,omitempty"`
	// DeferReady (ABI 2): the session's output stays in it until an OpReady, as a native
	// caller's stays until it calls Ready, so frames of several batches share messages
	// and the send budget counts them exactly as natively.
	DeferReady bool `cbor:"10,keyasint,omitempty"`
	// ChannelBinding (ABI 3 guests and later read it; older guests ignore the key, so a
	// host gives it only to a guest whose build knows handshake.CapTLSExporter).
	ChannelBinding []byte `cbor:"11,keyasint,omitempty"`
	// Compact (ABI 4): RESULT, EVENT and STATUS come as the compact kinds of compact.go
	// instead of CBOR. Older guests ignore the key and answer CBOR, which a host reads
	// as before (ParseResult, ParseEvent and ParseStatus read both).
	Compact bool `cbor:"12,keyasint,omitempty"`
	// Leaf (ABI 5, protocol version 4): the session is a leaf's to its hub (HELLO key 10).
	Leaf bool `cbor:"13,keyasint,omitempty"`
}

// LimitsMsg carries protocol.Limits; durations in nanoseconds; 0 means the default.
type LimitsMsg struct {
	MaxFrameBody     uint64 `cbor:"1,keyasint,omitempty"`
	MaxMessage       uint64 `cbor:"2,keyasint,omitempty"`
	MaxSendBuffer    uint64 `cbor:"3,keyasint,omitempty"`
	MaxUnackedBytes  uint64 `cbor:"4,keyasint,omitempty"`
	MaxOrigins       uint64 `cbor:"5,keyasint,omitempty"`
	HandshakeTimeout uint64 `cbor:"6,keyasint,omitempty"`
	PingInterval     uint64 `cbor:"7,keyasint,omitempty"`
	LivenessTimeout  uint64 `cbor:"8,keyasint,omitempty"`
	MaxChannels      uint64 `cbor:"9,keyasint,omitempty"`
	MaxChannelBuffer uint64 `cbor:"10,keyasint,omitempty"`
	MaxSessionBuffer uint64 `cbor:"11,keyasint,omitempty"`
	// ABI version 5: the bound on version 4's requests in flight, each way.
	MaxRequestsInFlight uint64 `cbor:"12,keyasint,omitempty"`
}

// CursorMsg is one entry of a vector.
type CursorMsg struct {
	Origin wire.OriginID `cbor:"1,keyasint"`
	Seq    uint64        `cbor:"2,keyasint"`
	Hash   wire.Hash     `cbor:"3,keyasint"`
}

// SubscribeMsg is OpSubscribe's payload.
type SubscribeMsg struct {
	From   uint64      `cbor:"1,keyasint"`
	Vector []CursorMsg `cbor:"2,keyasint,omitempty"`
}

// CloseMsg is OpClose's payload.
type CloseMsg struct {
	Code    string `cbor:"1,keyasint"`
	Message string `cbor:"2,keyasint,omitempty"`
}

// ErrorMsg is a *wire.Error.
type ErrorMsg struct {
	Code    string `cbor:"1,keyasint"`
	Class   string `cbor:"2,keyasint"`
	Message string `cbor:"3,keyasint,omitempty"`
	Frame   uint8  `cbor:"4,keyasint,omitempty"`
	Offset  int64  `cbor:"5,keyasint"` // -1: not about a frame
}

// ResultMsg is the outcome of one command.
type ResultMsg struct {
	Op    uint8     `cbor:"1,keyasint"`
	Index uint64    `cbor:"2,keyasint"` // the command's index in its batch
	Err   *ErrorMsg `cbor:"3,keyasint,omitempty"`
	// ID (ABI 5) is the id an OpRequest's session gave the request (V4().Request's
	// result); absent for every other command, and for a request refused.
	ID uint64 `cbor:"4,keyasint,omitempty"`
}

// HandshakeMsg is a protocol.HandshakeInfo.
type HandshakeMsg struct {
	Version       uint64        `cbor:"1,keyasint"`
	Caps          []string      `cbor:"2,keyasint,omitempty"`
	PeerName      string        `cbor:"3,keyasint"`
	PeerOrigin    wire.OriginID `cbor:"4,keyasint"`
	PeerMin       uint64        `cbor:"5,keyasint"`
	PeerMax       uint64        `cbor:"6,keyasint"`
	Authenticated bool          `cbor:"7,keyasint,omitempty"`
	Bound         bool          `cbor:"8,keyasint,omitempty"`
	PeerLeaf      bool          `cbor:"9,keyasint,omitempty"` // ABI 5: the peer's HELLO said it is a leaf
}

// EventMsg is a protocol.Event.
type EventMsg struct {
	Kind      uint8          `cbor:"1,keyasint"`
	Position  uint64         `cbor:"2,keyasint,omitempty"`
	Txn       []byte         `cbor:"3,keyasint,omitempty"`
	Expected  uint64         `cbor:"4,keyasint,omitempty"`
	Origin    *wire.OriginID `cbor:"5,keyasint,omitempty"`
	Name      string         `cbor:"6,keyasint,omitempty"`
	Frame     uint8          `cbor:"7,keyasint,omitempty"`
	Handshake *HandshakeMsg  `cbor:"8,keyasint,omitempty"`
	Err       *ErrorMsg      `cbor:"9,keyasint,omitempty"`
	ByPeer    bool           `cbor:"10,keyasint,omitempty"`
	Count     uint64         `cbor:"11,keyasint,omitempty"`
	Seq       uint64         `cbor:"12,keyasint,omitempty"`
	Hash      *wire.Hash     `cbor:"13,keyasint,omitempty"`
	Heads     *HeadsMsg      `cbor:"14,keyasint,omitempty" compact:",cbor"`
	Outgoing  bool           `cbor:"15,keyasint,omitempty"`
	// ABI version 3: the base copy.
	Copy      *CopyMsg      `cbor:"16,keyasint,omitempty" compact:",cbor"`
	CopyBegin *CopyBeginMsg `cbor:"17,keyasint,omitempty" compact:",cbor"`
	Chunk     []byte        `cbor:"18,keyasint,omitempty"` // the CHUNK body
	// ABI version 3, anti-entropy: the RANGEDIGEST body asked, the RANGERECORDS body answered.
	RangeDigest []byte `cbor:"19,keyasint,omitempty"`
	Range       []byte `cbor:"20,keyasint,omitempty"`
	// ABI version 5, protocol version 4: the MAP, MEMBERS, REQUEST and RESPONSE bodies
	// received (a request the session refused itself too), and whether an answer is late.
	Map      []byte `cbor:"21,keyasint,omitempty"`
	Members  []byte `cbor:"22,keyasint,omitempty"`
	Request  []byte `cbor:"23,keyasint,omitempty"`
	Response []byte `cbor:"24,keyasint,omitempty"`
	Late     bool   `cbor:"25,keyasint,omitempty"`
	// ABI version 5, placement: the SKIP body received (skip, and a duplicate, gap or
	// divergence about a run).
	Skip []byte `cbor:"26,keyasint,omitempty"`
	// The LINK body received (link).
	Link []byte `cbor:"27,keyasint,omitempty"`
	// The HOLDS body received (copy-holds).
	Holds []byte `cbor:"28,keyasint,omitempty"`
	// The LEAFSTATE body received (leaf-state).
	LeafState []byte `cbor:"29,keyasint,omitempty"`
	// The QUIET body received (quiet).
	Quiet []byte `cbor:"30,keyasint,omitempty"`
}

// StatsMsg is a protocol.Stats.
type StatsMsg struct {
	BytesIn        uint64 `cbor:"1,keyasint"`
	BytesOut       uint64 `cbor:"2,keyasint"`
	MessagesIn     uint64 `cbor:"3,keyasint"`
	MessagesOut    uint64 `cbor:"4,keyasint"`
	TxnsReceived   uint64 `cbor:"5,keyasint"`
	TxnsSent       uint64 `cbor:"6,keyasint"`
	Duplicates     uint64 `cbor:"7,keyasint"`
	Gaps           uint64 `cbor:"8,keyasint"`
	Divergences    uint64 `cbor:"9,keyasint"`
	IgnoredFrames  uint64 `cbor:"10,keyasint"`
	ProtocolErrors uint64 `cbor:"11,keyasint"`
	// ABI version 2
	ResendsRequested uint64 `cbor:"12,keyasint,omitempty"`
	ResendsReceived  uint64 `cbor:"13,keyasint,omitempty"`
	Discarded        uint64 `cbor:"14,keyasint,omitempty"`
	Stale            uint64 `cbor:"15,keyasint,omitempty"`
	// ABI version 3, anti-entropy
	RangeBytesIn  uint64 `cbor:"16,keyasint,omitempty"`
	RangeBytesOut uint64 `cbor:"17,keyasint,omitempty"`
	// The frames read and queued, in total and by type (protocol.Stats.FramesInByType and
	// FramesOutByType): one FrameCountMsg per type with a count, by type number, so that a
	// host and a guest of different builds agree whatever their registries hold. A
	// pointer (nil: no frame yet), so that StatsMsg stays comparable, as the compact
	// codec's zero check of a nested value needs.
	FramesIn  uint64          `cbor:"18,keyasint,omitempty"`
	FramesOut uint64          `cbor:"19,keyasint,omitempty"`
	Frames    *FrameCountsMsg `cbor:"20,keyasint,omitempty"`
}

// FrameCountsMsg is a session's frame counts by type, the types with a count in numeric
// order, the unknown bucket (type 0) first.
type FrameCountsMsg struct {
	Types []FrameCountMsg `cbor:"1,keyasint,omitempty"`
}

// FrameCountMsg is the frames of one type a session read (In) and queued (Out). Type 0
// (never a frame type) is the unknown bucket: every type the guest's build does not know.
// A host that does not know a type the guest counted adds it to its own unknown bucket.
type FrameCountMsg struct {
	Type uint8  `cbor:"1,keyasint"`
	In   uint64 `cbor:"2,keyasint,omitempty"`
	Out  uint64 `cbor:"3,keyasint,omitempty"`
}

// StatusMsg is the session's state after a batch.
type StatusMsg struct {
	Configured bool      `cbor:"1,keyasint"`
	State      uint8     `cbor:"2,keyasint"`
	Connected  bool      `cbor:"3,keyasint"` // as of the latest time a command carried
	HeldBytes  uint64    `cbor:"4,keyasint"`
	ReadPaused bool      `cbor:"5,keyasint"`
	SendBudget uint64    `cbor:"6,keyasint"`
	Deadline   int64     `cbor:"7,keyasint"` // Unix nanoseconds; 0: none
	RTT        int64     `cbor:"8,keyasint"` // nanoseconds
	Version    uint64    `cbor:"9,keyasint"` // negotiated; 0 before
	Stats      StatsMsg  `cbor:"10,keyasint"`
	Err        *ErrorMsg `cbor:"11,keyasint,omitempty"`
	// LastReceive (Unix ns) and Liveness (ns) let a host answer Connected(now) for any now:
	// established and now - LastReceive < Liveness.
	LastReceive int64         `cbor:"12,keyasint"`
	Liveness    int64         `cbor:"13,keyasint"`
	MinVersion  uint64        `cbor:"14,keyasint"` // the advertised range
	MaxVersion  uint64        `cbor:"15,keyasint"`
	Handshake   *HandshakeMsg `cbor:"16,keyasint,omitempty"` // once established
	Limits      *LimitsMsg    `cbor:"17,keyasint,omitempty"` // in effect, defaults applied
	Credits     []CreditMsg   `cbor:"18,keyasint,omitempty"` // per origin the peer subscribed to, sorted
	HasReady    bool          `cbor:"19,keyasint,omitempty"` // (ABI 2) output waits for OpReady
	Resumed     bool          `cbor:"20,keyasint,omitempty"` // (ABI 2) reads resumed, liveness clock not yet restarted
	CopyCredit  uint64        `cbor:"21,keyasint,omitempty"` // (ABI 3) the credit SendChunk has
	// ClockOffset (ABI 3) is the estimated offset of the peer's clock from this side's, in
	// nanoseconds (Session.ClockOffset); absent while the peer is not measured, so a zero
	// offset is told apart from none, and a guest that predates it reads as unmeasured.
	ClockOffset *int64 `cbor:"22,keyasint,omitempty"`
	// RangeAsked (ABI 3, anti-entropy): this side asked a range not answered yet.
	RangeAsked bool `cbor:"23,keyasint,omitempty"`
}

// FrameMsg is one decoded frame.
type FrameMsg struct {
	Type    uint8  `cbor:"1,keyasint"`
	Flags   uint8  `cbor:"2,keyasint"`
	Channel uint32 `cbor:"3,keyasint"`
	Offset  uint64 `cbor:"4,keyasint"`
	Encoded []byte `cbor:"5,keyasint"`           // the frame as this build re-encodes it from its value
	Known   bool   `cbor:"6,keyasint,omitempty"` // this build implements the frame's type
}

// DecodedMsg is the answer to OpDecode.
type DecodedMsg struct {
	Frames []FrameMsg `cbor:"1,keyasint,omitempty"`
	Err    *ErrorMsg  `cbor:"2,keyasint,omitempty"`
}

var (
	encMode cbor.EncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	if encMode, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic(err)
	}
	if decMode, err = (cbor.DecOptions{
		DupMapKey:       cbor.DupMapKeyEnforcedAPF,
		IndefLength:     cbor.IndefLengthForbidden,
		TagsMd:          cbor.TagsForbidden,
		MaxNestedLevels: 8,
	}).DecMode(); err != nil {
		panic(err)
	}
}

// ErrorOf converts a *wire.Error.
func ErrorOf(e *wire.Error) *ErrorMsg {
	if e == nil {
		return nil
	}
	m := &ErrorMsg{Code: string(e.Code), Class: string(e.Class), Message: e.Message, Offset: int64(e.Offset)}
	if e.Offset != wire.NoOffset {
		m.Frame = uint8(e.Frame)
	}
	return m
}

// Wire converts back to a *wire.Error.
func (m *ErrorMsg) Wire() *wire.Error {
	if m == nil {
		return nil
	}
	return &wire.Error{Code: wire.Code(m.Code), Class: wire.Class(m.Class), Message: m.Message,
		Frame: wire.Type(m.Frame), Offset: int(m.Offset)}
}

// Record is one output record.
type Record struct {
	Kind    Kind
	Payload []byte
}

// Split splits an output batch into records. The payloads alias out.
func Split(out []byte) ([]Record, error) {
	var recs []Record
	for off := 0; off < len(out); {
		if len(out)-off < recordHeader {
			return recs, wire.NewError(wire.CodeBadArgument, "truncated record header at "+strconv.Itoa(off))
		}
		n := int(binary.BigEndian.Uint32(out[off+1:]))
		if n > len(out)-off-recordHeader {
			return recs, wire.NewError(wire.CodeBadArgument, "record at "+strconv.Itoa(off)+" runs past the end")
		}
		recs = append(recs, Record{Kind: Kind(out[off]), Payload: out[off+recordHeader : off+recordHeader+n]})
		off += recordHeader + n
	}
	return recs, nil
}

// Unmarshal decodes a CBOR record payload.
func Unmarshal(payload []byte, v any) error { return decMode.Unmarshal(payload, v) }
