//go:build multiprocess || scale

package multiprocess

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// feedConsumer reads a table's change feed the way a client that keeps its position does:
// every change event it is given, per origin, and the last position it was given (by an
// event or a heartbeat's id-only message).
type feedConsumer struct {
	mu     sync.Mutex
	pos    string
	seen   map[string][]uint64 // origin id (hex) → the seqs given, in the order given
	events int
	bad    []string // events whose SSE id was not their position
}

// read streams the feed of table t from p after since, until the stream ends (the node
// dies, closes it, or ctx ends). A refusal is an error with the answer's status and body.
func (c *feedConsumer) read(ctx context.Context, p *proc, since string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		"http://"+p.HTTP+"/v1/tables/t/changes?since="+url.QueryEscape(since), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %d %s", p.Name, resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	var event, id, data string
	hasID := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = line[len("event: "):]
		case strings.HasPrefix(line, "id:"):
			id, hasID = strings.TrimPrefix(line[len("id:"):], " "), true
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		case line == "":
			if err := c.message(event, id, hasID, data); err != nil {
				return err
			}
			event, id, data, hasID = "", "", "", false
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

// message takes one SSE message.
func (c *feedConsumer) message(event, id string, hasID bool, data string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch event {
	case "change":
		var ev struct {
			Origin   string `json:"origin"`
			Seq      uint64 `json:"seq"`
			Position string `json:"position"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return err
		}
		if ev.Position != id {
			c.bad = append(c.bad, fmt.Sprintf("seq %d of %s: id %q, position %q", ev.Seq, ev.Origin, id, ev.Position))
		}
		c.seen[ev.Origin] = append(c.seen[ev.Origin], ev.Seq)
		c.pos = ev.Position
		c.events++
	case "close":
		return errors.New("closed: " + data)
	case "":
		if hasID { // a heartbeat's id-only message
			c.pos = id
		}
	default:
		return fmt.Errorf("an event %q on a table with no copies or repairs: %s", event, data)
	}
	return nil
}

// last is the highest seq of origin the consumer was given.
func (c *feedConsumer) last(origin string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.seen[origin]
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

// feedWriter writes puts to table t on p, one after the other, until stop closes, and
// keeps the origin seq of every write acknowledged.
func feedWriter(p *proc, stop chan struct{}, acked *[]uint64, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(2 * time.Millisecond):
		}
		req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("http://%s/v1/tables/t/records/%s-%d", p.HTTP, p.Name, i%100),
			strings.NewReader(fmt.Sprint(i)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		var ans struct {
			Seq uint64 `json:"origin_seq"`
		}
		if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&ans) == nil {
			*acked = append(*acked, ans.Seq)
		}
		resp.Body.Close()
	}
}

// TestFeedFailover: a consumer reads B's change feed of t while A and C write; B is killed
// (kill -9) mid-stream, and the consumer resumes from the last position it was given on C.
// In the end it has been given every acknowledged write of A and of C exactly once, each
// origin's in seq order with no seq missing, and every event's SSE id is its position.
func TestFeedFailover(t *testing.T) {
	a := serve(t, "A")
	b := serve(t, "B", "--peer", a.PeerFlag(), "--feed-heartbeat", "200ms")
	c := serve(t, "C", "--peer", a.PeerFlag(), "--peer", b.PeerFlag(), "--feed-heartbeat", "200ms")
	waitFor(t, "the three nodes connected", 30*time.Second, func() bool {
		return b.connected("A") && c.connected("A") && c.connected("B")
	})
	origins := map[string]string{"A": a.status().Node.Origin, "C": c.status().Node.Origin}
	cons := &feedConsumer{seen: map[string][]uint64{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	onB := make(chan error, 1)
	go func() { onB <- cons.read(ctx, b, "oldest") }()
	waitFor(t, "B's feed open", 10*time.Second, func() bool { return b.status().Feeds.Open == 1 })

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ackedA, ackedC []uint64
	wg.Add(2)
	go feedWriter(a, stop, &ackedA, &wg)
	go feedWriter(c, stop, &ackedC, &wg)
	waitFor(t, "the consumer given 100 changes of each writer on B", 60*time.Second, func() bool {
		return cons.last(origins["A"]) >= 100 && cons.last(origins["C"]) >= 100
	})
	b.kill()
	select {
	case err := <-onB:
		t.Logf("B's feed ended with the kill: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("B's feed did not end within 10 s of B's kill")
	}
	cons.mu.Lock()
	resume, given := cons.pos, cons.events
	cons.mu.Unlock()
	t.Logf("resuming on C after %d events at %s", given, resume)

	onC := make(chan error, 1)
	go func() {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			cons.mu.Lock()
			pos := cons.pos
			cons.mu.Unlock()
			err := cons.read(ctx, c, pos)
			if ctx.Err() != nil || time.Now().After(deadline) || !strings.Contains(fmt.Sprint(err), " 409 ") {
				onC <- err
				return
			}
		}
	}()
	// More writes after the move, then the writers stop.
	after := cons.last(origins["A"])
	waitFor(t, "the consumer given 100 more of A's writes on C", 60*time.Second, func() bool {
		return cons.last(origins["A"]) >= after+100
	})
	close(stop)
	wg.Wait()
	want := map[string][]uint64{origins["A"]: ackedA, origins["C"]: ackedC}
	waitFor(t, "the consumer given every acknowledged write", 60*time.Second, func() bool {
		for o, acked := range want {
			if cons.last(o) < acked[len(acked)-1] {
				return false
			}
		}
		return true
	})
	cancel()
	if err := <-onC; ctx.Err() == nil {
		t.Fatalf("C's feed ended: %v", err)
	}
	cons.mu.Lock()
	defer cons.mu.Unlock()
	for _, bad := range cons.bad {
		t.Errorf("an event's SSE id is not its position: %s", bad)
	}
	for name, o := range origins {
		seen, acked := cons.seen[o], want[o]
		given := map[uint64]bool{}
		for i, s := range seen {
			if s != uint64(i+1) {
				t.Fatalf("%s: the %d-th change given is seq %d (want %d): seqs %v", name, i+1, s, i+1, seen)
			}
			given[s] = true
		}
		for _, s := range acked {
			if !given[s] {
				t.Errorf("%s: acknowledged seq %d never given", name, s)
			}
		}
		t.Logf("%s: %d writes acknowledged, %d changes given, seqs 1..%d once each", name, len(acked), len(seen), len(seen))
	}
	if len(cons.seen) != 2 {
		t.Errorf("changes of %d origins; want A's and C's", len(cons.seen))
	}
}
