package main

import (
	"strings"
	"testing"
)

func TestCheckFindsEveryKind(t *testing.T) {
	vs, err := checkFiles("testdata/dirty", []string{"dirty.go"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, v.What)
	}
	want := []string{"imports net/http", "imports os", "imports unsafe", "starts a goroutine",
		"reads the clock: time.Now", "reads the clock: time.Sleep"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestCheckAllowsTimeValues(t *testing.T) {
	vs, err := checkFiles("testdata/clean", []string{"clean.go"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 0 {
		t.Fatalf("violations in clean code: %v", vs)
	}
}
