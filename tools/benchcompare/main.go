package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	baseName := flag.String("name", "BASE", "the base build's name in the table's heading")
	baseFiles := flag.String("base", "", "the base build's plait bench outputs, comma-separated, in round order")
	headFiles := flag.String("head", "", "HEAD's plait bench outputs, comma-separated, in round order")
	flag.Parse()
	read := func(list string) []table {
		var ts []table
		for _, f := range strings.Split(list, ",") {
			r, err := os.Open(f)
			if err != nil {
				fmt.Fprintln(os.Stderr, "benchcompare:", err)
				os.Exit(1)
			}
			t, err := parse(r)
			r.Close()
			if err != nil || len(t) == 0 {
				fmt.Fprintf(os.Stderr, "benchcompare: %s holds no plait bench table (%v)\n", f, err)
				os.Exit(1)
			}
			ts = append(ts, t)
		}
		return ts
	}
	if *baseFiles == "" || *headFiles == "" {
		fmt.Fprintln(os.Stderr, "usage: benchcompare [-name BASE] -base a1,a2,... -head b1,b2,...")
		os.Exit(2)
	}
	compare(os.Stdout, *baseName, read(*baseFiles), read(*headFiles))
}
