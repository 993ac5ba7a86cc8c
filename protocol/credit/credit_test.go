package credit_test

import (
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"plait/protocol/credit"
)

func params() *gopter.TestParameters {
	p := gopter.DefaultTestParametersWithSeed(20261129)
	p.MinSuccessfulTests = 500
	return p
}

// step is one move of a sender and a receiver joined by an ordered pipe: send a frame of
// Size bytes, deliver the oldest in-flight frame, release (consume) buffered bytes, or
// deliver the receiver's grant (possibly duplicated).
type step struct {
	Kind int // 0 send, 1 deliver, 2 release, 3 grant, 4 replay an old grant
	Size uint64
}

func genSteps() gopter.Gen {
	return gen.SliceOfN(200, gopter.CombineGens(gen.IntRange(0, 4), gen.UInt64Range(1, 64)).Map(func(v []any) step {
		return step{Kind: v[0].(int), Size: v[1].(uint64)}
	}))
}

func TestCreditAccounting(t *testing.T) {
	props := gopter.NewProperties(params())
	props.Property("a sender that respects its credit never overruns the receiver", prop.ForAll(func(window uint64, steps []step) bool {
		r := credit.NewReceiver(window, window)
		var s credit.Sender
		s.Update(r.Limit())
		var flight []uint64
		var grants []uint64
		for _, st := range steps {
			switch st.Kind {
			case 0:
				if s.Send(st.Size) {
					flight = append(flight, st.Size)
				}
			case 1:
				if len(flight) > 0 {
					if r.Receive(flight[0]) != nil {
						return false
					}
					flight = flight[1:]
				}
			case 2:
				r.Release(st.Size)
			case 3:
				if g, ok := r.Grant(); ok {
					grants = append(grants, g)
					s.Update(g)
				}
			case 4:
				if len(grants) > 0 {
					s.Update(grants[int(st.Size)%len(grants)])
				}
			}
			if r.Buffered() > window || s.Sent() > s.Limit() {
				return false
			}
		}
		return true
	}, gen.UInt64Range(64, 512), genSteps()))
	props.Property("grants are idempotent and never decrease", prop.ForAll(func(window uint64, steps []step) bool {
		r := credit.NewReceiver(window, window)
		var s credit.Sender
		last := r.Limit()
		s.Update(last)
		for _, st := range steps {
			r.Receive(min(st.Size, r.Limit()-r.Received()))
			r.Release(st.Size)
			g, ok := r.Grant()
			if g < last || (ok && g == last) {
				return false
			}
			before := s.Limit()
			raised := s.Update(g)
			if s.Update(g) || (raised != (g > before)) || s.Limit() != max(before, g) {
				return false // the second identical grant must change nothing
			}
			last = g
		}
		return true
	}, gen.UInt64Range(1, 512), genSteps()))
	props.Property("a receiver that keeps releasing and granting never deadlocks a sender", prop.ForAll(func(window uint64, sizes []uint64) bool {
		r := credit.NewReceiver(window, window)
		var s credit.Sender
		s.Update(r.Limit())
		for _, n := range sizes {
			n = min(n, window) // a frame never exceeds the window (the session enforces it)
			for tries := 0; !s.Send(n); tries++ {
				if tries > 2 {
					return false // released and granted everything, and still no room
				}
				if g, ok := r.Grant(); ok {
					s.Update(g)
				}
			}
			if r.Receive(n) != nil {
				return false
			}
			r.Release(n) // the receiver applies at once
		}
		return true
	}, gen.UInt64Range(1, 256), gen.SliceOfN(300, gen.UInt64Range(1, 256))))
	props.Property("bytes a stalled consumer holds never stop the grants others need", prop.ForAll(func(window, held uint64, sizes []uint64) bool {
		// A connection window shared by a stalled channel, which holds `held` bytes it never
		// releases, and a flowing one, released at once: every frame that fits the room the
		// stalled bytes leave is sent, after a grant the receiver makes unasked.
		maxFrame := window / 4
		held = min(held, window-1)
		r := credit.NewReceiver(window, maxFrame)
		var s credit.Sender
		s.Update(r.Limit())
		if held > 0 {
			if !s.Send(held) || r.Receive(held) != nil {
				return false
			}
		}
		for _, n := range sizes {
			n = max(1, min(n, maxFrame, window-held))
			for tries := 0; !s.Send(n); tries++ {
				if tries > 2 {
					return false
				}
				if g, ok := r.Grant(); ok {
					s.Update(g)
				}
			}
			if r.Receive(n) != nil {
				return false
			}
			// The receiver asks for a grant after every receipt and release, as a session does.
			if g, ok := r.Grant(); ok {
				s.Update(g)
			}
			r.Release(n)
			if g, ok := r.Grant(); ok {
				s.Update(g)
			}
		}
		return true
	}, gen.UInt64Range(64, 4096), gen.UInt64Range(0, 4096), gen.SliceOfN(300, gen.UInt64Range(1, 1024))))
	props.Property("an overrun is refused and accounts nothing", prop.ForAll(func(window, extra uint64) bool {
		r := credit.NewReceiver(window, window)
		if r.Receive(window+extra) == nil {
			return false
		}
		return r.Received() == 0 && r.Receive(window) == nil && r.Buffered() == window
	}, gen.UInt64Range(1, 1000), gen.UInt64Range(1, 1000)))
	props.TestingRun(t)
}
