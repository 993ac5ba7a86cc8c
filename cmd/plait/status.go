package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"plait/shells/native/httpapi"
)

// status is plait status: /v1/status of a node as readable tables.
func status(args []string, stdout, stderr io.Writer) int {
	var c statusFlags
	fs := newFlags("plait status", stderr)
	bind(fs, c.settings())
	if !parseFlags(fs, args) {
		return 2
	}
	if c.check && c.watch {
		refused(stderr, "plait status", errors.New("--check and --watch: --check exits with the state of one reading"))
		return 2
	}
	api, ok := c.connect("plait status", stderr)
	if !ok {
		return 2
	}
	read := func() (reading, error) {
		s, err := api.c.Status(context.Background())
		if err != nil {
			return reading{}, errors.New(apiMessage(err))
		}
		var doc httpapi.StatusDoc
		if err := json.Unmarshal(s.Raw, &doc); err != nil {
			return reading{}, fmt.Errorf("the status document: %w", err)
		}
		return reading{raw: s.Raw, doc: doc}, nil
	}
	if c.watch {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		watchStatus(ctx, read, stdout, c.json, isTerminal(stdout), watchEvery)
		return 0
	}
	r, err := read()
	if err != nil {
		fmt.Fprintln(stderr, "plait status:", err)
		return 1
	}
	if c.json {
		printJSON(stdout, r.raw)
	} else {
		printStatus(stdout, r.doc)
	}
	if c.check {
		if problems := checkProblems(r.doc); len(problems) > 0 {
			for _, p := range problems {
				fmt.Fprintln(stderr, "plait status --check:", p)
			}
			return exitCheckFailed
		}
	}
	return 0
}

// statusFlags are plait status's flags (docs/contract.md §12): those of every command that
// calls a node's API, and its own.
type statusFlags struct {
	apiFlags
	json, watch, check bool
}

// settings is plait status's table of flags, held to the contract's by TestFlagsInContract.
func (c *statusFlags) settings() []setting {
	return append(c.apiFlags.settings(),
		boolean("json", &c.json, "print the status document (JSON, one line) instead of the tables"),
		boolean("watch", &c.watch, "read the status every second until interrupted: on a terminal, redrawn in place"),
		boolean("check", &c.check, "exit 3 while the node refuses local writes or an origin is stuck or diverged (for probes and scripts)"),
	)
}

// exitCheckFailed is plait status --check's exit status when the node refuses local writes
// or an origin is stuck or diverged (docs/contract.md §12).
const exitCheckFailed = 3

// reading is one read of the status: the document as the node sent it, and decoded.
type reading struct {
	raw []byte
	doc httpapi.StatusDoc
}

// writesRefused is why the node refuses local writes now, as the codes its writes are
// answered with (docs/contract.md §6.3); none while it takes them.
func writesRefused(d httpapi.StatusDoc) []string {
	var why []string
	if d.Node.Storage.State == "degraded" {
		why = append(why, d.Node.Storage.Code)
	}
	if d.Node.Rewound != nil {
		why = append(why, "origin-rewound")
	}
	if d.Node.Clock.RefusingWrites {
		why = append(why, "clock-offset")
	}
	return why
}

// checkProblems is what makes plait status --check fail: local writes refused, and every
// origin that is stuck or diverged.
func checkProblems(d httpapi.StatusDoc) []string {
	var ps []string
	if why := writesRefused(d); len(why) > 0 {
		ps = append(ps, "node "+d.Node.Name+" refuses local writes: "+strings.Join(why, ", "))
	}
	for _, o := range d.Origins {
		if o.Stuck != nil {
			ps = append(ps, "origin "+originName(o)+" is stuck: "+*o.Stuck)
		}
		if o.Diverged {
			ps = append(ps, "origin "+originName(o)+" diverged")
		}
	}
	return ps
}

func originName(o httpapi.OriginDoc) string {
	if o.Name != "" {
		return o.Name
	}
	return o.Origin
}

// watchEvery is how often plait status --watch reads the status.
const watchEvery = time.Second

// Terminal control for --watch: the cursor home, and the screen cleared below it. Drawing
// over the last frame and then clearing what is left of it does not flicker as a full
// clear before each frame would.
const (
	cursorHome  = "\x1b[H"
	clearBelow  = "\x1b[J"
	clearScreen = "\x1b[2J"
)

// watchStatus reads and prints the status every interval until ctx ends. On a terminal
// each frame is drawn in place over the last one; elsewhere (a pipe, a file) frames follow
// each other, separated by a blank line, with nothing but text. A failed read is printed
// in the frame and the next tick tries again: a node that restarts is watched through it.
// With asJSON every frame is the status document on one line (JSON lines).
func watchStatus(ctx context.Context, read func() (reading, error), w io.Writer, asJSON, terminal bool, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	if terminal && !asJSON {
		fmt.Fprint(w, clearScreen)
	}
	for first := true; ; first = false {
		r, err := read()
		var frame bytes.Buffer
		switch {
		case asJSON && err == nil:
			printJSON(&frame, r.raw)
		case asJSON:
			b, _ := json.Marshal(map[string]string{"error": err.Error(), "at": time.Now().UTC().Format(time.RFC3339)})
			frame.Write(append(b, '\n'))
		default:
			fmt.Fprintf(&frame, "plait status --watch  %s  (every %s; Ctrl-C stops)\n", time.Now().Format("15:04:05"), interval)
			if err != nil {
				fmt.Fprintf(&frame, "\nplait status: %s\n", err)
			} else {
				printStatus(&frame, r.doc)
			}
		}
		switch {
		case terminal && !asJSON:
			fmt.Fprint(w, cursorHome, frame.String(), clearBelow)
		case !asJSON && !first:
			fmt.Fprint(w, "\n", frame.String())
		default:
			fmt.Fprint(w, frame.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// printJSON prints the status document as the node sent it, on one line: the node writes
// it compact, and a document of a newer node keeps every field this build does not know.
func printJSON(w io.Writer, raw []byte) {
	var line bytes.Buffer
	if json.Compact(&line, raw) != nil { // it decoded, so it compacts: never taken
		line.Write(bytes.TrimSpace(raw))
	}
	fmt.Fprintf(w, "%s\n", line.Bytes())
}

// isTerminal reports whether w is a terminal (for --watch's redraw in place).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func printStatus(w io.Writer, d httpapi.StatusDoc) {
	refusing := ""
	if why := writesRefused(d); len(why) > 0 {
		refusing = "  WRITES REFUSED: " + strings.Join(why, ", ")
	}
	fmt.Fprintf(w, "node %s  origin %s  protocol %d..%d  authenticated %v%s\n", d.Node.Name, d.Node.Origin,
		d.Node.Protocol.Min, d.Node.Protocol.Max, d.Node.Authenticated, refusing)
	if s := d.Node.Storage; s.State == "degraded" {
		fmt.Fprintf(w, "storage DEGRADED %s since %s  retries %d: %s (replication paused; the node retries by itself, docs/operations.md §11)\n",
			s.Code, s.Since, s.Retries, s.Message)
	}
	if rw := d.Node.Rewound; rw != nil {
		fmt.Fprintf(w, "origin REWOUND: peer %s holds seq %d of this node's origin (%s, %s); this node's log ends at seq %d: stop it and run plait reseed\n",
			rw.Peer, rw.Seq, rw.How, rw.At, rw.OwnSeq)
	}
	if c := d.Node.Clock; c.OffsetMs != nil {
		fmt.Fprintf(w, "clock %+.1f ms from %d measured peers (%d beyond the bound)  bound %d ms  refusing writes %v\n",
			*c.OffsetMs, c.MeasuredPeers, c.OffPeers, c.BoundMs, c.RefusingWrites)
	} else {
		fmt.Fprintf(w, "clock not measured  bound %d ms\n", c.BoundMs)
	}
	if tl := d.Node.TLS; tl != nil {
		fmt.Fprintf(w, "tls %s  certificate %s  expires %s  plaintext too %v  reloads %d (%d refused)\n", tl.NodeName, tl.Subject,
			tl.Expiry, tl.AcceptPlaintext, tl.Reloads, tl.ReloadFailures)
		if tl.LastReloadError != "" {
			fmt.Fprintf(w, "tls reload refused: %s\n", tl.LastReloadError)
		}
	} else {
		fmt.Fprintln(w, "tls off")
	}
	fmt.Fprintln(w, mapLine(d.ClusterMap))
	if l := placementLine(d.ClusterMap); l != "" {
		fmt.Fprintln(w, l)
	}
	if l := locksLine(d.Locks); l != "" {
		fmt.Fprintln(w, l)
	}
	if l := feedsLine(d.Feeds); l != "" {
		fmt.Fprintln(w, l)
	}
	for _, f := range d.NamedFeeds {
		fmt.Fprintln(w, namedFeedLine(f))
	}
	if h := d.Hub; h != nil {
		fmt.Fprintln(w, hubLine(*h))
	}
	if l := d.Leaves; l != nil {
		fmt.Fprintln(w, leavesLine(*l))
	}
	fmt.Fprintln(w)
	t := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(t, "ORIGIN\tHEALTH\tAPPLIED\tHEAD\tLAG\tLAG MS\tSOURCE\tCHANGES\tDIVERGED\tFLOOR\tLOG BYTES\tSTUCK")
	for _, o := range d.Origins {
		stuck := "-"
		if o.Stuck != nil {
			stuck = *o.Stuck
			if o.StuckUntil != nil {
				stuck += " until " + *o.StuckUntil
			}
		}
		fmt.Fprintf(t, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t%v\t%d\t%d\t%s\n", o.Name, dash(string(o.Health)), o.AppliedSeq, o.HeadSeq, o.LagSeq, o.LagMs,
			dash(o.SourcePeer), o.SourceChanges, o.Diverged, o.FloorSeq, o.LogBytes, stuck)
	}
	t.Flush()
	fmt.Fprintln(w)
	t = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(t, "PEER\tURL\tSTATE\tHEALTH\tBEHIND\tCONNECTED\tVERSION\tRTT MS\tCLOCK MS\tRECONNECTS\tHOLDS BACK\tLAST ERROR\tLAST DIAL ERROR")
	for _, p := range d.Peers {
		last, lastDial := "-", "-"
		if p.LastError != nil {
			last = p.LastError.Code + ": " + p.LastError.Message
		}
		if e := p.LastDialError; e != nil {
			lastDial = e.Code + ": " + e.Message
		}
		clock := "-" // a peer that sends no time (protocol versions 1 and 2)
		if p.ClockOffsetMs != nil {
			clock = fmt.Sprintf("%+.1f", *p.ClockOffsetMs)
		}
		behind := "-" // a peer that never subscribed to this node's origin
		if p.LagSeq != nil {
			behind = fmt.Sprint(*p.LagSeq)
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%v\t%d\t%.1f\t%s\t%d\t%d B\t%s\t%s\n", p.Name, dash(p.URL), p.State, dash(string(p.Health)), behind, p.Connected, p.Version, p.RTTMs,
			clock, p.Reconnects, p.RetentionHeldBytes, last, lastDial)
	}
	t.Flush()
	fmt.Fprintln(w)
	copies := false
	for _, p := range d.Peers {
		if c := p.Copy; c != nil {
			if !copies {
				t = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(t, "COPY WITH	STATE	TABLES	RECORDS	BYTES	RATE	ETA	RESUMES")
				copies = true
			}
			eta := "-"
			if c.ETASeconds > 0 {
				eta = (time.Duration(c.ETASeconds) * time.Second).String()
			}
			fmt.Fprintf(t, "%s\t%s\t%d done of %s\t%d of %s\t%d\t%.0f B/s\t%s\t%d\n", p.Name, c.State, c.TablesDone, unknown(c.Tables),
				c.Records, unknown(c.TotalRecords), c.Bytes, c.Rate, eta, c.Resumes)
		}
	}
	if copies {
		t.Flush()
		fmt.Fprintln(w)
	}
	if len(d.Refusals) > 0 {
		t = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(t, "REFUSED AT\tREMOTE\tPEER\tCODE\tMESSAGE")
		for _, r := range d.Refusals {
			fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\n", r.At, r.Remote, dash(r.Peer), r.Code, r.Message)
		}
		t.Flush()
		fmt.Fprintln(w)
	}
	for _, c := range d.Counters.List() {
		fmt.Fprintf(w, "%s %d\n", c.Name, c.Value)
	}
}

// mapLine is plait status's line of the cluster map (docs/contract.md §12, §22.4).
func mapLine(m httpapi.ClusterMapDoc) string {
	if m.Generation == 0 {
		return "map none"
	}
	line := fmt.Sprintf("map generation %d  publisher %s  applied %s  members ", m.Generation, dash(m.Publisher), dash(m.AppliedAt))
	if len(m.Members) == 0 {
		line += "not listed"
	} else {
		below := "-"
		if len(m.MembersBelowV4) > 0 {
			below = strings.Join(m.MembersBelowV4, ", ")
		}
		line += fmt.Sprintf("%d  below version 4: %s", len(m.Members), below)
	}
	if c := m.Conflict; c != nil {
		line += fmt.Sprintf("  CONFLICT: another map of generation %d, published on %s; publish generation %d to end it",
			c.Generation, c.Publisher, c.Generation+1)
	}
	return line
}

// placementLine is plait status's line of the map's placement (docs/contract.md §12,
// §23): each placed table with its carriers, "*" after the table this node carries, then
// what it fills and what it waits to remove; "" when no table is placed.
func placementLine(m httpapi.ClusterMapDoc) string {
	if len(m.Placement) == 0 {
		return ""
	}
	carried := map[string]bool{}
	if m.Carried != nil {
		for _, t := range *m.Carried {
			carried[t] = true
		}
	}
	parts := []string{}
	for _, t := range slices.Sorted(maps.Keys(m.Placement)) {
		mark := ""
		if carried[t] {
			mark = "*"
		}
		parts = append(parts, t+mark+" on "+strings.Join(m.Placement[t], ","))
	}
	line := "placement " + strings.Join(parts, "  ")
	if len(m.Filling) > 0 {
		line += "  filling " + strings.Join(m.Filling, ",")
	}
	for _, rm := range m.Removals {
		line += "  removing " + rm.Table + " (waiting for " + strings.Join(rm.WaitingFor, ",") + ")"
	}
	return line
}

// locksLine is plait status's line of the node's locks (docs/contract.md §8.9, §12): as a
// home, whether it is one (OFF and why while the map names it one it cannot be), its
// leases, grants, waiting requests and refusals by code; as a caller, the leases it holds
// and its refusals by code. "" for a node whose status has no locks object (one that
// predates locks): a node that has one always writes both refused objects, {} when empty.
func locksLine(l httpapi.LocksDoc) string {
	if l.Refused == nil && l.Caller.Refused == nil {
		return ""
	}
	home := "no"
	switch {
	case l.Home:
		home = "yes"
	case l.HomeError != nil:
		home = "OFF (" + *l.HomeError + ")"
	}
	return fmt.Sprintf("locks home %s  leases %d  granted %d  waiting %d  refused %s  held %d  caller refused %s",
		home, l.Leases, l.Granted, l.Waiting, codeCounts(l.Refused), l.Held, codeCounts(l.Caller.Refused))
}

// feedsLine is plait status's line of the node's change feeds (docs/contract.md §24.7,
// §12): open now, opened, events and bytes sent, closes by reason, refusals by code. ""
// for a node whose status has no feeds object (one that predates feeds): a node that has
// one always writes both objects, {} when empty.
func feedsLine(f httpapi.FeedsDoc) string {
	if f.Closed == nil && f.Refused == nil {
		return ""
	}
	return fmt.Sprintf("feeds open %d  opened %d  events %d  bytes %d  closed %s  refused %s",
		f.Open, f.Opened, f.Events, f.Bytes, codeCounts(f.Closed), codeCounts(f.Refused))
}

// namedFeedLine is plait status's line of one named feed (docs/contract.md §24.7, §12):
// its table, how far behind its acknowledged position is, what it holds against its cap,
// and LAPSED while its hold is.
func namedFeedLine(f httpapi.NamedFeedDoc) string {
	l := fmt.Sprintf("named feed %s  table %s  behind %d entries %d B  holds %d B of %d B", f.Name, f.Table, f.LagEntries, f.LagBytes, f.HeldBytes, f.HoldBytes)
	if f.Lapsed {
		l += "  LAPSED: retention purges past its position"
	}
	return l
}

// hubLine is plait status's line of a leaf's hub (docs/contract.md §26.6, §12): whether
// the link is up, what the hub re-originated of this leaf's writes and the hub's entry
// carrying it, what the core has (the write checkpoint), the horizon, and the writes the
// hub refused.
func hubLine(h httpapi.HubDoc) string {
	horizon := "-"
	if h.Horizon != nil {
		horizon = *h.Horizon
	}
	l := fmt.Sprintf("hub %s  connected %v  re-originated %d (hub seq %d)  in the core %d  horizon %s  refused %d",
		h.Name, h.Connected, h.ReoriginatedSeq, h.HubSeq, h.CoreSeq, horizon, h.Refused)
	if h.LastRefusedSeq > 0 {
		l += fmt.Sprintf(" (last seq %d: %s; a base copy from the hub brings this leaf back in line)", h.LastRefusedSeq, h.LastRefusedReason)
	}
	return l
}

// leavesLine is plait status's line of a hub's leaves (docs/contract.md §26.6, §12): how
// many are connected of the most it takes, its marks, the held channels, the leaves by
// lag band and the slowest ones.
func leavesLine(l httpapi.LeavesDoc) string {
	line := fmt.Sprintf("leaves %d of %d  marks %d  held %d  lag", l.Connected, l.Max, l.Marks, l.Held)
	for _, b := range l.Lag {
		if b.LeMs != nil {
			line += fmt.Sprintf(" <=%dms %d", *b.LeMs, b.Leaves)
		} else {
			line += fmt.Sprintf(" more %d", b.Leaves)
		}
	}
	var slow []string
	for _, s := range l.Slowest {
		slow = append(slow, fmt.Sprintf("%s (seq %d, %d ms)", s.Name, s.Seq, s.BehindMs))
	}
	if len(slow) == 0 {
		slow = []string{"-"}
	}
	return line + "  slowest " + strings.Join(slow, ", ")
}

// codeCounts prints refusals by code as CODE=N,..., sorted by code; "-" when none.
func codeCounts(m map[string]uint64) string {
	if len(m) == 0 {
		return "-"
	}
	parts := []string{}
	for _, c := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", c, m[c]))
	}
	return strings.Join(parts, ",")
}

// unknown prints a total, "?" when the sender could not say.
func unknown(n uint64) string {
	if n == 0 {
		return "?"
	}
	return fmt.Sprint(n)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
