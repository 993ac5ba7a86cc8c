package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	"plait/shells/native/httpapi"
)

// status is plait status: /v1/status of a node as readable tables.
func status(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plait status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http", "127.0.0.1:7401", "the node's HTTP API")
	if !parseFlags(fs, args) {
		return 2
	}
	doc, err := httpapi.ReadStatus(&http.Client{Timeout: 10 * time.Second}, *addr)
	if err != nil {
		fmt.Fprintln(stderr, "plait status:", err)
		return 1
	}
	printStatus(stdout, doc)
	return 0
}

func printStatus(w io.Writer, d httpapi.StatusDoc) {
	fmt.Fprintf(w, "node %s  origin %s  protocol %d..%d  authenticated %v\n", d.Node.Name, d.Node.Origin,
		d.Node.Protocol.Min, d.Node.Protocol.Max, d.Node.Authenticated)
	if tl := d.Node.TLS; tl != nil {
		fmt.Fprintf(w, "tls %s  certificate %s  expires %s  plaintext too %v  reloads %d (%d refused)\n", tl.NodeName, tl.Subject,
			tl.Expiry, tl.AcceptPlaintext, tl.Reloads, tl.ReloadFailures)
		if tl.LastReloadError != "" {
			fmt.Fprintf(w, "tls reload refused: %s\n", tl.LastReloadError)
		}
	} else {
		fmt.Fprintln(w, "tls off")
	}
	fmt.Fprintln(w)
	t := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(t, "ORIGIN\tAPPLIED\tHEAD\tLAG\tLAG MS\tSOURCE\tCHANGES\tDIVERGED\tFLOOR\tLOG BYTES")
	for _, o := range d.Origins {
		fmt.Fprintf(t, "%s\t%d\t%d\t%d\t%d\t%s\t%d\t%v\t%d\t%d\n", o.Name, o.AppliedSeq, o.HeadSeq, o.LagSeq, o.LagMs,
			dash(o.SourcePeer), o.SourceChanges, o.Diverged, o.FloorSeq, o.LogBytes)
	}
	t.Flush()
	fmt.Fprintln(w)
	t = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(t, "PEER\tURL\tSTATE\tCONNECTED\tVERSION\tRTT MS\tRECONNECTS\tHOLDS BACK\tLAST ERROR")
	for _, p := range d.Peers {
		last := "-"
		if p.LastError != nil {
			last = p.LastError.Code + ": " + p.LastError.Message
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%v\t%d\t%.1f\t%d\t%d B\t%s\n", p.Name, dash(p.URL), p.State, p.Connected, p.Version, p.RTTMs,
			p.Reconnects, p.RetentionHeldBytes, last)
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
