package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"plait/client"
)

// lockUsage is plait lock's usage line, for a missing or unknown subcommand.
const lockUsage = "usage: plait lock acquire|renew|release TABLE KEY [--ttl D] [--wait D] [--token T] [flags]"

// lockCommand is plait lock acquire|renew|release: a lock of a key, through a node's API
// (docs/contract.md §22.9). acquire prints the token on a line of its own, then how long
// this node takes writes under it; renew prints the latter; release prints nothing. Exit 0
// on success; 1 when the node refuses or cannot be reached (the error, with its code, on
// stderr); 2 for a bad command line.
func lockCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "acquire" && args[0] != "renew" && args[0] != "release") {
		fmt.Fprintln(stderr, lockUsage)
		return 2
	}
	cmd := "plait lock " + args[0]
	fs := newFlags(cmd, stderr)
	var c lockFlags
	bind(fs, c.settings())
	positional, ok := parseFlagsN(fs, args[1:], "TABLE", "KEY")
	if !ok {
		return 2
	}
	if args[0] != "acquire" && c.token == "" {
		fmt.Fprintf(stderr, "%s: --token is required (the token plait lock acquire printed)\n", cmd)
		return 2
	}
	if args[0] == "acquire" && c.token != "" {
		fmt.Fprintf(stderr, "%s: --token is for renew and release\n", cmd)
		return 2
	}
	api, ok := c.connect(cmd, stderr)
	if !ok {
		return 2
	}
	ctx, table, key := context.Background(), positional[0], []byte(positional[1])
	var err error
	switch args[0] {
	case "acquire":
		var lease client.Lease
		if lease, err = api.c.AcquireLock(ctx, table, key, c.ttl, c.wait); err == nil {
			fmt.Fprintf(stdout, "%s\nexpires in %v\n", lease.Token, lease.ExpiresIn)
		}
	case "renew":
		var left time.Duration
		if left, err = api.c.RenewLock(ctx, table, key, c.token, c.ttl); err == nil {
			fmt.Fprintf(stdout, "expires in %v\n", left)
		}
	case "release":
		err = api.c.ReleaseLock(ctx, table, key, c.token)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", cmd, apiMessage(err))
		return 1
	}
	return 0
}

// lockFlags are plait lock's flags: the API's, and the lease's.
type lockFlags struct {
	apiFlags
	ttl, wait time.Duration
	token     string
}

// settings is plait lock's table of flags, held to the contract's by TestFlagsInContract.
func (c *lockFlags) settings() []setting {
	return append(c.apiFlags.settings(),
		dur("ttl", &c.ttl, 30*time.Second, 0, positive, "the lease's length (acquire, renew): at most the home's --lock-max-ttl"),
		dur("wait", &c.wait, 0, 0, nonNegative, "how long an acquire may wait for a held key (at most the home's --lock-max-wait)"),
		str("token", "T", &c.token, "", nil, "the lease's token, as acquire printed it (renew, release)"))
}
