package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"plait/protocol/clustermap"
)

// mapUsage is plait map's usage line, for a missing or unknown subcommand.
const mapUsage = "usage: plait map get [--node NAME] [flags] | plait map set FILE|- [flags]"

// clusterMap is plait map get|set: a node's cluster map, or another node's through it,
// and publishing one (docs/contract.md §22.5). Exit 0 on success; 1 when the node refuses
// or cannot be reached (the error, with its code, on stderr); 2 for a bad command line.
func clusterMap(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "get" && args[0] != "set" {
		fmt.Fprintln(stderr, mapUsage)
		return 2
	}
	cmd := "plait map " + args[0]
	fs := newFlags(cmd, stderr)
	var c mapFlags
	var names []string
	if args[0] == "get" {
		bind(fs, c.getSettings())
	} else {
		bind(fs, c.apiFlags.settings())
		names = []string{"FILE (- reads standard input)"}
	}
	positional, ok := parseFlagsN(fs, args[1:], names...)
	if !ok {
		return 2
	}
	api, ok := c.connect(cmd, stderr)
	if !ok {
		return 2
	}
	var doc []byte
	var err error
	if args[0] == "get" {
		doc, err = api.c.ClusterMapOf(context.Background(), c.node)
	} else {
		body, rerr := readMapFile(positional[0], stdin)
		if rerr != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cmd, rerr)
			return 2
		}
		doc, err = api.c.PutClusterMap(context.Background(), body)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", cmd, apiMessage(err))
		return 1
	}
	var out bytes.Buffer
	if err := json.Indent(&out, bytes.TrimSpace(doc), "", "  "); err != nil {
		fmt.Fprintf(stderr, "%s: the node's answer is not JSON: %v\n", cmd, err)
		return 1
	}
	out.WriteByte('\n')
	_, _ = stdout.Write(out.Bytes())
	return 0
}

// mapFlags are plait map's flags: the API's, and get's --node.
type mapFlags struct {
	apiFlags
	node string
}

// getSettings is plait map get's table of flags, held to the contract's by
// TestFlagsInContract; plait map set's is the API flags alone.
func (c *mapFlags) getSettings() []setting {
	return append(c.apiFlags.settings(),
		str("node", "NAME", &c.node, "", validNodeName, "the map node NAME holds, asked through this node (default: this node's)"))
}

// readMapFile reads the document to publish, from FILE or, for "-", standard input: at
// most one byte over the map's bound, so that a document too large is sent as one (the
// node answers map-too-large) without being read whole.
func readMapFile(name string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	doc, err := io.ReadAll(io.LimitReader(r, clustermap.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return doc, nil
}
