package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"
)

// statusDoc is the part of /v1/status that plait status prints.
type statusDoc struct {
	Node struct {
		Name          string            `json:"name"`
		Origin        string            `json:"origin"`
		Protocol      map[string]uint64 `json:"protocol"`
		Authenticated bool              `json:"authenticated"`
	} `json:"node"`
	Origins []struct {
		Origin        string `json:"origin"`
		Name          string `json:"name"`
		AppliedSeq    uint64 `json:"applied_seq"`
		HeadSeq       uint64 `json:"head_seq"`
		LagSeq        uint64 `json:"lag_seq"`
		LagMs         uint64 `json:"lag_ms"`
		SourcePeer    string `json:"source_peer"`
		SourceChanges uint64 `json:"source_changes"`
		Diverged      bool   `json:"diverged"`
	} `json:"origins"`
	Peers []struct {
		Name       string  `json:"name"`
		URL        string  `json:"url"`
		State      string  `json:"state"`
		Connected  bool    `json:"connected"`
		Version    uint64  `json:"version"`
		RTTMs      float64 `json:"rtt_ms"`
		Reconnects uint64  `json:"reconnects"`
		LastError  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"last_error"`
	} `json:"peers"`
	Counters map[string]uint64 `json:"counters"`
}

// status is plait status: /v1/status of a node as readable tables.
func status(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plait status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http", "127.0.0.1:7401", "the node's HTTP API")
	if !parseFlags(fs, args) {
		return 2
	}
	doc, err := fetchStatus(*addr)
	if err != nil {
		fmt.Fprintln(stderr, "plait status:", err)
		return 1
	}
	printStatus(stdout, doc)
	return 0
}

// fetchStatus reads GET /v1/status of the node whose HTTP API is at addr.
func fetchStatus(addr string) (*statusDoc, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/v1/status")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	var doc statusDoc
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

func printStatus(w io.Writer, d *statusDoc) {
	fmt.Fprintf(w, "node %s  origin %s  protocol %d..%d  authenticated %v\n\n", d.Node.Name, d.Node.Origin,
		d.Node.Protocol["min"], d.Node.Protocol["max"], d.Node.Authenticated)
	t := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(t, "ORIGIN\tAPPLIED\tHEAD\tLAG\tLAG MS\tSOURCE\tCHANGES\tDIVERGED")
	for _, o := range d.Origins {
		fmt.Fprintf(t, "%s\t%d\t%d\t%d\t%d\t%s\t%d\t%v\n", o.Name, o.AppliedSeq, o.HeadSeq, o.LagSeq, o.LagMs,
			dash(o.SourcePeer), o.SourceChanges, o.Diverged)
	}
	t.Flush()
	fmt.Fprintln(w)
	t = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(t, "PEER\tURL\tSTATE\tCONNECTED\tVERSION\tRTT MS\tRECONNECTS\tLAST ERROR")
	for _, p := range d.Peers {
		last := "-"
		if p.LastError != nil {
			last = p.LastError.Code + ": " + p.LastError.Message
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%v\t%d\t%.1f\t%d\t%s\n", p.Name, dash(p.URL), p.State, p.Connected, p.Version, p.RTTMs, p.Reconnects, last)
	}
	t.Flush()
	fmt.Fprintln(w)
	for _, k := range []string{"txns_applied", "duplicates_received", "gaps_detected", "resends_requested", "protocol_errors", "divergences"} {
		fmt.Fprintf(w, "%s %d\n", k, d.Counters[k])
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
