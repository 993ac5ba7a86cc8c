package lock_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"plait/protocol/lock"
)

// op is one input of a random sequence: Kind picks the method, Key one of propKeys, A and B
// its durations (in ms) or the token's index in the key's history, Step how far the
// clock moves before it (negative: time goes back).
type op struct {
	Kind, Key int
	A, B      int64
	Step      int64 // ms
	Mask      int   // a move quarantine's keys
}

const (
	opAcquire = iota
	opRenew
	opRelease
	opConfirm
	opCheck
	opTick
	opMove
	opRestart
)

var propKeys = []string{"x", "y", "z"}

func propConfig() lock.Config {
	// Small bounds so that sequences of 200 inputs hit every one: 3 keys over 2 leases, 2
	// waiters, a quarantine of 2s·1.001 + 100ms.
	return lock.Config{MaxTTL: 2 * time.Second, MaxWait: time.Second, MaxLeases: 2, MaxWaiters: 2, Drift: 0.001, OffsetBound: 100 * time.Millisecond}
}

func genOps() gopter.Gen {
	return gen.SliceOfN(200, gopter.CombineGens(
		gen.IntRange(0, 63), gen.IntRange(0, len(propKeys)-1),
		gen.Int64Range(-100, 2200), gen.Int64Range(-50, 1100),
		gen.Int64Range(-200, 600), gen.IntRange(0, 7),
	).Map(func(v []any) op {
		kind := v[0].(int)
		// Inputs that move leases come more often than restarts and moves.
		switch {
		case kind < 24:
			kind = opAcquire
		case kind < 32:
			kind = opRenew
		case kind < 40:
			kind = opRelease
		case kind < 46:
			kind = opConfirm
		case kind < 48:
			kind = opCheck
		case kind < 62:
			kind = opTick
		case kind < 63:
			kind = opMove
		default:
			kind = opRestart
		}
		return op{Kind: kind, Key: v[1].(int), A: v[2].(int64), B: v[3].(int64), Step: v[4].(int64), Mask: v[5].(int)}
	}))
}

// grantRecord is what the oracle knows of a key's last grant, from its own inputs: when
// the grant was made (the latest now given), and when the home may free the key (the grant
// or last renewal plus ttl·(1+ρ), or the release).
type grantRecord struct {
	token      lock.Token
	start, end time.Time
}

type pendingWaiter struct {
	key string
	ttl time.Duration
}

// runOps feeds ops to a table and checks, against an oracle built from the inputs alone,
// that no two grants of one key overlap at the home, that a key's tokens strictly increase,
// that every queued request is answered exactly once (the last table's, after a tick past
// every wait: a restart forgets the waiters of the table before it), that a Confirm or a
// Check says yes only for the key's live lease, and that every grant reports the times the
// oracle expects. It returns the transcript of every output, and the first breach ("" if
// none).
func runOps(ops []op) (transcript, breach string) {
	cfg := propConfig()
	homeTTL := func(ttl time.Duration) time.Duration { return ttl + (ttl+999)/1000 } // ρ = 1/1000, rounded up
	now := epoch
	inc := uint64(1)
	generation := uint64(1)
	tab, err := lock.New(cfg, homeA, inc, now)
	if err != nil {
		return "", err.Error()
	}
	last := map[string]*grantRecord{}    // over every table: the overlaps and the order span restarts
	history := map[string][]lock.Token{} // every token granted per key, for stale inputs
	pending := map[uint64]pendingWaiter{}
	var out strings.Builder
	fail := func(format string, args ...any) string {
		return fmt.Sprintf("at %v: ", now.Sub(epoch)) + fmt.Sprintf(format, args...)
	}
	granted := func(k string, ttl time.Duration, r lock.Result) string {
		if r.Code != lock.CodeGranted {
			return ""
		}
		if !r.Lease.Granted.Equal(now) || !r.Lease.Expiry.Equal(now.Add(homeTTL(ttl))) || r.Lease.TTL != ttl {
			return fail("grant on %s reports %v..%v ttl %v, want %v..%v ttl %v", k, r.Lease.Granted.Sub(epoch), r.Lease.Expiry.Sub(epoch), r.Lease.TTL, 0, now.Add(homeTTL(ttl)).Sub(epoch), ttl)
		}
		if p := last[k]; p != nil {
			if p.end.After(now) {
				return fail("grant %v on %s at %v overlaps %v, live at the home until %v", r.Lease.Token, k, now.Sub(epoch), p.token, p.end.Sub(epoch))
			}
			if lock.Compare(r.Lease.Token, p.token) <= 0 {
				return fail("grant %v on %s is not above the key's previous token %v", r.Lease.Token, k, p.token)
			}
		}
		last[k] = &grantRecord{token: r.Lease.Token, start: now, end: now.Add(homeTTL(ttl))}
		history[k] = append(history[k], r.Lease.Token)
		return ""
	}
	handle := func(events []lock.Event) string {
		for _, e := range events {
			fmt.Fprintf(&out, "  event %d %s %s %v %v\n", e.Waiter, e.Key.Key, e.Result.Code, e.Result.Lease.Token, e.Result.RetryAfter)
			w, ok := pending[e.Waiter]
			if !ok {
				return fail("an answer to waiter %d, not waiting (answered twice, or never queued)", e.Waiter)
			}
			delete(pending, e.Waiter)
			if string(e.Key.Key) != w.key {
				return fail("waiter %d answered for key %s, it waits for %s", e.Waiter, e.Key.Key, w.key)
			}
			if b := granted(w.key, w.ttl, e.Result); b != "" {
				return b
			}
		}
		return ""
	}
	pick := func(k string, i int64) lock.Token {
		h := history[k]
		if len(h) == 0 || i < 0 {
			return lock.Token{Generation: 1, Incarnation: inc, Counter: 99, Home: homeA}
		}
		if i < 1500 {
			return h[len(h)-1] // mostly the latest
		}
		return h[int(i)%len(h)]
	}
	liveAt := func(k string, tok lock.Token) bool {
		p := last[k]
		return p != nil && p.token == tok && now.Before(p.end)
	}

	for _, o := range ops {
		if o.Step > 0 || o.Kind == opRestart {
			now = now.Add(time.Duration(max(o.Step, 0)) * time.Millisecond)
		}
		at := now.Add(time.Duration(min(o.Step, 0)) * time.Millisecond) // an input from the past
		k := propKeys[o.Key]
		key := lock.Key{Table: "t", Key: []byte(k)}
		fence := lock.Fence{{Origin: homeB, Seq: uint64(len(out.String()))}}
		var b string
		switch o.Kind {
		case opAcquire:
			ttl, wait := time.Duration(o.A)*time.Millisecond, time.Duration(o.B)*time.Millisecond
			r := tab.Acquire(at, key, "h", ttl, wait, generation, fence)
			fmt.Fprintf(&out, "acquire %s %v %v: %s %v %d %v\n", k, ttl, wait, r.Code, r.Lease.Token, r.Waiter, r.RetryAfter)
			if b = handle(r.Events); b == "" {
				b = granted(k, ttl, r)
			}
			if r.Code == lock.CodeQueued {
				if _, dup := pending[r.Waiter]; dup {
					b = fail("waiter id %d given twice", r.Waiter)
				}
				pending[r.Waiter] = pendingWaiter{key: k, ttl: ttl}
			}
		case opRenew:
			ttl, tok := time.Duration(o.B)*time.Millisecond, pick(k, o.A)
			wasLive := liveAt(k, tok)
			r := tab.Renew(at, key, tok, ttl)
			fmt.Fprintf(&out, "renew %s %v %v: %s\n", k, tok, ttl, r.Code)
			if r.Code == lock.CodeRenewed {
				if !wasLive {
					b = fail("renewed %v on %s, not its live lease", tok, k)
				}
				last[k].end = now.Add(homeTTL(ttl))
			}
		case opRelease:
			tok := pick(k, o.A)
			wasLive := liveAt(k, tok)
			r := tab.Release(at, key, tok, fence)
			fmt.Fprintf(&out, "release %s %v: %s\n", k, tok, r.Code)
			if r.Code == lock.CodeReleased {
				if !wasLive {
					b = fail("released %v on %s, not its live lease", tok, k)
				}
				last[k].end = now
			}
			if b == "" {
				b = handle(r.Events)
			}
		case opConfirm, opCheck:
			tok := pick(k, o.A)
			var yes bool
			if o.Kind == opConfirm {
				yes = tab.Confirm(at, key, tok)
			} else {
				yes = tab.Check(at, key, tok)
			}
			fmt.Fprintf(&out, "confirm/check %d %s %v: %v\n", o.Kind, k, tok, yes)
			if yes && !liveAt(k, tok) {
				b = fail("confirmed %v on %s, not its live lease", tok, k)
			}
		case opTick:
			ev := tab.Tick(at, fence)
			fmt.Fprintf(&out, "tick\n")
			b = handle(ev)
		case opMove:
			generation++
			ev := tab.MoveQuarantine(at, generation, func(x lock.Key) bool {
				for i, name := range propKeys {
					if string(x.Key) == name {
						return o.Mask&(1<<i) != 0
					}
				}
				return false
			})
			fmt.Fprintf(&out, "move %d %b\n", generation, o.Mask)
			for _, e := range ev {
				if e.Result.Code != lock.CodeQuarantined {
					return out.String(), fail("a move quarantine answered waiter %d %s", e.Waiter, e.Result.Code)
				}
			}
			b = handle(ev)
		case opRestart:
			// The home restarts at the latest time (a clock that went back across a restart
			// is outside the bounds): its waiters are forgotten with it.
			inc++
			tab, err = lock.New(cfg, homeA, inc, now)
			if err != nil {
				return out.String(), err.Error()
			}
			pending = map[uint64]pendingWaiter{}
			fmt.Fprintf(&out, "restart %d\n", inc)
		}
		if b != "" {
			return out.String(), b
		}
		s := tab.Stats()
		if s.Waiting != len(pending) || s.Leases > cfg.MaxLeases || s.Waiting > cfg.MaxWaiters {
			return out.String(), fail("stats: %d leases, %d waiting; the oracle has %d waiting", s.Leases, s.Waiting, len(pending))
		}
	}
	// Past every wait and lease (a waiter granted at the end of a lease holds it for its own
	// ttl): every waiter of the last table has its answer.
	for range cfg.MaxWaiters + 2 {
		now = now.Add(time.Hour)
		if b := handle(tab.Tick(now, nil)); b != "" {
			return out.String(), b
		}
	}
	if len(pending) != 0 {
		return out.String(), fail("%d waiters never answered", len(pending))
	}
	if s := tab.Stats(); s.Leases != 0 || s.Waiting != 0 || !tab.Next().IsZero() {
		return out.String(), fail("hours on, %d leases, %d waiting, next %v", s.Leases, s.Waiting, tab.Next())
	}
	return out.String(), ""
}

func TestProperties(t *testing.T) {
	p := gopter.DefaultTestParametersWithSeed(20260301)
	p.MinSuccessfulTests = 300
	props := gopter.NewProperties(p)
	props.Property("grants never overlap, tokens rise, every waiter is answered once, a yes is for a live lease", prop.ForAll(func(ops []op) string {
		_, breach := runOps(ops)
		return breach
	}, genOps()))
	props.Property("the same inputs give the same outputs", prop.ForAll(func(ops []op) bool {
		a, _ := runOps(ops)
		b, _ := runOps(ops)
		return a == b
	}, genOps()))
	props.TestingRun(t)
}

// TestPropertiesExercise makes sure the random sequences reach what the properties are
// about: grants, waiters granted and timed out, refusals of every bound, quarantines.
func TestPropertiesExercise(t *testing.T) {
	params := gopter.DefaultGenParameters()
	params.Rng.Seed(20260301)
	seen := map[string]int{}
	for range 100 {
		v, ok := genOps()(params).Retrieve()
		if !ok {
			t.Fatal("no sample")
		}
		tr, breach := runOps(v.([]op))
		if breach != "" {
			t.Fatalf("breach: %s", breach)
		}
		for _, line := range strings.Split(tr, "\n") {
			for _, w := range []string{"granted", "queued", "lock-held", "lock-lost", "too-many-leases", "too-many-waiters", "bad-ttl", "bad-wait", "quarantined", "renewed", "released", "restart", "move", ": true", "event"} {
				if strings.Contains(line, w) {
					seen[w]++
				}
			}
			if strings.HasPrefix(line, "  event") && strings.Contains(line, "granted") {
				seen["waiter granted"]++
			}
			if strings.HasPrefix(line, "  event") && strings.Contains(line, "lock-held") {
				seen["waiter timed out"]++
			}
			if strings.HasPrefix(line, "  event") && strings.Contains(line, "quarantined") {
				seen["waiter quarantined"]++
			}
		}
	}
	for _, w := range []string{"granted", "queued", "lock-held", "lock-lost", "too-many-leases", "too-many-waiters", "bad-ttl", "bad-wait", "quarantined", "renewed", "released", "restart", "move", ": true", "waiter granted", "waiter timed out", "waiter quarantined"} {
		if seen[w] == 0 {
			t.Errorf("100 sequences never produced %q", w)
		}
	}
	t.Logf("%v", seen)
}
