package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"plait/protocol/feed"
	"plait/protocol/store"
	"plait/protocol/wire"
	"plait/shells/native/apitoken"
)

// Change feeds (docs/contract.md §24, docs/design.md §26.3): GET /v1/tables/{t}/changes
// streams a table's changes from the logs, as server-sent events or as NDJSON. A feed
// holds one chunk of events at a time: it reads the next chunk on the loop (node.FeedRead),
// writes it to its client, and when the reader has caught up waits for the loop to move
// (node.FeedWake) or for its heartbeat. A feed is never forwarded: a node that does not
// carry the table answers not-carried with the carriers.

// The feeds' defaults (docs/contract.md §2).
const (
	DefaultFeedCatchUp      = 5 * time.Second
	DefaultFeedHeartbeat    = 15 * time.Second
	DefaultFeedStallTimeout = 120 * time.Second
	DefaultMaxFeeds         = 256
)

// The bounds of one chunk a feed reads and sends: its memory. An entry larger than the
// bytes is read alone.
const (
	feedChunkEvents = 256
	feedChunkBytes  = 1 << 20
)

// The codes of feeds' refusals (docs/contract.md §6.3) and the reasons of their closes
// (§24.4).
const (
	codeBehind       = "behind"
	codePurged       = "purged"
	codeBadPosition  = "bad-position"
	codeTooManyFeeds = "too-many-feeds"

	closePurged       = "purged"
	closeStalled      = "stalled"
	closeShuttingDown = "shutting-down"
	closeNotCarried   = "not-carried"
	closeUnavailable  = "unavailable"  // the store failed a read (degraded storage)
	closeClientGone   = "client-gone"  // counted only: there is nobody to send a close to
	closeUnauthorized = "unauthorized" // the token the feed started with was revoked
)

// feedRegistry is the API's feeds: how many are open, against --max-feeds, their counts,
// and the close of them all at shutdown.
type feedRegistry struct {
	open     atomic.Int64
	opened   atomic.Uint64
	events   atomic.Uint64
	bytes    atomic.Uint64
	mu       sync.Mutex
	closed   map[string]uint64 // by reason
	refused  map[string]uint64 // by code
	shutdown chan struct{}     // closed by CloseFeeds
	stopOnce sync.Once
}

func newFeedRegistry() *feedRegistry {
	return &feedRegistry{closed: map[string]uint64{}, refused: map[string]uint64{}, shutdown: make(chan struct{})}
}

// take takes a slot for a feed, unless max are open.
func (f *feedRegistry) take(max int) bool {
	for {
		n := f.open.Load()
		if n >= int64(max) {
			return false
		}
		if f.open.CompareAndSwap(n, n+1) {
			f.opened.Add(1)
			return true
		}
	}
}

func (f *feedRegistry) count(m map[string]uint64, key string) {
	f.mu.Lock()
	m[key]++
	f.mu.Unlock()
}

// FeedsDoc is the document's feeds (docs/contract.md §8, §24.7).
type FeedsDoc struct {
	Bytes   uint64            `json:"bytes"`   // bytes written to feeds' clients since start
	Closed  map[string]uint64 `json:"closed"`  // feeds closed, by reason; {} when none
	Events  uint64            `json:"events"`  // change and reread events sent
	Open    int64             `json:"open"`    // feeds streaming now
	Opened  uint64            `json:"opened"`  // feeds that started streaming since start
	Refused map[string]uint64 `json:"refused"` // feed requests refused, by code; {} when none
}

func (f *feedRegistry) doc() FeedsDoc {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := FeedsDoc{Bytes: f.bytes.Load(), Events: f.events.Load(), Open: f.open.Load(), Opened: f.opened.Load(),
		Closed: make(map[string]uint64, len(f.closed)), Refused: make(map[string]uint64, len(f.refused))}
	for k, v := range f.closed {
		d.Closed[k] = v
	}
	for k, v := range f.refused {
		d.Refused[k] = v
	}
	return d
}

// CloseFeeds closes every feed with reason shutting-down, and refuses new ones; for the
// server's shutdown (http.Server.RegisterOnShutdown), which would otherwise wait for them.
func (a *API) CloseFeeds() { a.feeds.stopOnce.Do(func() { close(a.feeds.shutdown) }) }

// feedRefuse answers a feed request's refusal and counts it by code.
func (a *API) feedRefuse(w http.ResponseWriter, status int, code, msg string, extra map[string]any) {
	a.feeds.count(a.feeds.refused, code)
	body := map[string]any{"error": map[string]string{"code": code, "message": msg}}
	for k, v := range extra {
		body[k] = v
	}
	writeJSON(w, status, body)
}

// parseSince reads where a feed starts: ?since= (now, oldest or a position) wins over
// Last-Event-ID (a position); neither is now.
func parseSince(r *http.Request) (feed.Since, error) {
	if s, given := r.URL.Query()["since"]; given {
		return feed.ParseSince(s[0])
	}
	if ids := r.Header.Values("Last-Event-ID"); len(ids) > 0 {
		if len(ids) > 1 {
			return feed.Since{}, errors.New("more than one Last-Event-ID header")
		}
		pos, err := feed.Parse(ids[0])
		if err != nil {
			return feed.Since{}, err
		}
		return feed.Since{Kind: feed.SincePosition, Position: pos}, nil
	}
	return feed.Since{Kind: feed.SinceNow}, nil
}

// changes serves GET /v1/tables/{t}/changes.
func (a *API) changes(w http.ResponseWriter, r *http.Request) {
	table, _, err := a.target(r, false)
	if err != nil {
		fail(w, err)
		return
	}
	if _, forwarded := forwardedScope(r.Context()); forwarded || !a.n.Carries(table) {
		a.feeds.count(a.feeds.refused, codeNotCarried)
		a.notCarried(w, table)
		return
	}
	since, err := parseSince(r)
	if err != nil {
		a.feedRefuse(w, http.StatusBadRequest, codeBadPosition, err.Error(), nil)
		return
	}
	select {
	case <-a.feeds.shutdown:
		a.feedRefuse(w, http.StatusServiceUnavailable, "unavailable", "the node is stopping", nil)
		return
	default:
	}
	if !a.feeds.take(a.limits.MaxFeeds) {
		a.feedRefuse(w, http.StatusServiceUnavailable, codeTooManyFeeds,
			fmt.Sprintf("%d feeds are open, the bound (--max-feeds)", a.limits.MaxFeeds), nil)
		return
	}
	defer a.feeds.open.Add(-1)
	rd, ok := a.startFeed(w, r, table, since)
	if !ok {
		return
	}
	s := &feedStream{a: a, w: w, rc: http.NewResponseController(w), table: string(table), r: rd, req: r,
		ndjson: wantsNDJSON(r)}
	s.serve(r.Context())
}

// startFeed starts the reader: a position ahead of this node waits for it up to
// --feed-catch-up (409 behind after), one below a floor is 410 purged.
func (a *API) startFeed(w http.ResponseWriter, r *http.Request, table []byte, since feed.Since) (*feed.Reader, bool) {
	deadline := time.NewTimer(a.limits.FeedCatchUp)
	defer deadline.Stop()
	for {
		wake := a.n.FeedWake()
		var rd *feed.Reader
		var err error
		if derr := a.n.FeedRead(table, func(st store.Store, in feed.Inputs) { rd, err = feed.StartWith(st, table, since, in) }); derr != nil {
			err = derr
		}
		var behind *feed.BehindError
		var purged *feed.PurgedError
		switch {
		case err == nil:
			return rd, true
		case errors.As(err, &purged):
			a.feedRefuse(w, http.StatusGone, codePurged,
				fmt.Sprintf("origin %s's entries up to seq %d are purged here: the position is below its floor", purged.Origin, purged.Floor),
				map[string]any{"origin": hex.EncodeToString(purged.Origin[:]), "floor": purged.Floor})
			return nil, false
		case !errors.As(err, &behind):
			fail(w, err)
			return nil, false
		}
		select {
		case <-wake:
			continue
		case <-deadline.C:
		case <-r.Context().Done():
			return nil, false
		case <-a.n.Stopping():
			a.feedRefuse(w, http.StatusServiceUnavailable, "unavailable", "the node is stopping", nil)
			return nil, false
		case <-a.feeds.shutdown:
			a.feedRefuse(w, http.StatusServiceUnavailable, "unavailable", "the node is stopping", nil)
			return nil, false
		}
		a.feedRefuse(w, http.StatusConflict, codeBehind,
			fmt.Sprintf("this node has not applied the position yet (waited %s, --feed-catch-up); its position is %q", a.limits.FeedCatchUp, behind.Have.String()),
			map[string]any{"position": behind.Have.String()})
		return nil, false
	}
}

// wantsNDJSON reports whether the client asks for NDJSON (Accept: application/x-ndjson);
// anything else is served server-sent events.
func wantsNDJSON(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.TrimSpace(mt) == "application/x-ndjson" {
				return true
			}
		}
	}
	return false
}

// feedStream is one open feed.
type feedStream struct {
	a      *API
	w      http.ResponseWriter
	rc     *http.ResponseController
	table  string
	r      *feed.Reader
	req    *http.Request // the request, whose token is checked again before every chunk
	ndjson bool
	sent   string // the position of the last message that carried one
	buf    []byte
	ended  bool // the feed's close is counted
}

// changeDoc is a change event's JSON (docs/contract.md §24.3).
type changeDoc struct {
	Event      string  `json:"event,omitempty"` // NDJSON only
	Table      string  `json:"table"`
	Origin     string  `json:"origin"`
	OriginName string  `json:"origin_name"`
	Seq        uint64  `json:"seq"`
	HLC        uint64  `json:"hlc"`
	Token      string  `json:"token,omitempty"`
	Leaf       string  `json:"leaf,omitempty"`     // a hub's re-originated leaf write: the leaf's origin id
	LeafSeq    uint64  `json:"leaf_seq,omitempty"` // and the write's seq in the leaf's log
	Ops        []opDoc `json:"ops"`
	Position   string  `json:"position"`
}

type opDoc struct {
	Op       string  `json:"op"`
	Key      string  `json:"key"`
	Value    *string `json:"value,omitempty"`
	ValueB64 *string `json:"value_b64,omitempty"`
	Won      bool    `json:"won"`
}

type rereadDoc struct {
	Event    string `json:"event,omitempty"`
	Table    string `json:"table"`
	Reason   string `json:"reason"`
	Position string `json:"position"`
}

type closeDoc struct {
	Event    string  `json:"event,omitempty"`
	Reason   string  `json:"reason"`
	Message  string  `json:"message"`
	Origin   string  `json:"origin,omitempty"`
	Floor    *uint64 `json:"floor,omitempty"`
	Position string  `json:"position"`
}

type heartbeatDoc struct {
	Event    string `json:"event"`
	Position string `json:"position"`
}

// serve streams until the client goes, the node stops or the feed must close.
func (s *feedStream) serve(ctx context.Context) {
	a := s.a
	h := s.w.Header()
	if s.ndjson {
		h.Set("Content-Type", "application/x-ndjson")
	} else {
		h.Set("Content-Type", "text/event-stream")
	}
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy that buffers would hold the events back
	s.w.WriteHeader(http.StatusOK)
	// The first message is a heartbeat with the position the feed starts at, so that a
	// consumer that started at now and drops before its first change resumes from there
	// (an EventSource by its Last-Event-ID), not from a later now that skips what came
	// between.
	if !s.heartbeat() {
		return
	}
	heartbeat := time.NewTicker(a.limits.FeedHeartbeat)
	defer heartbeat.Stop()
	table := []byte(s.table)
	for {
		wake := a.n.FeedWake()
		if !a.n.Carries(table) {
			s.close(closeNotCarried, "this node no longer carries table "+s.table+" under its cluster map", nil)
			return
		}
		if why := s.revoked(); why != "" {
			s.close(closeUnauthorized, why, nil)
			return
		}
		var evs []feed.Event
		var err error
		if derr := a.n.FeedRead(table, func(st store.Store, in feed.Inputs) {
			evs, err = s.r.Next(st, in, feedChunkEvents, feedChunkBytes)
		}); derr != nil {
			s.close(closeShuttingDown, "the node is stopping", nil)
			return
		}
		for _, ev := range evs {
			if !s.event(ev) {
				return
			}
		}
		var purged *feed.PurgedError
		switch {
		case errors.As(err, &purged):
			s.close(closePurged, fmt.Sprintf("origin %s's entries up to seq %d were purged here before the feed read them", purged.Origin, purged.Floor), purged)
			return
		case err != nil:
			s.close(closeUnavailable, err.Error(), nil)
			return
		}
		if len(evs) > 0 {
			if !s.flush() {
				return
			}
			heartbeat.Reset(a.limits.FeedHeartbeat) // a heartbeat is for a feed with no events
		}
		if !s.r.CaughtUp() {
			continue // the chunk was full: the rest follows at once
		}
		select {
		case <-wake:
		case <-heartbeat.C:
			if !s.heartbeat() {
				return
			}
		case <-ctx.Done():
			s.end(closeClientGone)
			return
		case <-a.n.Stopping():
			s.close(closeShuttingDown, "the node is stopping", nil)
			return
		case <-a.feeds.shutdown:
			s.close(closeShuttingDown, "the node is stopping", nil)
			return
		}
	}
}

// revoked says why the feed's token no longer reads, "" while it does (or the API is open,
// or another node forwarded the request with its caller's scope). A feed outlives its
// request's check at the start: a token removed from the file (and reloaded) must end the
// streams it opened, at the next chunk or heartbeat, not when they break.
func (s *feedStream) revoked() string {
	a := s.a
	if a.tokens == nil {
		return ""
	}
	if _, forwarded := forwardedScope(s.req.Context()); forwarded {
		return ""
	}
	have, why := a.authenticate(s.req)
	switch {
	case why != "":
		return why
	case !have.Covers(apitoken.Read):
		return "the feed's token no longer has scope read"
	}
	return ""
}

// event writes one change or reread event (flushed with its chunk).
func (s *feedStream) event(ev feed.Event) bool {
	pos := ev.Position.String()
	var name string
	var v any
	switch ev.Kind {
	case feed.Change:
		d := changeDoc{Table: s.table, Origin: hex.EncodeToString(ev.Origin[:]), OriginName: ev.Name, Seq: ev.Seq,
			HLC: uint64(ev.HLC), Ops: make([]opDoc, len(ev.Ops)), Position: pos}
		if d.OriginName == "" && ev.Origin == s.a.n.Origin() {
			// The store names the origins it was sent entries of; its own name is its
			// identity's (store.Store.Names, Identity).
			d.OriginName = s.a.n.Name()
		}
		if !ev.Token.IsZero() {
			d.Token = ev.Token.String()
		}
		if !ev.Leaf.IsZero() {
			d.Leaf, d.LeafSeq = hex.EncodeToString(ev.Leaf[:]), ev.LeafSeq
		}
		for i, op := range ev.Ops {
			o := opDoc{Op: "put", Key: string(op.Key), Won: op.Won}
			if op.Kind == wire.OpDelete {
				o.Op = "delete"
			} else if utf8.Valid(op.Value) {
				v := string(op.Value)
				o.Value = &v
			} else {
				v := base64.StdEncoding.EncodeToString(op.Value)
				o.ValueB64 = &v
			}
			d.Ops[i] = o
		}
		name, v = "change", &d
		if s.ndjson {
			d.Event = name
		}
	default:
		d := rereadDoc{Table: s.table, Reason: ev.Reason, Position: pos}
		name, v = "reread", &d
		if s.ndjson {
			d.Event = name
		}
	}
	if !s.message(name, pos, v) {
		return false
	}
	s.a.feeds.events.Add(1)
	return true
}

// heartbeat writes a heartbeat: in SSE a comment, and an id-only message when the position
// moved since the last message that carried one (entries with no change of the table), so
// that a client's Last-Event-ID follows it.
func (s *feedStream) heartbeat() bool {
	pos := s.r.Position().String()
	if s.ndjson {
		return s.message("", pos, heartbeatDoc{Event: "heartbeat", Position: pos}) && s.flush()
	}
	s.buf = append(s.buf[:0], ": heartbeat\n\n"...)
	if pos != s.sent {
		s.buf = append(s.buf, "id: "...)
		s.buf = append(s.buf, pos...)
		s.buf = append(s.buf, "\n\n"...)
		s.sent = pos
	}
	return s.write() && s.flush()
}

// close writes the close event, flushes it and counts the close.
func (s *feedStream) close(reason, msg string, purged *feed.PurgedError) {
	s.end(reason)
	pos := s.r.Position().String()
	d := closeDoc{Reason: reason, Message: msg, Position: pos}
	if purged != nil {
		d.Origin = hex.EncodeToString(purged.Origin[:])
		d.Floor = &purged.Floor
	}
	if s.ndjson {
		d.Event = "close"
	}
	if s.message("close", pos, d) {
		s.flush()
	}
}

// message writes one message: in SSE `event:`, `id:` and `data:` lines, in NDJSON the
// object alone on its line.
func (s *feedStream) message(event, pos string, v any) bool {
	data, err := json.Marshal(v)
	if err != nil { // the documents hold strings and numbers only
		panic("httpapi: a feed event does not encode: " + err.Error())
	}
	s.buf = s.buf[:0]
	if s.ndjson {
		s.buf = append(append(s.buf, data...), '\n')
	} else {
		s.buf = append(s.buf, "event: "...)
		s.buf = append(s.buf, event...)
		s.buf = append(s.buf, "\nid: "...)
		s.buf = append(s.buf, pos...)
		s.buf = append(s.buf, "\ndata: "...)
		s.buf = append(s.buf, data...)
		s.buf = append(s.buf, "\n\n"...)
	}
	s.sent = pos
	return s.write()
}

// write writes s.buf within --feed-stall-timeout; a client that does not take it by then is
// closed stalled (its close event cannot reach it: the connection is dropped).
func (s *feedStream) write() bool {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.a.limits.FeedStallTimeout))
	n, err := s.w.Write(s.buf)
	s.a.feeds.bytes.Add(uint64(n))
	return s.wrote(err)
}

func (s *feedStream) flush() bool {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.a.limits.FeedStallTimeout))
	return s.wrote(s.rc.Flush())
}

// wrote counts a failed write's close: stalled past the deadline, client-gone otherwise.
func (s *feedStream) wrote(err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.end(closeStalled)
	default:
		s.end(closeClientGone)
	}
	return false
}

// end counts the feed's close, once: a close event that then fails to write is its reason's.
func (s *feedStream) end(reason string) {
	if !s.ended {
		s.ended = true
		s.a.feeds.count(s.a.feeds.closed, reason)
	}
}

// The feeds' metrics (docs/contract.md §9, §24.7).
var (
	descFeedsOpen    = prometheus.NewDesc("plait_feeds_open", "Change feeds streaming now.", nil, nil)
	descFeedsOpened  = prometheus.NewDesc("plait_feeds_opened_total", "Change feeds that started streaming.", nil, nil)
	descFeedEvents   = prometheus.NewDesc("plait_feed_events_total", "Change and reread events sent to change feeds.", nil, nil)
	descFeedBytes    = prometheus.NewDesc("plait_feed_bytes_total", "Bytes written to change feeds' clients.", nil, nil)
	descFeedsClosed  = prometheus.NewDesc("plait_feeds_closed_total", "Change feeds closed, by reason: purged, stalled, shutting-down, not-carried, unavailable, client-gone.", []string{"reason"}, nil)
	descFeedsRefused = prometheus.NewDesc("plait_feeds_refused_total", "Change feed requests refused, by code: behind, purged, bad-position, too-many-feeds, not-carried, unavailable.", []string{"code"}, nil)
)

var feedDescs = []*prometheus.Desc{descFeedsOpen, descFeedsOpened, descFeedEvents, descFeedBytes, descFeedsClosed, descFeedsRefused}

// collectFeeds sends the feeds' metrics.
func (a *API) collectFeeds(ch chan<- prometheus.Metric) {
	d := a.feeds.doc()
	ch <- prometheus.MustNewConstMetric(descFeedsOpen, prometheus.GaugeValue, float64(d.Open))
	ch <- prometheus.MustNewConstMetric(descFeedsOpened, prometheus.CounterValue, float64(d.Opened))
	ch <- prometheus.MustNewConstMetric(descFeedEvents, prometheus.CounterValue, float64(d.Events))
	ch <- prometheus.MustNewConstMetric(descFeedBytes, prometheus.CounterValue, float64(d.Bytes))
	for _, r := range slices.Sorted(maps.Keys(d.Closed)) {
		ch <- prometheus.MustNewConstMetric(descFeedsClosed, prometheus.CounterValue, float64(d.Closed[r]), r)
	}
	for _, c := range slices.Sorted(maps.Keys(d.Refused)) {
		ch <- prometheus.MustNewConstMetric(descFeedsRefused, prometheus.CounterValue, float64(d.Refused[c]), c)
	}
}
