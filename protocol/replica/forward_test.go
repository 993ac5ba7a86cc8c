package replica_test

import (
	"testing"
	"time"

	"plait/protocol/replica"
)

// TestCarrierChoice: a node that does not carry a table chooses, of the table's carriers,
// the neighbour with the lowest measured round trip; one it cannot reach is passed over; a
// carrier further away is reached through a node that does not carry the table; with no
// carrier reachable it chooses none and counts it.
func TestCarrierChoice(t *testing.T) {
	h := newHarness(t)
	a, b, c, d := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{}), h.addNode("C", replica.Config{}), h.addNode("D", replica.Config{})
	ab, ac := h.connect(a, b), h.connect(a, c)
	ab.latency, ac.latency = 30*time.Millisecond, 5*time.Millisecond
	h.connect(d, b)
	if _, err := a.publish(mapDoc(2, `,"placement":{"t":["B","C","D"]}`, "A", "B", "C", "D")); err != nil {
		t.Fatal(err)
	}
	h.advance(3 * time.Second) // PINGs measure each round trip
	if got := a.rep.Carrier([]byte("t")); got != "C" {
		t.Fatalf("A chose %q; want C, its carrier of the lowest round trip", got)
	}
	if got := a.rep.Carrier([]byte("u")); got != "" {
		t.Fatalf("A chose %q for an unplaced table, which it carries; want none", got)
	}
	ac.latency, ab.latency = 30*time.Millisecond, 5*time.Millisecond
	h.advance(3 * time.Second)
	if got := a.rep.Carrier([]byte("t")); got != "B" {
		t.Fatalf("A chose %q after the round trips changed; want B", got)
	}
	h.disconnect(ab)
	if got := a.rep.Carrier([]byte("t")); got != "C" {
		t.Fatalf("A chose %q with B cut off; want C", got)
	}
	h.disconnect(ac)
	if got := a.rep.Carrier([]byte("t")); got != "" {
		t.Fatalf("A chose %q with no carrier reachable; want none", got)
	}
	if got := a.rep.Counters().ForwardsNoCarrier; got != 1 {
		t.Errorf("A counted %d forwards without a carrier; want 1", got)
	}

	// A carrier that is not a neighbour, through one that does not carry the table.
	e := h.addNode("E", replica.Config{})
	h.connect(e, d)
	if _, err := d.publish(mapDoc(3, `,"placement":{"t":["B","C"]}`, "A", "B", "C", "D", "E")); err != nil {
		t.Fatal(err)
	}
	h.advance(time.Second)
	if got := e.rep.Carrier([]byte("t")); got != "B" {
		t.Fatalf("E chose %q; want B, the one carrier it reaches (through D)", got)
	}
}

// TestForwardServed: an API request forwarded to a carrier is handed to the carrier's
// shell with the caller's scope and body, and its reply comes back to the asker; each
// side counts it. A reply after the asker gave up is dropped and counted late; a request
// whose carrier is cut off on the way is answered unreachable and counted no-carrier.
func TestForwardServed(t *testing.T) {
	h := newHarness(t)
	cfg := replica.Config{RequestTimeout: time.Second}
	a, b, c := h.addNode("A", cfg), h.addNode("B", cfg), h.addNode("C", cfg)
	h.connect(a, b)
	bc := h.connect(c, b)
	if _, err := a.publish(mapDoc(2, `,"placement":{"t":["C"]}`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	h.advance(100 * time.Millisecond)
	carrier := a.rep.Carrier([]byte("t"))
	if carrier != "C" {
		t.Fatalf("A chose %q; want C", carrier)
	}
	forward := func() replica.RequestID {
		t.Helper()
		id, err := a.rep.Forward(a.clock(), carrier, "write", []byte("the api body"))
		if err != nil {
			t.Fatal(err)
		}
		h.pump()
		return id
	}
	id := forward()
	served := c.rep.Served()
	if len(served) != 1 || served[0].Kind != replica.KindAPI || served[0].Scope != "write" || string(served[0].Body) != "the api body" {
		t.Fatalf("C was handed %+v; want the one api request, scope write", served)
	}
	h.check(c, c.rep.Reply(c.clock(), served[0].ID, "", "", []byte("the answer")))
	h.pump()
	if got := a.answers(time.Second, id)[id]; got.Code != "" || string(got.Body) != "the answer" {
		t.Fatalf("A's answer: %+v", got)
	}
	if got := a.rep.Counters().ForwardsAnswered; got != 1 {
		t.Errorf("A counted %d forwards answered; want 1", got)
	}
	if got := c.rep.Counters().ForwardsServed; got != 1 {
		t.Errorf("C counted %d forwards served; want 1", got)
	}

	// Not replied by the deadline: A is answered request-timeout, C's late reply dropped.
	id = forward()
	served = c.rep.Served()
	if got := a.answers(2*time.Second, id)[id]; got.Code != replica.CodeRequestTimeout {
		t.Fatalf("A's answer to a request C never replied to: %+v", got)
	}
	late := c.rep.Counters().RequestsLate
	h.check(c, c.rep.Reply(c.clock(), served[0].ID, "", "", []byte("late")))
	h.pump()
	if got := c.rep.Counters().RequestsLate; got != late+1 {
		t.Errorf("C counted %d late answers after a reply past the deadline; want %d", got, late+1)
	}
	if got := a.rep.Answers(); len(got) != 0 {
		t.Fatalf("A got answers after the timeout: %+v", got)
	}

	// The connection to the carrier closes on the way: unreachable, counted no-carrier.
	bc.hold = true
	id = forward()
	h.advance(50 * time.Millisecond)
	h.disconnect(bc)
	if got := a.answers(time.Second, id)[id]; got.Code != replica.CodeUnreachable {
		t.Fatalf("A's answer with C cut off: %+v", got)
	}
	if got := a.rep.Counters(); got.ForwardsNoCarrier != 2 || got.ForwardsAnswered != 1 {
		t.Errorf("A counted %d forwards without a carrier and %d answered; want 2 (the timeout, the cut) and 1",
			got.ForwardsNoCarrier, got.ForwardsAnswered)
	}
}
