package protocol

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"plait/protocol/wire"
)

// V4Commands are the commands only a version-4 connection takes (Session.V4): the cluster
// map, member entries and requests between nodes (SPEC.md, "Version 4"). On an older
// connection they are refused with invalid-state.
type V4Commands interface {
	// SendMap sends this side's cluster map (MAP): once established when it holds one, and
	// whenever it adopts another. m must pass the rules a receiver checks (its document
	// canonical JSON whose generation is m's); a body beyond the peer's frame limit is
	// refused with frame-too-large.
	SendMap(m wire.Map) error
	// SendMembers sends member entries (MEMBERS), sorted by name and split into frames of
	// at most wire.MaxMembers that fit the peer's frame limit. A name twice, or an entry
	// that breaks the rules, is refused (bad-argument) and nothing is sent; no entry sends
	// nothing.
	SendMembers(entries []wire.Member) error
	// Request sends a request (REQUEST) and returns the id the session gave it: the next
	// of the connection, strictly increasing (whatever r.ID holds is replaced). The path
	// ends with this node's name. The answer arrives as EventResponse with that id. It is
	// refused with too-many-requests while Limits.MaxRequestsInFlight requests are neither
	// answered nor forgotten, frame-too-large beyond the peer's frame limit and
	// send-buffer-full beyond the send buffer; nothing is sent then, and no id is used.
	Request(r wire.Request) (uint64, error)
	// Respond answers the peer's request id (EventRequest) with r (whatever r.ID holds is
	// replaced): once, so a request not received or answered already is refused
	// (invalid-state). It is refused, the request still owed, with frame-too-large beyond
	// the peer's frame limit and send-buffer-full beyond the send buffer.
	Respond(id uint64, r wire.Response) error
	// Forget gives up a request this side sent (its caller timed out, or went away): it no
	// longer counts as in flight, and its answer, if one comes, arrives as EventResponse
	// with Late set. A request answered or forgotten already is forgotten again silently; an
	// id never sent is refused (bad-argument).
	Forget(id uint64) error
	// Skip queues a SKIP on the channel of origin (after the peer subscribed to it): the
	// origin's entries from the channel's next seq (the subscriber's position + 1, or a
	// RESEND's from, or the seq after the last entry or run sent) to `to` are left out of
	// this link. hash and hlc are entry to's chain hash and HLC, tables the placed tables
	// the run writes (strictly ascending, at most wire.MaxSkipTables), generation the map
	// generation the caller judged under. The session fills the channel, the run's first
	// seq and its prev (the chain hash of the position the run starts after, which the
	// session knows: the subscriber's, or the end of what was sent), and moves the channel
	// to (to, hash) as Send does for an entry; the next entry sent must extend hash.
	//
	// A SKIP takes no credit. It is refused with invalid-state when the peer has not
	// subscribed to the origin, bad-argument when to is below the channel's next seq or the
	// run breaks SKIP's rules (a zero hash, HLC 0, tables), or the origin has no name,
	// frame-too-large beyond the peer's frame limit (a caller ends a run before its tables
	// pass it) and send-buffer-full beyond the send buffer; nothing is queued then.
	Skip(origin wire.OriginID, to uint64, hash wire.Hash, hlc wire.HLC, tables [][]byte, generation uint64) error
	// Link sends this side's settings for the link (LINK): once established, and again
	// whenever they change. l must pass LINK's rules (a mode of 0 to 2, at most
	// wire.MaxLinkTables tables, sorted and distinct), else it is refused with bad-argument
	// and nothing is sent.
	Link(l wire.Link) error
	// LeafState sends the hub's state of the leaf on the other end (LEAFSTATE): on a
	// version-4 connection with the capability leaf whose peer's HELLO said it is a leaf
	// (else invalid-state); l must pass LEAFSTATE's rules (bad-argument).
	LeafState(l wire.LeafState) error
	// CopyHolds tells the taker of the copy this side serves how far the snapshot holds
	// placed table `table` (HOLDS, SPEC.md "HOLDS"): after each listed origin's entries up
	// to its seq, and after none of an unlisted origin's; no seqs: none of its entries. A
	// table the copy holds whole through its COPYBEGIN positions needs no call. It goes
	// after the peer asked for the copy (EventCopyRequested) and before BeginCopy, else it
	// is refused with invalid-state. seqs are non-zero origins at seqs of at least 1,
	// strictly ascending; tables strictly ascending across calls, and a call for the table
	// of the previous call goes on with origins above that call's last (a list split by
	// the caller, with the same since): else bad-argument, and nothing is sent. The session
	// splits seqs into frames of at most wire.MaxHoldsSeqs origins that fit the peer's
	// frame limit, each carrying since. since (0: no claim) says that none of this side's
	// own entries from that seq on writes the table: it has not carried the table since
	// before it (a node writes a table only while its map says it carries it).
	CopyHolds(table []byte, seqs []wire.OriginSeq, since uint64) error
	// Quiet tells the peer which origins this side now takes directly from their own node
	// (quiet: the peer advertises them to it no more) and which it no longer does (loud:
	// the peer advertises them again, at once) (QUIET, SPEC.md "The quiet control plane").
	// The first call sends a QUIET even with both empty, and should come as soon as the
	// connection is established: the peer's first full advertisement waits for it; a later
	// call with both empty sends nothing. The lists are sorted here; a zero origin, one
	// twice or in both lists is refused (bad-argument), and so is a set told the peer
	// beyond Limits.MaxOrigins (too-many-origins); nothing is sent then. An origin already
	// told quiet, or loud while not told quiet, is sent again (the peer takes it as a no-op).
	// The session splits a long QUIET into frames that fit the peer's frame limit.
	Quiet(quiet, loud []wire.OriginID) error
}

// V4 returns the version-4 commands of the session.
func (s *Session) V4() V4Commands { return (*v4Commands)(s) }

// v4Commands is a Session seen through its version-4 commands.
type v4Commands Session

func (s *Session) needV4(cmd string) *wire.Error {
	if err := s.needEstablished(cmd); err != nil {
		return err
	}
	if s.info.Version < 4 {
		return wire.NewError(wire.CodeInvalidState, cmd+" on a version-"+strconv.FormatUint(s.info.Version, 10)+" connection")
	}
	return nil
}

// queueV4 queues a version-4 frame of the encoded body: refused with frame-too-large
// beyond the peer's frame limit, and, when buffered, with send-buffer-full beyond the
// send buffer (a request's body and an answer's may be as large as a frame).
func (s *Session) queueV4(t wire.Type, body []byte, buffered bool) *wire.Error {
	size := wire.HeaderSize + len(body)
	switch {
	case len(body) > s.peerFrame:
		return wire.NewError(wire.CodeFrameTooLarge, "a "+t.String()+" body of "+strconv.Itoa(len(body))+
			" bytes exceeds the peer's frame limit of "+strconv.Itoa(s.peerFrame))
	case buffered && s.outBytes > 0 && s.outBytes+size > s.limits.MaxSendBuffer:
		return wire.NewError(wire.CodeSendBufferFull, strconv.Itoa(s.outBytes)+" bytes are queued; take them with Ready first")
	}
	s.sendRaw(t, 0, body)
	return nil
}

func (c *v4Commands) SendMap(m wire.Map) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV4("SendMap"); err != nil {
		return err
	}
	if err := m.Validate(); err != nil {
		return wire.NewError(wire.CodeBadArgument, "MAP: "+err.Error())
	}
	body, err := m.AppendBody(nil)
	if err != nil {
		return wire.NewError(wire.CodeBadArgument, "MAP: "+err.Error())
	}
	if err := s.queueV4(wire.TypeMap, body, false); err != nil {
		return err
	}
	return nil
}

func (c *v4Commands) SendMembers(entries []wire.Member) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV4("SendMembers"); err != nil {
		return err
	}
	sorted := slices.SortedFunc(slices.Values(entries), func(a, b wire.Member) int { return strings.Compare(a.Name, b.Name) })
	for lo := 0; lo < len(sorted); lo += wire.MaxMembers {
		part := wire.Members{Entries: sorted[lo:min(len(sorted), lo+wire.MaxMembers)]}
		if err := part.Validate(); err != nil {
			return wire.NewError(wire.CodeBadArgument, "MEMBERS: "+err.Error())
		}
		if lo > 0 && sorted[lo-1].Name == sorted[lo].Name {
			return wire.NewError(wire.CodeBadArgument, "MEMBERS: member "+quote(sorted[lo].Name)+" twice")
		}
	}
	for lo := 0; lo < len(sorted); {
		lo = s.sendFitting(lo, min(len(sorted), lo+wire.MaxMembers), func(lo, hi int) wire.Body {
			return &wire.Members{Entries: sorted[lo:hi]}
		})
	}
	return nil
}

func (c *v4Commands) Request(r wire.Request) (uint64, error) {
	s := (*Session)(c)
	s.begin()
	if err := s.needV4("Request"); err != nil {
		return 0, err
	}
	if len(s.v4.out) >= s.limits.MaxRequestsInFlight {
		return 0, wire.NewError(wire.CodeTooManyRequests, strconv.Itoa(len(s.v4.out))+
			" requests sent are neither answered nor forgotten")
	}
	r.ID = s.v4.lastOut + 1
	if err := r.Validate(); err != nil {
		return 0, wire.NewError(wire.CodeBadArgument, "REQUEST: "+err.Error())
	}
	if last := r.Path[len(r.Path)-1]; last != s.cfg.Name {
		return 0, wire.NewError(wire.CodeBadArgument, "REQUEST: the path ends at "+quote(last)+", not at this node "+quote(s.cfg.Name))
	}
	body, err := r.AppendBody(nil)
	if err != nil {
		return 0, wire.NewError(wire.CodeBadArgument, "REQUEST: "+err.Error())
	}
	if err := s.queueV4(wire.TypeRequest, body, true); err != nil {
		return 0, err
	}
	s.v4.lastOut = r.ID
	s.v4.out[r.ID] = struct{}{}
	return r.ID, nil
}

func (c *v4Commands) Respond(id uint64, r wire.Response) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV4("Respond"); err != nil {
		return err
	}
	if _, owed := s.v4.in[id]; !owed {
		why := " is answered already"
		if id == 0 || id > s.v4.lastIn {
			why = " was never received"
		}
		return wire.NewError(wire.CodeInvalidState, "request "+strconv.FormatUint(id, 10)+why)
	}
	r.ID = id
	if err := r.Validate(); err != nil {
		return wire.NewError(wire.CodeBadArgument, "RESPONSE: "+err.Error())
	}
	body, err := r.AppendBody(nil)
	if err != nil {
		return wire.NewError(wire.CodeBadArgument, "RESPONSE: "+err.Error())
	}
	if err := s.queueV4(wire.TypeResponse, body, true); err != nil {
		return err
	}
	delete(s.v4.in, id)
	return nil
}

func (c *v4Commands) Forget(id uint64) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV4("Forget"); err != nil {
		return err
	}
	if id == 0 || id > s.v4.lastOut {
		return wire.NewError(wire.CodeBadArgument, "request "+strconv.FormatUint(id, 10)+" was never sent")
	}
	delete(s.v4.out, id)
	return nil
}

func (c *v4Commands) Skip(origin wire.OriginID, to uint64, hash wire.Hash, hlc wire.HLC, tables [][]byte, generation uint64) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV4("Skip"); err != nil {
		return err
	}
	ch := s.chans.outOrigin[origin]
	if ch == nil {
		return wire.NewError(wire.CodeInvalidState, "the peer has not subscribed to origin "+origin.String())
	}
	if to < ch.next {
		return wire.NewError(wire.CodeBadArgument, "a run to seq "+strconv.FormatUint(to, 10)+" where the channel of origin "+
			origin.String()+" needs "+strconv.FormatUint(ch.next, 10)+" or above")
	}
	name, named := s.names[origin]
	if !named {
		return wire.NewError(wire.CodeBadArgument, "origin "+origin.String()+" has no name: SetOriginName first, its ORIGIN frame precedes its runs")
	}
	k := wire.Skip{Channel: ch.id, From: ch.next, To: to, Prev: ch.chain, Hash: hash, HLC: hlc, Tables: tables, Generation: generation}
	if err := k.Validate(); err != nil {
		return wire.NewError(wire.CodeBadArgument, "SKIP: "+err.Error())
	}
	body, err := k.AppendBody(nil)
	if err != nil {
		return wire.NewError(wire.CodeBadArgument, "SKIP: "+err.Error())
	}
	originFrame, oerr := s.originFrame(origin, name)
	if oerr != nil {
		return oerr
	}
	size := wire.HeaderSize + len(body)
	switch {
	case len(body) > s.peerFrame:
		return wire.NewError(wire.CodeFrameTooLarge, "a SKIP body of "+strconv.Itoa(len(body))+
			" bytes exceeds the peer's frame limit of "+strconv.Itoa(s.peerFrame))
	case s.outBytes > 0 && s.outBytes+size+len(originFrame) > s.limits.MaxSendBuffer:
		return wire.NewError(wire.CodeSendBufferFull, strconv.Itoa(s.outBytes)+" bytes are queued; take them with Ready first")
	}
	s.queueOrigin(origin, originFrame)
	s.sendRaw(wire.TypeSkip, 0, body)
	ch.sent(to, hash, true)
	ch.first = false
	return nil
}

func (c *v4Commands) Link(l wire.Link) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV4("Link"); err != nil {
		return err
	}
	if err := l.Validate(); err != nil {
		return wire.NewError(wire.CodeBadArgument, "LINK: "+err.Error())
	}
	body, err := l.AppendBody(nil)
	if err != nil {
		return wire.NewError(wire.CodeBadArgument, "LINK: "+err.Error())
	}
	if err := s.queueV4(wire.TypeLink, body, false); err != nil {
		return err
	}
	return nil
}

func (c *v4Commands) LeafState(l wire.LeafState) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV4("LeafState"); err != nil {
		return err
	}
	if !s.leafLink(false) {
		return wire.NewError(wire.CodeInvalidState, "LeafState on a connection that is not to a leaf (the peer's HELLO key 10, the capability leaf)")
	}
	if err := l.Validate(); err != nil {
		return wire.NewError(wire.CodeBadArgument, "LEAFSTATE: "+err.Error())
	}
	body, err := l.AppendBody(nil)
	if err != nil {
		return wire.NewError(wire.CodeBadArgument, "LEAFSTATE: "+err.Error())
	}
	if err := s.queueV4(wire.TypeLeafState, body, false); err != nil {
		return err
	}
	return nil
}

func (c *v4Commands) CopyHolds(table []byte, seqs []wire.OriginSeq, since uint64) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV4("CopyHolds"); err != nil {
		return err
	}
	out := s.chans.copyOut
	switch {
	case out == nil:
		return wire.NewError(wire.CodeInvalidState, "the peer asked for no copy")
	case out.begun:
		return wire.NewError(wire.CodeInvalidState, "CopyHolds after BeginCopy: HOLDS precede the copy's COPYBEGIN")
	}
	for lo := 0; lo == 0 || lo < len(seqs); lo += wire.MaxHoldsSeqs {
		part := wire.Holds{Channel: out.id, Table: table, Seqs: seqs[lo:min(len(seqs), lo+wire.MaxHoldsSeqs)], Since: since}
		if err := part.Validate(); err != nil {
			return wire.NewError(wire.CodeBadArgument, "HOLDS: "+err.Error())
		}
		if lo > 0 && bytes.Compare(seqs[lo-1].Origin[:], seqs[lo].Origin[:]) >= 0 {
			return wire.NewError(wire.CodeBadArgument, "HOLDS: origins are not strictly ascending at "+seqs[lo].Origin.String())
		}
	}
	if why := out.holds.after(table, seqs); why != "" {
		return wire.NewError(wire.CodeBadArgument, why)
	}
	if bytes.Equal(table, out.holds.table) && since != out.holds.since {
		// A taker reads since from whichever frame of the table it looks at.
		return wire.NewError(wire.CodeBadArgument, "a HOLDS of table "+quote(string(table))+" goes on with since "+
			strconv.FormatUint(since, 10)+", not the previous one's "+strconv.FormatUint(out.holds.since, 10))
	}
	out.holds.advance(table, seqs, since)
	holds := func(lo, hi int) wire.Body {
		return &wire.Holds{Channel: out.id, Table: table, Seqs: seqs[lo:hi], Since: since}
	}
	for lo := 0; lo == 0 || lo < len(seqs); {
		lo = max(s.sendFitting(lo, min(len(seqs), lo+wire.MaxHoldsSeqs), holds), 1)
	}
	return nil
}

// maxQuietFrame is how many origins one QUIET carries at most (17 bytes each in CBOR, so
// that a frame stays far below wire.MaxControlBody); a longer one is split.
const maxQuietFrame = 2048

func (c *v4Commands) Quiet(quiet, loud []wire.OriginID) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV4("Quiet"); err != nil {
		return err
	}
	cmpID := func(a, b wire.OriginID) int { return bytes.Compare(a[:], b[:]) }
	q := wire.Quiet{Quiet: slices.SortedFunc(slices.Values(quiet), cmpID), Loud: slices.SortedFunc(slices.Values(loud), cmpID)}
	if err := q.Validate(); err != nil {
		return wire.NewError(wire.CodeBadArgument, "QUIET: "+err.Error())
	}
	n := len(s.v4.quietOut)
	for _, o := range q.Loud {
		if _, in := s.v4.quietOut[o]; in {
			n--
		}
	}
	for _, o := range q.Quiet {
		if _, in := s.v4.quietOut[o]; !in {
			n++
		}
	}
	if n > s.limits.MaxOrigins {
		return wire.NewError(wire.CodeTooManyOrigins, "the quiet set told the peer would hold "+strconv.Itoa(n)+
			" origins, above "+strconv.Itoa(s.limits.MaxOrigins))
	}
	total := len(q.Quiet) + len(q.Loud)
	if total == 0 && s.v4.quietSent {
		return nil
	}
	s.v4.quietSent = true
	for _, o := range q.Loud {
		delete(s.v4.quietOut, o)
	}
	for _, o := range q.Quiet {
		s.v4.quietOut[o] = struct{}{}
	}
	// part is the QUIET of items lo..hi of the quiet list followed by the loud one.
	part := func(lo, hi int) *wire.Quiet {
		nq := len(q.Quiet)
		return &wire.Quiet{Quiet: q.Quiet[min(lo, nq):min(hi, nq)], Loud: q.Loud[max(lo-nq, 0):max(hi-nq, 0)]}
	}
	for lo := 0; lo == 0 || lo < total; {
		hi := min(total, lo+maxQuietFrame)
		for hi-lo > 1 {
			enc, err := part(lo, hi).AppendBody(nil)
			if err != nil || len(enc) <= s.peerFrame {
				break
			}
			hi = lo + (hi-lo)/2
		}
		s.sendControl(part(lo, hi)) // sendControl, as every control frame: it stamps what it sends
		lo = max(hi, 1)
	}
	return nil
}
