package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/shells/native/rocksstore"
)

// check is plait check: an offline audit of a stopped node's data directory
// (store.AuditCarried, under the placement of the map it held). Exit 0 iff every check holds; 1 when one does not; 2 for bad flags or
// a directory that holds no store.
func check(args []string, stdout, stderr io.Writer) int {
	s, code := openStopped("plait check", args, stderr)
	if s == nil {
		return code
	}
	defer s.Close()
	// The store reads its identity, cursor vector and logs when it opens (an error there is
	// Open's); afterwards these answer from memory and do not fail.
	id, _ := s.Identity()
	// Under the placement of the map the node held, it stores no record of a table it does
	// not carry (docs/contract.md §23): those are not looked for.
	carried, err := replica.StoredCarries(s)
	if err != nil {
		fmt.Fprintln(stderr, "plait check:", err)
		return 1
	}
	problems, err := store.AuditCarried(s, 100, carried)
	if err != nil {
		fmt.Fprintln(stderr, "plait check:", err)
		return 1
	}
	vec, _ := s.Vector()
	logs, _ := s.Logs()
	held := uint64(0)
	for _, e := range vec.Entries() {
		held += e.Seq - logs[e.Origin].Floor.Seq
	}
	fmt.Fprintf(stdout, "node %s (origin %x): %d origins, %d log entries\n", id.Name, id.Origin[:], vec.Len(), held)
	for _, p := range problems {
		fmt.Fprintln(stdout, "PROBLEM:", p)
	}
	if len(problems) > 0 {
		return 1
	}
	fmt.Fprintln(stdout, "every check holds")
	return 0
}

// openStopped parses --data DIR for the command named cmd and opens the stopped node's store
// there; on failure it says why on stderr and returns the exit status (2: a bad command
// line, or no store there; 1: the store does not open, a running node's lock included).
func openStopped(cmd string, args []string, stderr io.Writer) (*rocksstore.Store, int) {
	fs := newFlags(cmd, stderr)
	dir := fs.String("data", "./plait-data", "the data directory of a stopped node")
	if !parseFlags(fs, args) {
		return nil, 2
	}
	if fi, err := os.Stat(*dir); err == nil && !fi.IsDir() {
		fmt.Fprintf(stderr, "%s: --data: %s is a file, not a directory\n", cmd, *dir)
		return nil, 2
	}
	if _, err := os.Stat(filepath.Join(*dir, "CURRENT")); err != nil {
		fmt.Fprintf(stderr, "%s: --data: %s holds no plait store\n", cmd, *dir)
		return nil, 2
	}
	s, err := rocksstore.Open(*dir, store.Identity{}, rocksstore.Options{})
	switch {
	case errors.Is(err, rocksstore.ErrInUse):
		fmt.Fprintf(stderr, "%s: --data: %v\n", cmd, err)
		return nil, 1
	case err != nil:
		fmt.Fprintln(stderr, cmd+":", err)
		return nil, 1
	}
	return s, 0
}
