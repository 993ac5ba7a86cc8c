package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"time"
)

// A setting is one flag of a command: its name, the field of the configuration it sets
// (through value, which parses a value given, checks it by the flag's own rule and stores
// it), and one line of help. A command's table of settings is the one place each of its
// flags is declared: its flag set and -h come from it, its defaults are the fields' values
// when the table is made, and a test holds it against the contract's flag table.
type setting struct {
	name  string
	arg   string // what the value is, as the usage and the contract write it (NAME, D, FILE); "" for a boolean
	value flag.Value
	help  string
}

// bind defines every setting of table on fs, each with its argument's name for the usage.
func bind(fs *flag.FlagSet, table []setting) {
	for _, s := range table {
		fs.Var(argValue{s.value, s.arg}, s.name, s.help)
	}
}

// argValue is a setting's value with the name of its argument, which printUsage shows.
type argValue struct {
	flag.Value
	arg string
}

func (v argValue) Arg() string { return v.arg }

// IsBoolFlag passes a boolean value's nature on: given alone, the flag is true.
func (v argValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// A rule checks a value given on the command line; its error says what is wrong, and the
// flag package adds the flag's name and the value.
type rule[T any] func(T) error

// number is what numValue parses.
type number interface{ ~int | ~int64 | ~uint64 }

// numValue is an integer flag. zero is what a 0 given on the command line stands for in
// the field: the CLI writes "none" or "at once" as 0, where the replica, whose zero value
// means its default, writes -1.
type numValue[T number] struct {
	p    *T
	zero T
	ok   rule[T]
}

func num[T number](name, arg string, p *T, def, zero T, ok rule[T], help string) setting {
	*p = def
	return setting{name, arg, numValue[T]{p, zero, ok}, help}
}

func (v numValue[T]) String() string {
	if v.p == nil {
		return ""
	}
	n := *v.p
	if v.zero != 0 && n == v.zero {
		n = 0
	}
	return fmt.Sprint(n)
}

func (v numValue[T]) Set(s string) error {
	var n T
	switch any(n).(type) {
	case uint64:
		u, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return errors.New("not a non-negative integer")
		}
		n = T(u)
	default:
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil || int64(T(i)) != i {
			return errors.New("not an integer")
		}
		n = T(i)
	}
	if v.ok != nil {
		if err := v.ok(n); err != nil {
			return err
		}
	}
	if n == 0 && v.zero != 0 {
		n = v.zero
	}
	*v.p = n
	return nil
}

// durValue is a duration flag; zero as numValue's.
type durValue struct {
	p    *time.Duration
	zero time.Duration
	ok   rule[time.Duration]
}

func dur(name string, p *time.Duration, def, zero time.Duration, ok rule[time.Duration], help string) setting {
	*p = def
	return setting{name, "D", durValue{p, zero, ok}, help}
}

func (v durValue) String() string {
	if v.p == nil {
		return ""
	}
	d := *v.p
	if v.zero != 0 && d == v.zero {
		d = 0
	}
	return d.String()
}

func (v durValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (500ms, 2s, 1m, 72h)")
	}
	if v.ok != nil {
		if err := v.ok(d); err != nil {
			return err
		}
	}
	if d == 0 && v.zero != 0 {
		d = v.zero
	}
	*v.p = d
	return nil
}

// floatValue is a number flag with a fraction (a ratio).
type floatValue struct {
	p  *float64
	ok rule[float64]
}

func float(name, arg string, p *float64, def float64, ok rule[float64], help string) setting {
	*p = def
	return setting{name, arg, floatValue{p, ok}, help}
}

func (v floatValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.FormatFloat(*v.p, 'g', -1, 64)
}

func (v floatValue) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return errors.New("not a number")
	}
	if v.ok != nil {
		if err := v.ok(f); err != nil {
			return err
		}
	}
	*v.p = f
	return nil
}

// strValue is a string flag, of any string type (a mode, a path, an address).
type strValue[T ~string] struct {
	p  *T
	ok rule[T]
}

func str[T ~string](name, arg string, p *T, def T, ok rule[T], help string) setting {
	*p = def
	return setting{name, arg, strValue[T]{p, ok}, help}
}

func (v strValue[T]) String() string {
	if v.p == nil {
		return ""
	}
	return string(*v.p)
}

func (v strValue[T]) Set(s string) error {
	if v.ok != nil {
		if err := v.ok(T(s)); err != nil {
			return err
		}
	}
	*v.p = T(s)
	return nil
}

// bytesValue is a flag whose field holds bytes: the cluster secret, which it never shows
// (String is what the flag package prints, as a default or otherwise).
type bytesValue struct{ p *[]byte }

func (v bytesValue) String() string { return "" }

func (v bytesValue) Set(s string) error { *v.p = []byte(s); return nil }

// boolValue is a boolean flag: given alone, it is true.
type boolValue struct{ p *bool }

func boolean(name string, p *bool, help string) setting {
	*p = false
	return setting{name, "", boolValue{p}, help}
}

func (v boolValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.FormatBool(*v.p)
}

func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("not true or false")
	}
	*v.p = b
	return nil
}

func (boolValue) IsBoolFlag() bool { return true }

// The rules the settings share.

func positive[T number | time.Duration](v T) error {
	if v <= 0 {
		return errors.New("not positive")
	}
	return nil
}

func nonNegative[T number | time.Duration](v T) error {
	if v < 0 {
		return errors.New("negative")
	}
	return nil
}

func atLeast[T number](min T) rule[T] {
	return func(v T) error {
		if v < min {
			return fmt.Errorf("below %d", min)
		}
		return nil
	}
}

func between[T number](lo, hi T) rule[T] {
	return func(v T) error {
		if v < lo || v > hi {
			return fmt.Errorf("outside %d..%d", lo, hi)
		}
		return nil
	}
}

// durBetween: a duration from lo to hi.
func durBetween(lo, hi time.Duration) rule[time.Duration] {
	return func(v time.Duration) error {
		if v < lo || v > hi {
			return fmt.Errorf("outside %v..%v", lo, hi)
		}
		return nil
	}
}

// floatAbove: a number above lo and at most hi.
func floatAbove(lo, hi float64) rule[float64] {
	return func(v float64) error {
		if !(v > lo && v <= hi) {
			return fmt.Errorf("not above %g and at most %g", lo, hi)
		}
		return nil
	}
}

// zeroOrAtLeast: 0 (the default) or a value of at least min.
func zeroOrAtLeast[T number](min T) rule[T] {
	return func(v T) error {
		if v != 0 && v < min {
			return fmt.Errorf("neither 0 nor at least %d", min)
		}
		return nil
	}
}

// oneOf: one of the values given.
func oneOf[T ~string](values ...T) rule[T] {
	return func(v T) error {
		for _, w := range values {
			if v == w {
				return nil
			}
		}
		return fmt.Errorf("not one of %v", values)
	}
}
