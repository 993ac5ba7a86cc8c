package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"plait/protocol/feed"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// Named feeds (docs/contract.md §24.6): a table's change feed whose acknowledged position
// this node keeps, and which holds retention up to a cap. The decisions and the documents
// are the replica's (replica.PutNamedFeed and the rest); the stream is the table's
// (changes), started at the feed's acknowledged position.

// NamedFeedDoc is one named feed: GET /v1/feeds/{name}'s answer and an item of the
// status's named_feeds. Its fields stand in the order of their JSON names.
type NamedFeedDoc struct {
	HeldBytes  uint64 `json:"held_bytes"` // what the last retention step kept only for this feed
	HoldBytes  uint64 `json:"hold_bytes"` // the cap
	LagBytes   uint64 `json:"lag_bytes"`
	LagEntries uint64 `json:"lag_entries"`
	Lapsed     bool   `json:"lapsed"`
	Name       string `json:"name"`
	Position   string `json:"position"` // the acknowledged position's text (§24.2)
	Table      string `json:"table"`
}

// NewNamedFeedDoc is the document of a named feed's state.
func NewNamedFeedDoc(s replica.NamedFeedStatus) NamedFeedDoc {
	return NamedFeedDoc{HeldBytes: s.HeldBytes, HoldBytes: s.HoldBytes, LagBytes: s.LagBytes, LagEntries: s.LagEntries,
		Lapsed: s.Lapsed, Name: s.Name, Position: feed.Format(positionOf(s.Position)), Table: s.Table}
}

func positionOf(seqs []wire.OriginSeq) feed.Position {
	p := make(feed.Position, 0, len(seqs))
	for _, s := range seqs {
		p = append(p, feed.PositionEntry{Origin: s.Origin, Seq: s.Seq})
	}
	return p
}

// namedFeedStatus is the HTTP status of each refusal of the replica's named feeds.
var namedFeedStatus = map[wire.Code]int{
	replica.CodeBadFeedName:       http.StatusBadRequest,
	replica.CodeBadFeedTable:      http.StatusBadRequest,
	replica.CodeNoSuchFeed:        http.StatusNotFound,
	replica.CodeFeedExists:        http.StatusConflict,
	replica.CodeAhead:             http.StatusConflict,
	replica.CodeTooManyNamedFeeds: http.StatusServiceUnavailable,
}

func failFeed(w http.ResponseWriter, err error) {
	var we *wire.Error
	if errors.As(err, &we) {
		if status, ok := namedFeedStatus[we.Code]; ok {
			fail(w, &apiError{status, string(we.Code), we.Message})
			return
		}
	}
	fail(w, err)
}

// feedName is the request's feed name, checked as the replica checks it, so that a GET
// of a name no feed could have says so rather than not-found.
func feedName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if !replica.ValidFeedName(name) {
		return "", &apiError{http.StatusBadRequest, string(replica.CodeBadFeedName),
			fmt.Sprintf("feed name %q is not 1 to %d of [a-z0-9-]", cut(name), replica.MaxFeedName)}
	}
	return name, nil
}

// decodeStrict decodes one JSON object of body into v, refusing unknown fields.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &apiError{http.StatusBadRequest, "bad-json", err.Error()}
	}
	if dec.More() {
		return &apiError{http.StatusBadRequest, "bad-json", "the body has more than one JSON value"}
	}
	return nil
}

type namedFeedBody struct {
	Table     *string `json:"table"`
	HoldBytes *uint64 `json:"hold_bytes"`
}

// putNamedFeed creates a named feed at this node's positions (201) or sets its cap (200).
func (a *API) putNamedFeed(w http.ResponseWriter, r *http.Request) {
	name, err := feedName(r)
	if err != nil {
		fail(w, err)
		return
	}
	body, err := readBody(w, r, 64<<10)
	if err != nil {
		fail(w, err)
		return
	}
	var b namedFeedBody
	if err := decodeStrict(body, &b); err != nil {
		fail(w, err)
		return
	}
	if b.Table == nil || b.HoldBytes == nil {
		fail(w, &apiError{http.StatusBadRequest, "bad-json", "a named feed's body has table and hold_bytes"})
		return
	}
	st, created, err := a.n.PutNamedFeed(name, *b.Table, *b.HoldBytes)
	if err != nil {
		failFeed(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, NewNamedFeedDoc(st))
}

// namedFeed is the named feed the request's path names; when there is none (or the name
// is bad, or the node cannot tell) it answers the refusal and false.
func (a *API) namedFeed(w http.ResponseWriter, r *http.Request) (replica.NamedFeedStatus, bool) {
	name, err := feedName(r)
	if err != nil {
		fail(w, err)
		return replica.NamedFeedStatus{}, false
	}
	st, ok, err := a.n.NamedFeed(name)
	switch {
	case err != nil:
		fail(w, err)
	case !ok:
		fail(w, noNamedFeed(name))
	}
	return st, err == nil && ok
}

func (a *API) getNamedFeed(w http.ResponseWriter, r *http.Request) {
	if st, ok := a.namedFeed(w, r); ok {
		writeJSON(w, http.StatusOK, NewNamedFeedDoc(st))
	}
}

func (a *API) deleteNamedFeed(w http.ResponseWriter, r *http.Request) {
	name, err := feedName(r)
	if err != nil {
		fail(w, err)
		return
	}
	ok, err := a.n.DeleteNamedFeed(name)
	switch {
	case err != nil:
		fail(w, err)
	case !ok:
		fail(w, noNamedFeed(name))
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// noNamedFeed is the 404 of a named feed this node does not keep.
func noNamedFeed(name string) *apiError {
	return &apiError{http.StatusNotFound, "not-found", "no named feed " + name}
}

type ackBody struct {
	Position *string `json:"position"`
}

// maxAckBody bounds an ack's body: a position of MaxPositionOrigins origins, 54 bytes
// each at most, and room for the JSON around it.
const maxAckBody = feed.MaxPositionOrigins*54 + 1024

func (a *API) ackNamedFeed(w http.ResponseWriter, r *http.Request) {
	name, err := feedName(r)
	if err != nil {
		fail(w, err)
		return
	}
	body, err := readBody(w, r, maxAckBody)
	if err != nil {
		fail(w, err)
		return
	}
	var b ackBody
	if err := decodeStrict(body, &b); err != nil {
		fail(w, err)
		return
	}
	if b.Position == nil {
		fail(w, &apiError{http.StatusBadRequest, "bad-json", "an ack's body has position"})
		return
	}
	pos, err := feed.Parse(*b.Position)
	if err != nil {
		fail(w, &apiError{http.StatusBadRequest, codeBadPosition, err.Error()})
		return
	}
	seqs := make([]wire.OriginSeq, 0, len(pos))
	for _, e := range pos {
		seqs = append(seqs, wire.OriginSeq{Origin: e.Origin, Seq: e.Seq})
	}
	st, err := a.n.AckNamedFeed(name, seqs)
	if err != nil {
		failFeed(w, err)
		return
	}
	writeJSON(w, http.StatusOK, NewNamedFeedDoc(st))
}

// namedFeedChanges streams a named feed: the table's feed (changes) from the feed's
// acknowledged position. The request's own since and Last-Event-ID are not read: where a
// named feed starts is the node's to keep, and an EventSource that reconnects starts
// again from the last ack (the consumer acks what it has done, and is given what it has
// not acknowledged again).
func (a *API) namedFeedChanges(w http.ResponseWriter, r *http.Request) {
	st, ok := a.namedFeed(w, r)
	if !ok {
		return
	}
	r2 := r.Clone(r.Context())
	r2.SetPathValue("t", st.Table)
	r2.URL.RawQuery = url.Values{"since": {feed.Format(positionOf(st.Position))}}.Encode()
	r2.Header.Del("Last-Event-ID")
	a.changes(w, r2)
}
