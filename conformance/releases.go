package conformance

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Release is one row of RELEASES.md.
type Release struct {
	Name     string // "0.1"
	MinProto uint64
	MaxProto uint64
	ABI      uint32
	Commit   string
	Go       string
	SHA256   string
}

// Path is the frozen module's path relative to the conformance directory.
func (r Release) Path() string { return filepath.Join("releases", r.Name, "core.wasm") }

var releaseRow = regexp.MustCompile("^\\| (\\d+\\.\\d+) \\| (\\d+)\\.\\.(\\d+) \\| (\\d+) \\| `([0-9a-f]{40})` \\| (go[0-9.]+) \\| `([0-9a-f]{64})` \\|$")

// ReadReleases parses the release table of RELEASES.md.
func ReadReleases(path string) ([]Release, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Release
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| release") {
			continue
		}
		m := releaseRow.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("%s:%d: not a release row: %q", path, n, line)
		}
		minP, _ := strconv.ParseUint(m[2], 10, 64)
		maxP, _ := strconv.ParseUint(m[3], 10, 64)
		abi, _ := strconv.ParseUint(m[4], 10, 32)
		out = append(out, Release{Name: m[1], MinProto: minP, MaxProto: maxP, ABI: uint32(abi), Commit: m[5], Go: m[6], SHA256: m[7]})
	}
	return out, sc.Err()
}
