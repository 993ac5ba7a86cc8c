package client

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"time"
)

// Event is one event of a change feed (docs/contract.md §25.4, §24.3).
type Event struct {
	// Kind is "change" (a log entry's operations of the table) or "reread" (the table was
	// written around the log, or the node was not sent some entries: read it again, from a
	// listing, before going on).
	Kind       string
	Table      string
	Origin     string // change: the entry's origin id, hex
	OriginName string
	Seq        uint64 // change: the entry's seq in its origin's log
	HLC        uint64
	Token      string // change: the lock token the entry was written under, hex; "" for none
	// Leaf and LeafSeq: a change a hub re-originated from one of its leaves (docs/contract.md
	// §26): the leaf's origin id, hex, and the write's seq in the leaf's log; "" and 0 for
	// any other change.
	Leaf    string
	LeafSeq uint64
	Ops     []ChangeOp // change: the entry's operations of the table, in order
	Reason  string     // reread: "skipped", "copy" or "repair"
	// Position is the feed's position after this event: keep it, and start a feed there to
	// go on after it (Changes' since).
	Position string
}

// ChangeOp is one operation of a change.
type ChangeOp struct {
	Delete bool
	Key    []byte
	Value  []byte
	// Won is whether the node's current version of the key was this operation's when the
	// event was read: false when a newer write had replaced it already.
	Won bool
}

// FeedClosedError is a feed the node closed for a reason a new connection would meet
// again: "purged" (the feed's position is below an origin's floor: Origin and Floor) or
// "not-carried" (the node does not carry the table). errors.Is matches ErrPurged and
// ErrNotCarried.
type FeedClosedError struct {
	Reason, Message string
	Origin          string
	Floor           uint64
	Position        string // the feed's position when it closed
}

func (e *FeedClosedError) Error() string {
	s := "change feed closed: " + e.Reason
	if e.Origin != "" {
		s += fmt.Sprintf(" (origin %s, floor %d)", e.Origin, e.Floor)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

func (e *FeedClosedError) Is(target error) bool {
	c, ok := target.(*codeError)
	return ok && c.code == e.Reason
}

// maxEventLine bounds one NDJSON line: a change holds a transaction's operations of one
// table, at most 8 MiB (§6.1), base64 of its values and JSON around them.
const maxEventLine = 16 << 20

// Changes iterates over the change feed of table (GET /v1/tables/{t}/changes, NDJSON,
// docs/contract.md §25.4) from since: "now" (or ""), "oldest", or a position an event
// gave (to start from the empty position, before every entry, give "oldest"). It keeps the position of the last event or heartbeat it read, and when the
// connection drops, the node closes the feed for a reason of its own (stalled,
// shutting-down) or no line comes for WithFeedIdleTimeout, it connects again after a
// backoff and goes on from there: no event is delivered twice, none skipped. A node's
// first message of a feed is a heartbeat with the position it starts at; only a
// connection that breaks before that starts from since again.
//
// It ends with an error the caller must act on: ErrPurged (a *FeedClosedError or the
// start's *Error: the position is below an origin's floor; list the table again),
// ErrNotCarried (ask a carrier), ErrBadPosition, any other refusal of the request (4xx
// but 409 behind), the context's error, or the last error after WithFeedReconnects
// failed reconnects in a row. A node behind the position (409 behind), one with too many
// feeds (503) or any failure on the way is tried again.
func (c *Client) Changes(ctx context.Context, table, since string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if since == "" {
			since = "now"
		}
		pos := since
		backoff, failures := c.retry.minBackoff, 0
		for {
			// A known empty position is sent as it is (since=): before every entry, exact,
			// and refused purged where an origin's floor is above 0.
			from := pos
			progressed, stop, err := c.feedOnce(ctx, table, from, func(e Event, heartbeat bool) bool {
				pos = e.Position
				return heartbeat || yield(e, nil)
			})
			if stop {
				if err != nil {
					yield(Event{}, err)
				}
				return
			}
			if ctx.Err() != nil {
				yield(Event{}, ctx.Err())
				return
			}
			if progressed {
				backoff, failures = c.retry.minBackoff, 0
			} else if failures++; c.feed.reconnects > 0 && failures > c.feed.reconnects {
				yield(Event{}, err)
				return
			}
			t := time.NewTimer(jitter(backoff))
			select {
			case <-ctx.Done():
				t.Stop()
				yield(Event{}, ctx.Err())
				return
			case <-t.C:
			}
			backoff = min(2*backoff, c.retry.maxBackoff)
		}
	}
}

// feedOnce reads one connection of a feed from since, passing each event and heartbeat
// to deliver until it answers false. It answers whether a line came, and stop with the
// error that ends the feed (nil: the caller stopped), or an error to reconnect after.
func (c *Client) feedOnce(ctx context.Context, table, since string, deliver func(Event, bool) bool) (progressed, stop bool, err error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idle := time.AfterFunc(c.feed.idle, cancel)
	defer idle.Stop()
	cl := c.newCall(http.MethodGet, tablePath(table)+"/changes", read, nil)
	cl.query = url.Values{"since": {since}}
	cl.header.Set("Accept", "application/x-ndjson")
	resp, err := c.send(cctx, cl)
	if err != nil {
		var ae *Error
		if errors.As(err, &ae) && ae.StatusCode/100 == 4 && !errors.Is(ae, ErrBehind) {
			return false, true, err
		}
		return false, false, err
	}
	defer resp.Body.Close()
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := readLine(rd)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // a feed ends with a close event, or not at all
			}
			return progressed, false, &TransportError{Method: cl.method, Path: cl.path, Sent: true, Err: err}
		}
		if len(line) == 0 {
			continue
		}
		idle.Reset(c.feed.idle)
		progressed = true
		var w wireEvent
		if err := json.Unmarshal(line, &w); err != nil {
			return progressed, true, fmt.Errorf("GET %s: a line of the feed is not JSON: %w", cl.path, err)
		}
		switch w.Event {
		case "heartbeat":
			deliver(Event{Position: w.Position}, true)
		case "change", "reread":
			e, err := w.event()
			if err != nil {
				return progressed, true, fmt.Errorf("GET %s: %w", cl.path, err)
			}
			if !deliver(e, false) {
				return progressed, true, nil
			}
		case "close":
			if w.Reason == "purged" || w.Reason == "not-carried" {
				return progressed, true, &FeedClosedError{Reason: w.Reason, Message: w.Message, Origin: w.Origin, Floor: w.Floor, Position: w.Position}
			}
			return progressed, false, &FeedClosedError{Reason: w.Reason, Message: w.Message}
		default:
			// An event this client does not know: a later node's; its position is not
			// taken, so a reconnect delivers nothing twice.
		}
	}
}

// readLine reads one line, refused past maxEventLine.
func readLine(rd *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := rd.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, chunk...)
		if len(line) > maxEventLine {
			return nil, fmt.Errorf("a line of the feed is over %d bytes", maxEventLine)
		}
		if !isPrefix {
			return line, nil
		}
	}
}

// wireEvent is one NDJSON line of a feed.
type wireEvent struct {
	Event      string `json:"event"`
	Table      string `json:"table"`
	Origin     string `json:"origin"`
	OriginName string `json:"origin_name"`
	Seq        uint64 `json:"seq"`
	HLC        uint64 `json:"hlc"`
	Token      string `json:"token"`
	Leaf       string `json:"leaf"`
	LeafSeq    uint64 `json:"leaf_seq"`
	Ops        []struct {
		Op       string  `json:"op"`
		Key      string  `json:"key"`
		Value    *string `json:"value"`
		ValueB64 *string `json:"value_b64"`
		Won      bool    `json:"won"`
	} `json:"ops"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
	Floor    uint64 `json:"floor"`
	Position string `json:"position"`
}

func (w *wireEvent) event() (Event, error) {
	e := Event{Kind: w.Event, Table: w.Table, Origin: w.Origin, OriginName: w.OriginName, Seq: w.Seq,
		HLC: w.HLC, Token: w.Token, Leaf: w.Leaf, LeafSeq: w.LeafSeq, Reason: w.Reason, Position: w.Position}
	for i, o := range w.Ops {
		op := ChangeOp{Delete: o.Op == "delete", Key: []byte(o.Key), Won: o.Won}
		switch {
		case o.Value != nil:
			op.Value = []byte(*o.Value)
		case o.ValueB64 != nil:
			v, err := base64.StdEncoding.DecodeString(*o.ValueB64)
			if err != nil {
				return Event{}, fmt.Errorf("op %d of %s:%d: %w", i, w.Origin, w.Seq, err)
			}
			op.Value = v
		}
		e.Ops = append(e.Ops, op)
	}
	return e, nil
}
