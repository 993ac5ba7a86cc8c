package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
}

func main() {
	patterns := os.Args[1:]
	if len(patterns) == 0 {
		patterns = []string{"./protocol/..."}
	}
	pkgs, err := goList(patterns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "purity:", err)
		os.Exit(2)
	}
	bad := 0
	for _, p := range pkgs {
		files := append(append([]string(nil), p.GoFiles...), p.CgoFiles...)
		vs, err := checkFiles(p.Dir, files)
		if err != nil {
			fmt.Fprintln(os.Stderr, "purity:", err)
			os.Exit(2)
		}
		for _, v := range vs {
			fmt.Printf("%s: %s %s\n", v.Pos, p.ImportPath, v.What)
			bad++
		}
	}
	if bad > 0 {
		fmt.Printf("purity: %d violation(s) of docs/design.md §2\n", bad)
		os.Exit(1)
	}
	fmt.Printf("purity: %d package(s) clean\n", len(pkgs))
}

func goList(patterns []string) ([]listedPackage, error) {
	cmd := exec.Command("go", append([]string{"list", "-json"}, patterns...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("no packages match %v", patterns)
	}
	return pkgs, nil
}
