package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"plait/protocol"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// Script drives a cluster from the commands of a scenario file (conformance/testdata):
// one command per call, its output the trace of what happened during it followed by what
// it reports. Arguments are datadriven's: a bare word, key=value or key=(v1, v2).
type Script struct {
	c       *Cluster
	seed    uint64
	sync    time.Duration  // Options.SyncDelay of the cluster
	retain  replica.Config // the retention and the copies' chunks of the cluster (retain)
	anyV1   bool           // a node spoke version 1 at some point
	trace   []string
	written map[string]int // writes per node, numbering the values
	moves   map[string]int // per node, moves reported so far

	// NewSession, when set before the first command, makes every session of the cluster
	// (Options.NewSession): a scenario run on another build of the core.
	NewSession func(protocol.Config) (replica.Session, error)
}

// Arg is one argument of a command.
type Arg struct {
	Key  string
	Vals []string
}

// NewScript starts a script; its cluster is made by the first command.
func NewScript() *Script {
	return &Script{seed: 1, written: map[string]int{}, moves: map[string]int{}}
}

// Cluster is the script's cluster (nil before the first node).
func (s *Script) Cluster() *Cluster { return s.c }

type handler func(s *Script, args []Arg) (string, error)

var handlers = map[string]handler{
	"seed":       (*Script).cmdSeed,
	"sync-delay": (*Script).cmdSyncDelay,
	"retain":     (*Script).cmdRetain,
	"lose-power": (*Script).cmdLosePower,
	"add-nodes":  (*Script).cmdAddNodes,
	"connect":    (*Script).cmdConnect,
	"disconnect": (*Script).cmdDisconnect,
	"partition":  (*Script).cmdPartition,
	"heal":       (*Script).cmdHeal,
	"write":      (*Script).cmdWrite,
	"put":        (*Script).cmdPut,
	"delete":     (*Script).cmdDelete,
	"crash":      (*Script).cmdCrash,
	"restart":    (*Script).cmdRestart,
	"fault":      (*Script).cmdFault,
	"run":        (*Script).cmdRun,
	"stabilize":  (*Script).cmdStabilize,
	"status":     (*Script).cmdStatus,
	"counters":   (*Script).cmdCounters,
	"check":      (*Script).cmdCheck,
	"peers":      (*Script).cmdPeers,
	"records":    (*Script).cmdRecords,
	"history":    (*Script).cmdHistory,
}

// Run executes one command and returns its output.
func (s *Script) Run(cmd string, args []Arg) string {
	h := handlers[cmd]
	if h == nil {
		return "error: unknown command " + cmd + "\n"
	}
	s.trace = s.trace[:0]
	out, err := h(s, args)
	var b strings.Builder
	for _, l := range s.trace {
		b.WriteString(l + "\n")
	}
	b.WriteString(out)
	if err != nil {
		b.WriteString("error: " + err.Error() + "\n")
	}
	return b.String()
}

func (s *Script) cluster() *Cluster {
	if s.c == nil {
		cfg := s.retain // the retention and the copies' chunks that retain gave
		cfg.Limits, cfg.NewSession = SimLimits, s.NewSession
		// Scenarios trace replication, routing and copies with their times: passes of
		// anti-entropy would draw network delays of their own and move every time after
		// them. Its own tests are in antientropy_test.go.
		cfg.AntiEntropyInterval = -1
		s.c = New(Options{Seed: s.seed, SyncDelay: s.sync, Trace: func(l string) { s.trace = append(s.trace, l) }, Config: cfg})
	}
	return s.c
}

func (s *Script) needCluster() error {
	if s.c == nil {
		return fmt.Errorf("no nodes yet: add-nodes first")
	}
	return nil
}

// value returns an argument's single value.
func value(args []Arg, key string) (string, bool) {
	for _, a := range args {
		if a.Key == key && len(a.Vals) == 1 {
			return a.Vals[0], true
		}
	}
	return "", false
}

func duration(args []Arg, key string, def time.Duration) (time.Duration, error) {
	v, ok := value(args, key)
	if !ok {
		return def, nil
	}
	return time.ParseDuration(v)
}

func number(args []Arg, key string, def int) (int, error) {
	v, ok := value(args, key)
	if !ok {
		return def, nil
	}
	return strconv.Atoi(v)
}

func version(args []Arg) (uint64, error) {
	n, err := number(args, "version", 0)
	return uint64(n), err
}

// bare lists the arguments without a value: node names, links.
func bare(args []Arg) []string {
	var out []string
	for _, a := range args {
		if len(a.Vals) == 0 {
			out = append(out, a.Key)
		}
	}
	return out
}

// pairs splits arguments like A-B (or A->B) into their two nodes.
func pairs(args []Arg, sep string) ([][2]string, error) {
	var out [][2]string
	for _, w := range bare(args) {
		a, b, ok := strings.Cut(w, sep)
		if !ok {
			return nil, fmt.Errorf("%q is not NODE%sNODE", w, sep)
		}
		out = append(out, [2]string{a, b})
	}
	return out, nil
}

// seed N: the seed of the cluster's generator (before the first node).
func (s *Script) cmdSeed(args []Arg) (string, error) {
	if s.c != nil {
		return "", fmt.Errorf("seed must come before the first node")
	}
	n := bare(args)
	if len(n) != 1 {
		return "", fmt.Errorf("seed N")
	}
	v, err := strconv.ParseUint(n[0], 10, 64)
	s.seed = v
	return "", err
}

// sync-delay D: before the first node, run every node holding unsynced writes back
// until a simulated group commit D later (replica.Config.HoldUnsynced).
func (s *Script) cmdSyncDelay(args []Arg) (string, error) {
	if s.c != nil {
		return "", fmt.Errorf("sync-delay must come before the first node")
	}
	w := bare(args)
	if len(w) != 1 {
		return "", fmt.Errorf("sync-delay DURATION")
	}
	d, err := time.ParseDuration(w[0])
	s.sync = d
	return "", err
}

// lose-power A ...: a crash that also loses every write since the node's last sync
// (needs sync-delay).
func (s *Script) cmdLosePower(args []Arg) (string, error) {
	if err := s.needCluster(); err != nil {
		return "", err
	}
	for _, n := range bare(args) {
		if err := s.c.PowerLoss(n); err != nil {
			return "", err
		}
	}
	return "", nil
}

// retain [age=D] [hold=D] [bytes=N] [chunk=N]: before the first node, every node's
// retention (replica.Config RetainAge, RetainHold, RetainBytes) and the size its base
// copies' chunks aim at (CopyChunk); what is not given keeps the replica's default.
func (s *Script) cmdRetain(args []Arg) (string, error) {
	if s.c != nil {
		return "", fmt.Errorf("retain must come before the first node")
	}
	var err error
	if s.retain.RetainAge, err = duration(args, "age", 0); err != nil {
		return "", err
	}
	if s.retain.RetainHold, err = duration(args, "hold", 0); err != nil {
		return "", err
	}
	bytes, err := number(args, "bytes", 0)
	if err != nil {
		return "", err
	}
	s.retain.RetainBytes = uint64(bytes)
	s.retain.CopyChunk, err = number(args, "chunk", 0)
	return "", err
}

// versionSeen records a node's protocol-max: while no node ever speaks version 1, the
// cluster promises that nothing is received twice, and a duplicate fails the script.
func (s *Script) versionSeen(v uint64) {
	s.anyV1 = s.anyV1 || v == 1
	s.c.SetV2Only(!s.anyV1)
}

// add-nodes A B ... [version=1]
func (s *Script) cmdAddNodes(args []Arg) (string, error) {
	v, err := version(args)
	if err != nil {
		return "", err
	}
	defer func() { s.versionSeen(v) }()
	for _, n := range bare(args) {
		if err := s.cluster().AddNode(n, v); err != nil {
			return "", err
		}
	}
	return "", nil
}

// eachLink calls f for each A-B argument, stopping at the first error.
func (s *Script) eachLink(args []Arg, f func(a, b string) error) error {
	if err := s.needCluster(); err != nil {
		return err
	}
	ps, err := pairs(args, "-")
	for _, p := range ps {
		if err != nil {
			break
		}
		err = f(p[0], p[1])
	}
	return err
}

// connect A-B ...: A dials B, and redials while the link is up.
func (s *Script) cmdConnect(args []Arg) (string, error) {
	return "", s.eachLink(args, func(a, b string) error { return s.c.Connect(a, b) })
}

// disconnect A-B ...: drop the connection; the dialer redials.
func (s *Script) cmdDisconnect(args []Arg) (string, error) {
	return "", s.eachLink(args, func(a, b string) error { return s.c.Disconnect(a, b) })
}

// partition A-B ...: cut links until healed.
func (s *Script) cmdPartition(args []Arg) (string, error) {
	return "", s.eachLink(args, func(a, b string) error { return s.c.SetLink(a, b, false) })
}

// heal [A-B ...]: raise the links named, or with none raise every link, disarm faults,
// restart crashed nodes and stabilize.
func (s *Script) cmdHeal(args []Arg) (string, error) {
	if err := s.needCluster(); err != nil {
		return "", err
	}
	ps, err := pairs(args, "-")
	if err != nil {
		return "", err
	}
	if len(ps) == 0 {
		start := s.c.Now()
		if !s.c.Heal(2 * time.Minute) {
			_, why := s.c.Converged()
			return "NOT converged: " + why + "\n", nil
		}
		return fmt.Sprintf("converged after %s\n", s.c.Now().Sub(start).Round(time.Millisecond)), nil
	}
	for _, p := range ps {
		if err := s.c.SetLink(p[0], p[1], true); err != nil {
			return "", err
		}
	}
	return "", nil
}

// write A [n=1] [table=t] [keys=K]: n transactions on A, each a put of a key among K
// (default: a new key each) with a value naming the writer.
func (s *Script) cmdWrite(args []Arg) (string, error) {
	if err := s.needCluster(); err != nil {
		return "", err
	}
	n, err := number(args, "n", 1)
	if err != nil {
		return "", err
	}
	keys, err := number(args, "keys", 0)
	if err != nil {
		return "", err
	}
	table, ok := value(args, "table")
	if !ok {
		table = "t"
	}
	for _, node := range bare(args) {
		for range n {
			s.written[node]++
			i := s.written[node]
			key := fmt.Sprintf("%s%d", strings.ToLower(node), i)
			if keys > 0 {
				key = fmt.Sprintf("k%d", i%keys)
			}
			if _, err := s.c.Write(node, []wire.Op{{Kind: wire.OpPut, Table: []byte(table), Key: []byte(key),
				Value: []byte(fmt.Sprintf("%s-%d", node, i))}}); err != nil {
				return "", err
			}
		}
	}
	return "", nil
}

// put A table/key=value ...: one transaction of puts on A.
func (s *Script) cmdPut(args []Arg) (string, error) {
	return s.writeOps(args, wire.OpPut)
}

// delete A table/key ...: one transaction of deletes on A.
func (s *Script) cmdDelete(args []Arg) (string, error) {
	return s.writeOps(args, wire.OpDelete)
}

func (s *Script) writeOps(args []Arg, kind wire.OpKind) (string, error) {
	if err := s.needCluster(); err != nil {
		return "", err
	}
	if len(args) < 2 || len(args[0].Vals) != 0 {
		return "", fmt.Errorf("NODE table/key[=value] ...")
	}
	var ops []wire.Op
	for _, a := range args[1:] {
		table, key, ok := strings.Cut(a.Key, "/")
		if !ok {
			return "", fmt.Errorf("%q is not table/key", a.Key)
		}
		op := wire.Op{Kind: kind, Table: []byte(table), Key: []byte(key)}
		if kind == wire.OpPut {
			if len(a.Vals) != 1 {
				return "", fmt.Errorf("put %s needs =value", a.Key)
			}
			op.Value = []byte(a.Vals[0])
		}
		ops = append(ops, op)
	}
	seq, err := s.c.Write(args[0].Key, ops)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s seq %d\n", args[0].Key, seq), nil
}

// crash A ...
func (s *Script) cmdCrash(args []Arg) (string, error) {
	if err := s.needCluster(); err != nil {
		return "", err
	}
	for _, n := range bare(args) {
		if err := s.c.Crash(n); err != nil {
			return "", err
		}
	}
	return "", nil
}

// restart A ... [version=N]: from the node's store, speaking versions up to N.
func (s *Script) cmdRestart(args []Arg) (string, error) {
	if err := s.needCluster(); err != nil {
		return "", err
	}
	v, err := version(args)
	if err != nil {
		return "", err
	}
	s.versionSeen(v)
	for _, n := range bare(args) {
		if err := s.c.Restart(n, v); err != nil {
			return "", err
		}
	}
	return "", nil
}

// fault A->B drop|corrupt: the next entry A sends B is dropped or corrupted.
func (s *Script) cmdFault(args []Arg) (string, error) {
	if err := s.needCluster(); err != nil {
		return "", err
	}
	words := bare(args)
	if len(words) != 2 {
		return "", fmt.Errorf("fault A->B drop|corrupt")
	}
	a, b, ok := strings.Cut(words[0], "->")
	if !ok {
		return "", fmt.Errorf("%q is not A->B", words[0])
	}
	return "", s.c.Inject(a, b, FaultKind(words[1]))
}

// run for=D [writers=(A, B)] [every=D]: advance the clock, the writers writing one
// transaction each every period (default 100 ms).
func (s *Script) cmdRun(args []Arg) (string, error) {
	if err := s.needCluster(); err != nil {
		return "", err
	}
	d, err := duration(args, "for", time.Second)
	if err != nil {
		return "", err
	}
	every, err := duration(args, "every", 100*time.Millisecond)
	if err != nil {
		return "", err
	}
	var writers []string
	for _, a := range args {
		if a.Key == "writers" {
			writers = a.Vals
		}
	}
	end := s.c.Now().Add(d)
	for len(writers) > 0 && s.c.Now().Add(every).Before(end) {
		s.c.Run(every)
		for _, w := range writers {
			if s.c.Node(w) != nil && s.c.Node(w).Rep != nil {
				if _, err := s.cmdWrite([]Arg{{Key: w}}); err != nil {
					return "", err
				}
			}
		}
	}
	s.c.RunUntil(end)
	return "", nil
}

// stabilize [limit=D]: run until every node holds every origin's log.
func (s *Script) cmdStabilize(args []Arg) (string, error) {
	if err := s.needCluster(); err != nil {
		return "", err
	}
	limit, err := duration(args, "limit", time.Minute)
	if err != nil {
		return "", err
	}
	start := s.c.Now()
	if !s.c.Stabilize(limit) {
		_, why := s.c.Converged()
		return "NOT converged: " + why + "\n", nil
	}
	return fmt.Sprintf("converged after %s\n", s.c.Now().Sub(start).Round(time.Millisecond)), nil
}

// report runs f for each node named in args, which must be running, into one output.
func (s *Script) report(args []Arg, f func(b *strings.Builder, n *Node) error) (string, error) {
	if err := s.needCluster(); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, name := range bare(args) {
		n := s.c.Node(name)
		if n == nil || n.Rep == nil {
			return "", fmt.Errorf("%s is not running", name)
		}
		if err := f(&b, n); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// status A ...: each node's origins (the origins[] fields of docs/contract.md §8.2).
func (s *Script) cmdStatus(args []Arg) (string, error) {
	return s.report(args, func(b *strings.Builder, n *Node) error {
		fmt.Fprintf(b, "%s:\n", n.Name)
		for _, o := range n.Rep.Status(s.c.Now()).Origins {
			fmt.Fprintf(b, "  origin %-3s applied=%d head=%d lag=%d source=%q changes=%d diverged=%v\n",
				o.Name, o.AppliedSeq, o.HeadSeq, o.LagSeq, o.SourcePeer, o.SourceChanges, o.Diverged)
		}
		return nil
	})
}

// counters A ...: each node's counters (the counters of docs/contract.md §8.4).
func (s *Script) cmdCounters(args []Arg) (string, error) {
	return s.report(args, func(b *strings.Builder, n *Node) error {
		k := n.Rep.Counters()
		fmt.Fprintf(b, "%s: applied=%d duplicates=%d gaps=%d resends=%d protocol_errors=%d divergences=%d\n", n.Name,
			k.TxnsApplied, k.DuplicatesReceived, k.GapsDetected, k.ResendsRequested, k.ProtocolErrors, k.Divergences)
		return nil
	})
}

// check: convergence, identical records everywhere, and every invariant so far.
func (s *Script) cmdCheck(args []Arg) (string, error) {
	if err := s.needCluster(); err != nil {
		return "", err
	}
	count, digest := s.c.CheckConverged()
	faults := s.c.Faults()
	var b strings.Builder
	if f := s.c.Failures(); len(f) > 0 {
		b.WriteString("INVARIANTS FAILED:\n")
		for _, l := range f {
			b.WriteString("  " + l + "\n")
		}
		return b.String(), nil
	}
	running := 0
	for _, n := range s.c.Names() {
		if s.c.Node(n).Rep != nil {
			running++
		}
	}
	fmt.Fprintf(&b, "%d running nodes equal: %d live records, digest %s\n", running, count, digest)
	if f := faults; f.Injected > 0 {
		fmt.Fprintf(&b, "faults: %d injected, %d detected by the session, %d reached the node another way first, %d sent again before a later entry, %d ended with their connection\n",
			f.Injected, f.Detected, f.Covered, f.Resent, f.Closed)
	}
	b.WriteString("invariants hold\n")
	return b.String(), nil
}

// peers A ...: each node's connections: peer, state and negotiated version.
func (s *Script) cmdPeers(args []Arg) (string, error) {
	return s.report(args, func(b *strings.Builder, n *Node) error {
		fmt.Fprintf(b, "%s:\n", n.Name)
		for _, p := range n.Rep.Status(s.c.Now()).Peers {
			dialer := p.Name
			if p.Dialed {
				dialer = n.Name
			}
			fmt.Fprintf(b, "  peer %-3s %s version=%d connected=%v dialed-by=%s\n", p.Name, p.State, p.Version, p.Connected, dialer)
		}
		return nil
	})
}

// records A: every record the node holds, tombstones included, with the origin whose
// write won.
func (s *Script) cmdRecords(args []Arg) (string, error) {
	return s.report(args, func(b *strings.Builder, n *Node) error {
		fmt.Fprintf(b, "%s:\n", n.Name)
		tables, err := n.Store.Tables()
		for _, t := range tables {
			if err != nil {
				break
			}
			err = n.Store.Scan(t, nil, func(r store.Record) bool {
				if r.Deleted {
					fmt.Fprintf(b, "  %s/%s deleted by %s\n", r.Table, r.Key, s.c.originName(r.Origin))
				} else {
					fmt.Fprintf(b, "  %s/%s = %q by %s\n", r.Table, r.Key, r.Value, s.c.originName(r.Origin))
				}
				return true
			})
		}
		return err
	})
}

// history A ...: each node's bounded history: per origin its floor and log bytes, the
// retention and copy counters (docs/contract.md §8.4), per open connection the copy under
// way, and per peer name the last error's code and class.
func (s *Script) cmdHistory(args []Arg) (string, error) {
	return s.report(args, func(b *strings.Builder, n *Node) error {
		st := n.Rep.Status(s.c.Now())
		fmt.Fprintf(b, "%s:\n", n.Name)
		for _, o := range st.Origins {
			fmt.Fprintf(b, "  origin %-3s floor=%d applied=%d log_bytes=%d\n", o.Name, o.FloorSeq, o.AppliedSeq, o.LogBytes)
		}
		k := st.Counters
		fmt.Fprintf(b, "  purged_answers=%d entries_purged=%d tombstones_dropped=%d\n", k.PurgedAnswers, k.EntriesPurged, k.TombstonesDropped)
		fmt.Fprintf(b, "  copies started=%d resumed=%d completed=%d records=%d served=%d busy=%d refused=%d bad_chunks=%d\n",
			k.CopiesStarted, k.CopiesResumed, k.CopiesCompleted, k.CopyRecords, k.CopiesServed, k.CopiesBusy, k.CopiesRefused, k.BadChunks)
		for _, p := range st.Peers {
			cp := "-"
			if c := p.Copy; c != nil {
				cp = fmt.Sprintf("%s records=%d", c.Direction, c.Records)
			}
			fmt.Fprintf(b, "  peer %-3s version=%d copy=%s\n", p.Name, p.Version, cp)
		}
		for _, name := range s.c.Names() { // kept after the connection is gone
			if e := n.Rep.LastError(name); name != n.Name && e != nil && e.Err != nil {
				fmt.Fprintf(b, "  last error with %s: %s (%s)\n", name, e.Err.Code, e.Err.Class)
			}
		}
		return nil
	})
}
