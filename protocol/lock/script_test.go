package lock_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"plait/protocol/lock"
	"plait/protocol/wire"
)

// TestScripts runs the scripts of testdata/scripts: sequences of inputs to one home's table, each
// followed by the exact answer it must give (the datadriven form of conformance's
// scenarios). Times are durations from the table's first instant; a token is written
// generation.incarnation.counter (its home is always the same); a key is table/key, or key
// alone in table t. After a deliberate change, regenerate with -rewrite and review the diff.
//
//	new max-ttl=D max-wait=D max-leases=N max-waiters=N drift=F offset=D [inc=N] [at=D]
//	restart at=D inc=N           a new table of the same config (the home restarted)
//	fence a=SEQ b=SEQ            the applied positions given with every later input
//	acquire at=D key=K [holder=H] ttl=D [wait=D] [gen=N]
//	renew at=D key=K token=T ttl=D
//	release at=D key=K token=T
//	confirm at=D key=K token=T   (and check, the same arguments)
//	tick at=D
//	move at=D gen=N keys=(K, ...)  a move quarantine of the keys listed
//	next | stats
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/scripts", func(t *testing.T, path string) {
		s := &script{gen: 1}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return s.run(t, d)
		})
	})
}

type script struct {
	cfg   lock.Config
	tab   *lock.Table
	fence lock.Fence
	gen   uint64 // the generation of the last acquire or move, the default of the next
}

var names = map[string]wire.OriginID{"a": homeA, "b": homeB}

func (s *script) run(t *testing.T, d *datadriven.TestData) string {
	args := map[string][]string{}
	for _, a := range d.CmdArgs {
		args[a.Key] = a.Vals
	}
	str := func(k, def string) string {
		if v, ok := args[k]; ok && len(v) == 1 {
			return v[0]
		}
		if def == "" {
			d.Fatalf(t, "%s needs %s=", d.Cmd, k)
		}
		return def
	}
	dur := func(k, def string) time.Duration {
		v, err := time.ParseDuration(str(k, def))
		if err != nil {
			d.Fatalf(t, "%s: %v", k, err)
		}
		return v
	}
	num := func(k, def string) uint64 {
		v, err := strconv.ParseUint(str(k, def), 10, 64)
		if err != nil {
			d.Fatalf(t, "%s: %v", k, err)
		}
		return v
	}
	at := func() time.Time { return epoch.Add(dur("at", "")) }
	k := func() lock.Key { return parseKey(str("key", "")) }
	tok := func() lock.Token {
		parts := strings.Split(str("token", ""), ".")
		if len(parts) != 3 {
			d.Fatalf(t, "token is gen.inc.counter")
		}
		var n [3]uint64
		for i, p := range parts {
			v, err := strconv.ParseUint(p, 10, 64)
			if err != nil {
				d.Fatalf(t, "token: %v", err)
			}
			n[i] = v
		}
		return lock.Token{Generation: n[0], Incarnation: n[1], Counter: n[2], Home: homeA}
	}

	switch d.Cmd {
	case "new":
		drift, err := strconv.ParseFloat(str("drift", "0.001"), 64)
		if err != nil {
			d.Fatalf(t, "drift: %v", err)
		}
		s.cfg = lock.Config{
			MaxTTL: dur("max-ttl", ""), MaxWait: dur("max-wait", ""),
			MaxLeases: int(num("max-leases", "")), MaxWaiters: int(num("max-waiters", "")),
			Drift: drift, OffsetBound: dur("offset", ""),
		}
		fallthrough
	case "restart":
		tab, err := lock.New(s.cfg, homeA, num("inc", "1"), epoch.Add(dur("at", "0s")))
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		s.tab = tab
		return fmt.Sprintf("restart quarantine until %s\n", since(tab.Stats().RestartUntil))
	case "fence":
		s.fence = nil
		for _, a := range d.CmdArgs {
			v, err := strconv.ParseUint(a.Vals[0], 10, 64)
			if err != nil {
				d.Fatalf(t, "fence: %v", err)
			}
			s.fence = append(s.fence, lock.Position{Origin: names[a.Key], Seq: v})
		}
		return "ok\n"
	case "acquire":
		s.gen = num("gen", strconv.FormatUint(s.gen, 10))
		return result(s.tab.Acquire(at(), k(), str("holder", "h"), dur("ttl", ""), dur("wait", "0s"), s.gen, s.fence))
	case "renew":
		return result(s.tab.Renew(at(), k(), tok(), dur("ttl", "")))
	case "release":
		return result(s.tab.Release(at(), k(), tok(), s.fence))
	case "confirm":
		return fmt.Sprintln(s.tab.Confirm(at(), k(), tok()))
	case "check":
		return fmt.Sprintln(s.tab.Check(at(), k(), tok()))
	case "tick":
		return events(s.tab.Tick(at(), s.fence), "nothing due\n")
	case "move":
		s.gen = num("gen", "")
		var keys []lock.Key
		for _, v := range args["keys"] {
			keys = append(keys, parseKey(v))
		}
		ev := s.tab.MoveQuarantine(at(), s.gen, func(k lock.Key) bool {
			return slices.ContainsFunc(keys, func(x lock.Key) bool { return x.String() == k.String() })
		})
		return events(ev, "no waiter answered\n")
	case "next":
		n := s.tab.Next()
		if n.IsZero() {
			return "none\n"
		}
		return since(n) + "\n"
	case "stats":
		st := s.tab.Stats()
		var refused []string
		for c, n := range st.Refused {
			refused = append(refused, fmt.Sprintf("%s=%d", c, n))
		}
		slices.Sort(refused)
		out := fmt.Sprintf("leases=%d waiting=%d granted=%d queued=%d renewed=%d released=%d expired=%d timed-out=%d\n",
			st.Leases, st.Waiting, st.Granted, st.Queued, st.Renewed, st.Released, st.Expired, st.TimedOut)
		out += fmt.Sprintf("refused: %s\n", strings.Join(refused, " "))
		out += fmt.Sprintf("confirms-lost=%d overlaps=%d generation=%d incarnation=%d counter=%d move-quarantines=%d\n",
			st.ConfirmsLost, st.Overlaps, st.Generation, st.Incarnation, st.Counter, st.MoveQuarantines)
		return out
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

func parseKey(s string) lock.Key {
	if tb, k, ok := strings.Cut(s, "/"); ok {
		return lock.Key{Table: tb, Key: []byte(k)}
	}
	return lock.Key{Table: "t", Key: []byte(s)}
}

func since(at time.Time) string { return at.Sub(epoch).String() }

func token(tk lock.Token) string {
	if tk.Home != homeA {
		return "a token of another home"
	}
	return fmt.Sprintf("%d.%d.%d", tk.Generation, tk.Incarnation, tk.Counter)
}

func fenceText(f lock.Fence) string {
	if len(f) == 0 {
		return ""
	}
	var parts []string
	for _, p := range f {
		name := p.Origin.String()
		for n, o := range names {
			if o == p.Origin {
				name = n
			}
		}
		parts = append(parts, fmt.Sprintf("%s:%d", name, p.Seq))
	}
	return ", fence " + strings.Join(parts, " ")
}

func answer(r lock.Result) string {
	switch r.Code {
	case lock.CodeGranted:
		return fmt.Sprintf("granted %s to %s at %s, expires %s%s", token(r.Lease.Token), r.Lease.Holder, since(r.Lease.Granted), since(r.Lease.Expiry), fenceText(r.Fence))
	case lock.CodeRenewed:
		return fmt.Sprintf("renewed %s at %s, expires %s", token(r.Lease.Token), since(r.Lease.Granted), since(r.Lease.Expiry))
	case lock.CodeQueued:
		return fmt.Sprintf("queued as waiter %d", r.Waiter)
	case lock.CodeHeld:
		return fmt.Sprintf("lock-held, retry after %s", r.RetryAfter)
	case lock.CodeQuarantined:
		return fmt.Sprintf("quarantined until %s, retry after %s", since(r.Until), r.RetryAfter)
	}
	return string(r.Code)
}

func result(r lock.Result) string {
	return events(r.Events, "") + answer(r) + "\n"
}

func events(ev []lock.Event, none string) string {
	if len(ev) == 0 {
		return none
	}
	var b strings.Builder
	for _, e := range ev {
		fmt.Fprintf(&b, "waiter %d on %s/%s: %s\n", e.Waiter, e.Key.Table, e.Key.Key, answer(e.Result))
	}
	return b.String()
}
