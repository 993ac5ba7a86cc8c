package protocol_test

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
)

// clonePair is an established version-2 pair in which D subscribed to origin 9, received
// two of its entries and acknowledged the first, and has that acknowledgement's output
// (CURSOR, CREDIT) not yet taken: most of what Clone copies is not empty.
func clonePair(t *testing.T) (*prototest.Pair, []prototest.Entry) {
	t.Helper()
	p := v2pair(t, protocol.Limits{})
	o := prototest.Origin(9)
	chain := prototest.Chain(o, 8, 1, 16)
	must(t, p.L.S.SetOriginName(o, "nine"))
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: o}}))
	p.Pump(10)
	must(t, p.L.S.V2().Send(chain[0].Raw))
	must(t, p.L.S.V2().Send(chain[1].Raw))
	p.Pump(10)
	if n := p.D.Count(protocol.EventTxn); n != 2 {
		t.Fatalf("setup: %d entries applied", n)
	}
	must(t, p.D.S.V2().Ack(o, 1))
	if !p.D.S.HasReady() {
		t.Fatal("setup: no output pending")
	}
	return p, chain
}

// TestCloneBehavesTheSame: a clone and its original given the same calls give the same
// output, and what one does is not seen by the other.
func TestCloneBehavesTheSame(t *testing.T) {
	p, chain := clonePair(t)
	orig := p.D.S
	c := orig.Clone()
	must(t, p.L.S.V2().Send(chain[2].Raw))
	in := slices.Concat(p.L.Drain()...)
	now := p.Now
	for _, s := range []*protocol.Session{orig, c} {
		must(t, s.Receive(now, in))
		must(t, s.V2().Ack(prototest.Origin(9), 3))
	}
	ro, rc := orig.Ready(), c.Ready()
	if !bytes.Equal(slices.Concat(ro.Messages...), slices.Concat(rc.Messages...)) || fmt.Sprint(kinds(ro.Events)) != fmt.Sprint(kinds(rc.Events)) {
		t.Fatalf("original sent %x with events %v, clone %x with %v", ro.Messages, kinds(ro.Events), rc.Messages, kinds(rc.Events))
	}
	if orig.Stats() != c.Stats() || orig.HeldBytes() != c.HeldBytes() {
		t.Fatalf("stats %+v held %d, clone %+v held %d", orig.Stats(), orig.HeldBytes(), c.Stats(), c.HeldBytes())
	}
	// The clone closes; the original does not notice.
	st := orig.Stats()
	must(t, c.Receive(now, prototest.RawFrame(0x7e, 0, 0, nil)))
	if c.State() != protocol.StateClosed || orig.State() != protocol.StateEstablished || orig.Stats() != st || orig.HasReady() {
		t.Fatalf("clone %v, original %v (stats moved: %v, output: %v)", c.State(), orig.State(), orig.Stats() != st, orig.HasReady())
	}
}

// TestCloneSharesNothing walks the session and its clone: no map, slice or pointer of one is
// the other's, but for the Config both read and never write.
func TestCloneSharesNothing(t *testing.T) {
	p, _ := clonePair(t)
	a := reflect.ValueOf(p.D.S).Elem()
	b := reflect.ValueOf(p.D.S.Clone()).Elem()
	var shared []string
	var walk func(path string, a, b reflect.Value)
	walk = func(path string, a, b reflect.Value) {
		switch a.Kind() {
		case reflect.Pointer:
			if a.IsNil() || b.IsNil() {
				return
			}
			if a.Pointer() == b.Pointer() {
				shared = append(shared, path)
				return
			}
			walk(path, a.Elem(), b.Elem())
		case reflect.Map:
			if a.IsNil() || b.IsNil() {
				return
			}
			if a.Pointer() == b.Pointer() {
				shared = append(shared, path)
				return
			}
			for _, k := range a.MapKeys() {
				if bv := b.MapIndex(k); bv.IsValid() {
					walk(fmt.Sprintf("%s[%v]", path, k), a.MapIndex(k), bv)
				}
			}
		case reflect.Slice:
			if a.Cap() > 0 && b.Cap() > 0 && a.Pointer() == b.Pointer() {
				shared = append(shared, path)
				return
			}
			for i := range min(a.Len(), b.Len()) {
				walk(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i))
			}
		case reflect.Struct:
			for i := range a.NumField() {
				name := a.Type().Field(i).Name
				if path == "Session" && name == "cfg" {
					continue
				}
				walk(path+"."+name, a.Field(i), b.Field(i))
			}
		}
	}
	walk("Session", a, b)
	if len(shared) > 0 {
		t.Fatalf("the clone shares %s with its original", strings.Join(shared, ", "))
	}
}

// TestCloneKnowsEveryField fails when a type Clone copies gains or loses a field: Clone
// copies each field it knows of, and a new map, slice or pointer would be shared unless
// Clone copies it too. Update Clone, then this list.
func TestCloneKnowsEveryField(t *testing.T) {
	p, _ := clonePair(t)
	s := reflect.ValueOf(p.D.S).Elem()
	chans := s.FieldByName("chans")
	in := chans.FieldByName("in").Type().Elem().Elem()
	out := chans.FieldByName("out").Type().Elem().Elem()
	want := map[string]string{
		"Session":      "cfg limits rng state start lastRecv now localHello peerHello pending info peerRole peerMaxMsg peerFrame msgs cur spare outBytes events evTaken closeErr nextPing pingID pingSent pingOut rtt clock stamps resumed ignored ignoredType names announced peerOrigins v1 chans v4 stats",
		"v1State":      "peerSubscribed lastSent peerAcked subscribed lastPos acked unacked",
		"channelState": "in inOrigin lastIn connIn connGiven out outOrigin lastOut connOut advertised peerHeads advFloors peerFloors copyIn copyOut rangeOut rangeIn cursors grants connRel",
		"inChannel":    "id origin seq hash acked ackHash win pending cursorQueued grantQueued resendFrom lastDiscarded",
		"outChannel":   "id origin next chain first acked win ends",
		"copyIn":       "id win begun chunked vector lastOrigin table key records pending grantQueued holds",
		"copyOut":      "id win begun table key records holds",
		"holdsEnd":     "table last since",
		"rangeAsk":     "after through",
		"v4State":      "lastOut out lastIn in peerQuiet quietOut quietSent",
	}
	for _, typ := range []reflect.Type{s.Type(), s.FieldByName("v1").Type(), chans.Type(), in, out,
		chans.FieldByName("copyIn").Type().Elem(), chans.FieldByName("copyOut").Type().Elem(), chans.FieldByName("rangeIn").Type().Elem(),
		s.FieldByName("v4").Type(), fieldType(chans.FieldByName("copyIn").Type().Elem(), "holds")} {
		var names []string
		for i := range typ.NumField() {
			names = append(names, typ.Field(i).Name)
		}
		if got := strings.Join(names, " "); got != want[typ.Name()] {
			t.Errorf("%s has the fields\n  %s\nClone was written for\n  %s", typ.Name(), got, want[typ.Name()])
		}
	}
}

// fieldType is the type of typ's field name.
func fieldType(typ reflect.Type, name string) reflect.Type {
	f, _ := typ.FieldByName(name)
	return f.Type
}
