package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
)

// newFlags is a command's flag set, writing to stderr. Its usage (-h) is printed by
// parseArgs only: a refused command line prints its error and one line pointing to -h,
// not the whole flag list between two copies of the error.
//
// A flag's default is printed in the usage, so no default may come from a variable that
// holds a secret (PLAIT_SECRET, PLAIT_TOKEN): those are read after parsing.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	return fs
}

// parseArgs parses args into fs. -h prints the command's flags on fs's output and returns
// flag.ErrHelp; any other refusal (a flag unknown or malformed, a positional argument) is
// returned, not printed.
func parseArgs(fs *flag.FlagSet, args []string) error {
	_, err := parseArgsN(fs, args)
	return err
}

// parseArgsN is parseArgs for a command of positional arguments, named by names (plait map
// set FILE): each may stand before, between or after the flags; one missing is refused
// by its name, and one more than names is refused too.
func parseArgsN(fs *flag.FlagSet, args []string, names ...string) ([]string, error) {
	out := fs.Output()
	fs.SetOutput(io.Discard) // the flag package prints its errors; the caller prints them once
	defer fs.SetOutput(out)
	var positional []string
	for {
		err := fs.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			printUsage(out, fs)
			return nil, err
		case err != nil:
			return nil, flagError(err)
		case fs.NArg() == 0 && len(positional) < len(names):
			return nil, fmt.Errorf("%s missing", names[len(positional)])
		case fs.NArg() == 0:
			return positional, nil
		case len(positional) == len(names):
			return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:] // the flag package stops at an argument: parse on after it
	}
}

// The flag package's refusals, which name a flag with one dash, and flagError's forms of
// them, which name it as the contract writes it: "--move-delay 0s: not positive".
var (
	invalidValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for flag -([a-z0-9-]+): (.*)$`)
	notDefined   = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	needsValue   = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
)

// flagError is a parse error of the flag package, said as the contract writes a flag.
func flagError(err error) error {
	msg := err.Error()
	if m := invalidValue.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("--%s %s: %s", m[2], m[1], m[3])
	}
	if m := notDefined.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("--%s: no such flag", m[1])
	}
	if m := needsValue.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("--%s: needs a value", m[1])
	}
	return err
}

// parseFlags parses a command's flags: false when the command line is refused, which it
// has then said on fs's output (refused), or when -h printed the flags.
func parseFlags(fs *flag.FlagSet, args []string) bool {
	_, ok := parseFlagsN(fs, args)
	return ok
}

// parseFlagsN is parseFlags for a command of positional arguments named by names, which
// it returns.
func parseFlagsN(fs *flag.FlagSet, args []string, names ...string) ([]string, bool) {
	positional, err := parseArgsN(fs, args, names...)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		refused(fs.Output(), fs.Name(), err)
	}
	return positional, err == nil
}

// refused prints a refused command line's error and where the flags are listed.
func refused(w io.Writer, cmd string, err error) {
	fmt.Fprintf(w, "%s: %v\nrun '%s -h' for its flags\n", cmd, err, cmd)
}

// given reports whether the flag name was set on the command line.
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// printUsage prints a command's flags as the contract writes them: --NAME ARG, its help,
// and its default when it has one.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s [flags]\n", fs.Name())
	fs.VisitAll(func(f *flag.Flag) {
		arg, help := flag.UnquoteUsage(f)
		if a, ok := f.Value.(interface{ Arg() string }); ok {
			arg = a.Arg()
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			arg = ""
		}
		line := "  --" + f.Name
		if arg != "" {
			line += " " + arg
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, help)
		if f.DefValue != "" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}
