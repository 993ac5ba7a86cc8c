package lock_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"plait/protocol/lock"
)

func key(k string) lock.Key { return lock.Key{Table: "t", Key: []byte(k)} }

var fence = lock.Fence{{Origin: homeA, Seq: 7}, {Origin: homeB, Seq: 3}}

// open is a table of goodConfig past its restart quarantine, and the instant that is over.
func open(t *testing.T, f func(*lock.Config)) (*lock.Table, time.Time) {
	t.Helper()
	cfg := goodConfig()
	if f != nil {
		f(&cfg)
	}
	tab, err := lock.New(cfg, homeA, 1, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return tab, epoch.Add(cfg.Quarantine())
}

func mustGrant(t *testing.T, r lock.Result) lock.Lease {
	t.Helper()
	if r.Code != lock.CodeGranted {
		t.Fatalf("got %s (%+v), want granted", r.Code, r)
	}
	return r.Lease
}

// TestBounds puts every bound of the table at its limit and one past it: ttl and wait
// (against MaxTTL and MaxWait), MaxLeases, MaxWaiters, the restart and the move quarantine,
// a lease's expiry at the home, the holder's deadline on the home's clock, a wait's end.
func TestBounds(t *testing.T) {
	const gen = 1
	maxTTL, maxWait := goodConfig().MaxTTL, goodConfig().MaxWait
	q := goodConfig().Quarantine()
	homeTTL := lock.HomeTTL(time.Second, lock.DefaultDrift) // of a 1 s lease
	own := lock.HolderDeadline(epoch, time.Second, lock.DefaultDrift).Sub(epoch)
	type probe func(t *testing.T, tab *lock.Table, at time.Time) lock.Result
	acquire := func(k string, ttl, wait time.Duration, after time.Duration) probe {
		return func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			return tab.Acquire(at.Add(after), key(k), "probe", ttl, wait, gen, fence)
		}
	}
	held := func(t *testing.T, tab *lock.Table, at time.Time) lock.Lease {
		return mustGrant(t, tab.Acquire(at, key("k"), "first", time.Second, 0, gen, fence))
	}
	for _, tc := range []struct {
		name  string
		probe probe
		want  lock.Code
	}{
		{"ttl at MaxTTL", acquire("k", maxTTL, 0, 0), lock.CodeGranted},
		{"ttl one past MaxTTL", acquire("k", maxTTL+1, 0, 0), lock.CodeBadTTL},
		{"ttl at its floor", acquire("k", 1, 0, 0), lock.CodeGranted},
		{"ttl one past its floor", acquire("k", 0, 0, 0), lock.CodeBadTTL},
		{"ttl negative", acquire("k", -time.Second, 0, 0), lock.CodeBadTTL},
		{"wait at MaxWait", acquire("k", time.Second, maxWait, 0), lock.CodeGranted},
		{"wait one past MaxWait", acquire("k", time.Second, maxWait+1, 0), lock.CodeBadWait},
		{"wait one past its floor", acquire("k", time.Second, -1, 0), lock.CodeBadWait},
		{"a held key, wait at MaxWait", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			held(t, tab, at)
			return tab.Acquire(at, key("k"), "second", time.Second, maxWait, gen, fence)
		}, lock.CodeQueued},
		{"MaxLeases at its limit", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			mustGrant(t, tab.Acquire(at, key("a"), "h", time.Second, 0, gen, fence))
			return tab.Acquire(at, key("b"), "h", time.Second, 0, gen, fence) // the 2nd of 2
		}, lock.CodeGranted},
		{"MaxLeases one past its limit", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			mustGrant(t, tab.Acquire(at, key("a"), "h", time.Second, 0, gen, fence))
			mustGrant(t, tab.Acquire(at, key("b"), "h", time.Second, 0, gen, fence))
			return tab.Acquire(at, key("c"), "h", time.Second, maxWait, gen, fence)
		}, lock.CodeTooManyLeases},
		{"MaxLeases frees with an expiry", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			mustGrant(t, tab.Acquire(at, key("a"), "h", time.Second, 0, gen, fence))
			mustGrant(t, tab.Acquire(at.Add(time.Millisecond), key("b"), "h", time.Second, 0, gen, fence))
			return tab.Acquire(at.Add(homeTTL), key("c"), "h", time.Second, 0, gen, fence) // a's expiry
		}, lock.CodeGranted},
		{"MaxWaiters at its limit", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			held(t, tab, at)
			if r := tab.Acquire(at, key("k"), "w1", time.Second, time.Second, gen, fence); r.Code != lock.CodeQueued {
				t.Fatalf("w1: %s", r.Code)
			}
			return tab.Acquire(at, key("k"), "w2", time.Second, time.Second, gen, fence) // the 2nd of 2
		}, lock.CodeQueued},
		{"MaxWaiters one past its limit, over keys", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			held(t, tab, at)
			mustGrant(t, tab.Acquire(at, key("j"), "first", time.Second, 0, gen, fence))
			for _, k := range []string{"k", "j"} {
				if r := tab.Acquire(at, key(k), "w", time.Second, time.Second, gen, fence); r.Code != lock.CodeQueued {
					t.Fatalf("waiter on %s: %s", k, r.Code)
				}
			}
			return tab.Acquire(at, key("k"), "w3", time.Second, time.Second, gen, fence)
		}, lock.CodeTooManyWaiters},
		{"restart quarantine, its last nanosecond", acquire("k", time.Second, 0, -1), lock.CodeQuarantined},
		{"restart quarantine, its end", acquire("k", time.Second, 0, 0), lock.CodeGranted},
		{"move quarantine, its last nanosecond", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			tab.MoveQuarantine(at, gen+1, func(k lock.Key) bool { return string(k.Key) == "k" })
			return tab.Acquire(at.Add(q-1), key("k"), "h", time.Second, 0, gen+1, fence)
		}, lock.CodeQuarantined},
		{"move quarantine, its end", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			tab.MoveQuarantine(at, gen+1, func(k lock.Key) bool { return string(k.Key) == "k" })
			return tab.Acquire(at.Add(q), key("k"), "h", time.Second, 0, gen+1, fence)
		}, lock.CodeGranted},
		{"move quarantine, a key not newly homed", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			tab.MoveQuarantine(at, gen+1, func(k lock.Key) bool { return string(k.Key) == "k" })
			return tab.Acquire(at, key("other"), "h", time.Second, 0, gen+1, fence)
		}, lock.CodeGranted},
		{"a lease at its last nanosecond", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			held(t, tab, at)
			return tab.Acquire(at.Add(homeTTL-1), key("k"), "h", time.Second, 0, gen, fence)
		}, lock.CodeHeld},
		{"a lease at its expiry", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			held(t, tab, at)
			return tab.Acquire(at.Add(homeTTL), key("k"), "h", time.Second, 0, gen, fence)
		}, lock.CodeGranted},
		{"renew at the lease's last nanosecond", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			l := held(t, tab, at)
			return tab.Renew(at.Add(homeTTL-1), key("k"), l.Token, time.Second)
		}, lock.CodeRenewed},
		{"renew at its expiry", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			l := held(t, tab, at)
			return tab.Renew(at.Add(homeTTL), key("k"), l.Token, time.Second)
		}, lock.CodeLost},
		{"renew with ttl one past MaxTTL", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			l := held(t, tab, at)
			return tab.Renew(at, key("k"), l.Token, maxTTL+1)
		}, lock.CodeBadTTL},
		{"release at the lease's last nanosecond", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			l := held(t, tab, at)
			return tab.Release(at.Add(homeTTL-1), key("k"), l.Token, fence)
		}, lock.CodeReleased},
		{"release at its expiry", func(t *testing.T, tab *lock.Table, at time.Time) lock.Result {
			l := held(t, tab, at)
			return tab.Release(at.Add(homeTTL), key("k"), l.Token, fence)
		}, lock.CodeLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab, at := open(t, nil)
			if got := tc.probe(t, tab, at); got.Code != tc.want {
				t.Fatalf("got %s (lease %+v, retry after %v), want %s", got.Code, got.Lease, got.RetryAfter, tc.want)
			}
		})
	}

	// Confirm and Check at the two ends of a lease: the home's expiry and the holder's
	// deadline on the home's clock.
	for _, tc := range []struct {
		name    string
		after   time.Duration
		confirm bool
		check   bool
	}{
		{"the grant", 0, true, true},
		{"the holder's deadline, its last nanosecond", own - 1, true, true},
		{"the holder's deadline", own, true, false},
		{"the home's expiry, its last nanosecond", homeTTL - 1, true, false},
		{"the home's expiry", homeTTL, false, false},
	} {
		t.Run("confirm and check at "+tc.name, func(t *testing.T) {
			tab, at := open(t, nil)
			l := held(t, tab, at)
			if got := tab.Check(at.Add(tc.after), key("k"), l.Token); got != tc.check {
				t.Fatalf("Check = %v, want %v", got, tc.check)
			}
			if got := tab.Confirm(at.Add(tc.after), key("k"), l.Token); got != tc.confirm {
				t.Fatalf("Confirm = %v, want %v", got, tc.confirm)
			}
		})
	}

	// A wait at its last nanosecond and at its end.
	for _, tc := range []struct {
		name  string
		after time.Duration
		want  []lock.Code
	}{
		{"its last nanosecond", time.Second - 1, nil},
		{"its end", time.Second, []lock.Code{lock.CodeHeld}},
	} {
		t.Run("a wait at "+tc.name, func(t *testing.T) {
			tab, at := open(t, nil)
			held(t, tab, at)
			r := tab.Acquire(at, key("k"), "w", time.Second, time.Second, gen, fence)
			var got []lock.Code
			for _, e := range tab.Tick(at.Add(tc.after), fence) {
				if e.Waiter != r.Waiter {
					t.Fatalf("an event for waiter %d, want %d", e.Waiter, r.Waiter)
				}
				got = append(got, e.Result.Code)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("events %v, want %v", got, tc.want)
			}
		})
	}
}

// TestGrantFields checks what a grant carries: the next counter's token under the highest
// generation given, the fence given with the input that granted (a copy), the expiry.
func TestGrantFields(t *testing.T) {
	tab, at := open(t, nil)
	f := lock.Fence{{Origin: homeB, Seq: 9}}
	r := tab.Acquire(at, key("a"), "h1", time.Second, 0, 4, f)
	want := lock.Lease{Token: lock.Token{Generation: 4, Incarnation: 1, Counter: 1, Home: homeA}, Holder: "h1",
		Granted: at, TTL: time.Second, Expiry: at.Add(time.Second + time.Millisecond), Fence: f}
	if r.Code != lock.CodeGranted || !reflect.DeepEqual(r.Lease, want) || !reflect.DeepEqual(r.Fence, f) {
		t.Fatalf("got %+v, want %+v with fence %v", r, want, f)
	}
	f[0].Seq = 10 // the caller's buffer, reused
	if r.Fence[0].Seq != 9 {
		t.Fatalf("the grant's fence changed with the caller's buffer: %v", r.Fence)
	}
	// A lower generation given later does not lower the grants' generation.
	r = tab.Acquire(at, key("b"), "h2", time.Second, 0, 3, f)
	if r.Lease.Token.Generation != 4 || r.Lease.Token.Counter != 2 {
		t.Fatalf("second grant token %+v, want generation 4 counter 2", r.Lease.Token)
	}
}

// TestTimeBackwards: an input earlier than one given before is taken at the later time, so
// nothing that ended comes back.
func TestTimeBackwards(t *testing.T) {
	tab, at := open(t, nil)
	l := mustGrant(t, tab.Acquire(at, key("k"), "h", time.Second, 0, 1, fence))
	later := at.Add(2 * time.Second) // past the lease
	// No tick yet: the lease is still in the table, expired by time alone.
	if tab.Confirm(later, key("k"), l.Token) {
		t.Fatal("confirmed past the expiry")
	}
	for _, step := range []struct {
		name string
		ok   func() bool
	}{
		{"confirm", func() bool { return tab.Confirm(at, key("k"), l.Token) }},
		{"check", func() bool { return tab.Check(at, key("k"), l.Token) }},
		{"renew", func() bool { return tab.Renew(at, key("k"), l.Token, time.Second).Code == lock.CodeRenewed }},
		{"release", func() bool { return tab.Release(at, key("k"), l.Token, fence).Code == lock.CodeReleased }},
	} {
		if step.ok() {
			t.Errorf("%s at the grant's time, after an input past its expiry: the lease came back", step.name)
		}
	}
	// A grant made with an earlier now is made at the latest time.
	r := tab.Acquire(at, key("k"), "h2", time.Second, 0, 1, fence)
	if r.Code != lock.CodeGranted || !r.Lease.Granted.Equal(later) {
		t.Fatalf("grant after time went back: %+v, want granted at %v", r, later)
	}
	// A quarantine that ended does not begin again when time goes back.
	tab2, err := lock.New(goodConfig(), homeA, 2, epoch)
	if err != nil {
		t.Fatal(err)
	}
	tab2.Tick(at, nil)
	if r := tab2.Acquire(epoch, key("k"), "h", time.Second, 0, 1, fence); r.Code != lock.CodeGranted {
		t.Fatalf("after the restart quarantine ended, an input at the start: %s", r.Code)
	}
}

// TestOverlapsCounted: a Confirm for a token this home granted, whose lease ended, is an
// overlap; one for a token it never granted (another home, an earlier incarnation, a
// counter it has not reached) is only a lost confirm.
func TestOverlapsCounted(t *testing.T) {
	tab, at := open(t, nil)
	l := mustGrant(t, tab.Acquire(at, key("k"), "h", time.Second, 0, 1, fence))
	if !tab.Confirm(at, key("k"), l.Token) {
		t.Fatal("a live lease not confirmed")
	}
	tab.Release(at, key("k"), l.Token, fence)
	foreign := []lock.Token{
		{Generation: 1, Incarnation: 1, Counter: 1, Home: homeB},
		{Generation: 1, Incarnation: 0, Counter: 1, Home: homeA},
		{Generation: 1, Incarnation: 1, Counter: 2, Home: homeA},
		{},
	}
	for _, tok := range foreign {
		if tab.Confirm(at, key("k"), tok) {
			t.Fatalf("confirmed %v", tok)
		}
	}
	if tab.Confirm(at, key("k"), l.Token) {
		t.Fatal("a released lease confirmed")
	}
	s := tab.Stats()
	if s.ConfirmsLost != 5 || s.Overlaps != 1 {
		t.Fatalf("confirms lost %d, overlaps %d; want 5 and 1", s.ConfirmsLost, s.Overlaps)
	}
}

// TestStatsCount checks the counters against a known sequence.
func TestStatsCount(t *testing.T) {
	tab, at := open(t, nil)
	tab.Acquire(epoch, key("q"), "h", time.Second, 0, 1, fence) // quarantined
	a := mustGrant(t, tab.Acquire(at, key("a"), "h", time.Second, 0, 1, fence))
	tab.Acquire(at, key("a"), "h", time.Second, 0, 1, fence)                // held
	w := tab.Acquire(at, key("a"), "w", time.Second, time.Second, 1, fence) // queued
	tab.Acquire(at, key("b"), "h", 0, 0, 1, fence)                          // bad-ttl
	tab.Renew(at, key("a"), a.Token, time.Second)                           // renewed
	ev := tab.Release(at, key("a"), a.Token, fence).Events                  // released, w granted
	tab.Renew(at, key("a"), a.Token, time.Second)                           // lost
	if len(ev) != 1 || ev[0].Waiter != w.Waiter || ev[0].Result.Code != lock.CodeGranted {
		t.Fatalf("release events %+v", ev)
	}
	tab.Tick(at.Add(time.Hour), nil) // w's lease expires
	got := tab.Stats()
	want := lock.Stats{
		Granted: 2, Queued: 1, Renewed: 1, Released: 1, Expired: 1,
		Refused:    map[lock.Code]uint64{lock.CodeQuarantined: 1, lock.CodeHeld: 1, lock.CodeBadTTL: 1, lock.CodeLost: 1},
		Generation: 1, Incarnation: 1, Counter: 2,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stats\n got %+v\nwant %+v", got, want)
	}
}

// TestNext: the earliest instant Tick has work, zero when none.
func TestNext(t *testing.T) {
	tab, at := open(t, nil)
	if got := tab.Next(); !got.Equal(at) {
		t.Fatalf("Next() in the restart quarantine = %v, want its end %v", got, at)
	}
	tab.Tick(at, nil)
	if got := tab.Next(); !got.IsZero() {
		t.Fatalf("Next() of an idle table = %v, want zero", got)
	}
	l := mustGrant(t, tab.Acquire(at, key("k"), "h", time.Second, 0, 1, fence))
	tab.Acquire(at, key("k"), "w", time.Second, 500*time.Millisecond, 1, fence)
	if got := tab.Next(); !got.Equal(at.Add(500 * time.Millisecond)) {
		t.Fatalf("Next() = %v, want the wait's end", got)
	}
	tab.Tick(at.Add(500*time.Millisecond), nil)
	if got := tab.Next(); !got.Equal(l.Expiry) {
		t.Fatalf("Next() = %v, want the lease's expiry %v", got, l.Expiry)
	}
}

// TestDeterminism: the same inputs give the same outputs, events in the same order
// (a key's waiters, a tick over many keys, a move quarantine over many keys).
func TestDeterminism(t *testing.T) {
	run := func() []string {
		tab, at := open(t, func(c *lock.Config) { c.MaxLeases = 64; c.MaxWaiters = 64 })
		var out []any
		for i := range 30 {
			k := key(fmt.Sprint(i % 10))
			out = append(out, tab.Acquire(at.Add(time.Duration(i)*time.Millisecond), k, fmt.Sprint("h", i), time.Second, time.Duration(i%3)*time.Second, 1, fence))
		}
		out = append(out, tab.MoveQuarantine(at.Add(time.Second/2), 2, func(k lock.Key) bool { return k.Key[0]%2 == 0 }))
		out = append(out, tab.Tick(at.Add(5*time.Second), fence), tab.Stats())
		lines := make([]string, len(out))
		for i, o := range out {
			lines[i] = fmt.Sprintf("%+v", o)
		}
		return lines
	}
	first := run()
	for range 20 {
		got := run()
		for i := range first {
			if got[i] != first[i] {
				t.Fatalf("two runs differ at output %d:\n%s\n%s", i, first[i], got[i])
			}
		}
	}
}

// TestMoveFloor: a key MoveHome brings from home "B" is quarantined, then move-pending until
// B's floor is given and the fence covers it; a key it does not bring is granted throughout;
// once the floor is applied the move is forgotten. MoveAway drops a lease and answers its
// waiter not-home.
func TestMoveFloor(t *testing.T) {
	tab, at := open(t, nil)
	q := goodConfig().Quarantine()
	moved, stays := key("m"), key("s")
	from := func(k lock.Key) (string, bool) { return "B", string(k.Key) == "m" }
	tab.MoveHome(at, 2, from, []string{"B"})
	if r := tab.Acquire(at, moved, "x", time.Second, 0, 2, fence); r.Code != lock.CodeQuarantined {
		t.Fatalf("in the quarantine: %s", r.Code)
	}
	mustGrant(t, tab.Acquire(at, stays, "x", time.Second, 0, 2, fence))
	at = at.Add(q)
	if r := tab.Acquire(at, moved, "x", time.Second, 0, 2, fence); r.Code != lock.CodeMovePending {
		t.Fatalf("after the quarantine, no floor: %s", r.Code)
	}
	if w := tab.FloorsWanted(); !reflect.DeepEqual(w, []lock.FloorWant{{Generation: 2, Homes: []string{"B"}}}) {
		t.Fatalf("floors wanted %v", w)
	}
	// B let go of the key before it gave its floor, so its leases end within a quarantine
	// of the floor's arrival: the key is quarantined again until then.
	tab.Floor(at, 2, "B", lock.Fence{{Origin: homeB, Seq: 4}})
	if r := tab.Acquire(at, moved, "x", time.Second, 0, 2, fence); r.Code != lock.CodeQuarantined || !r.Until.Equal(at.Add(q)) {
		t.Fatalf("as the floor arrives: %s until %v, want quarantined until %v", r.Code, r.Until, at.Add(q))
	}
	at = at.Add(q)
	if r := tab.Acquire(at, moved, "x", time.Second, 0, 2, fence); r.Code != lock.CodeMovePending {
		t.Fatalf("a floor above the fence (B 4 > 3): %s", r.Code)
	}
	if st := tab.Stats(); st.MovesAwaitingFloor != 1 || st.Refused[lock.CodeMovePending] != 2 {
		t.Fatalf("stats %+v", st)
	}
	covering := lock.Fence{{Origin: homeA, Seq: 7}, {Origin: homeB, Seq: 4}}
	l := mustGrant(t, tab.Acquire(at, moved, "x", time.Second, 0, 2, covering))
	if !reflect.DeepEqual(l.Fence, covering) || tab.Stats().MovesAwaitingFloor != 0 {
		t.Fatalf("the first grant's fence %v, stats %+v", l.Fence, tab.Stats())
	}
	if r := tab.Acquire(at, moved, "y", time.Second, time.Second, 2, covering); r.Code != lock.CodeQueued {
		t.Fatalf("a waiter: %s", r.Code)
	}
	ev := tab.MoveAway(at, 3, func(k lock.Key) bool { return string(k.Key) != "m" })
	if len(ev) != 1 || ev[0].Result.Code != lock.CodeNotHome || tab.Stats().MovedAway != 1 || tab.Confirm(at, moved, l.Token) {
		t.Fatalf("MoveAway: events %+v, stats %+v", ev, tab.Stats())
	}
}
