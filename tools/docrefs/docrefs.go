package docrefs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Failure is one reference that does not resolve.
type Failure struct {
	File string // slash-separated, relative to the repository root
	Line int
	Ref  string // the reference as written
	Why  string
}

func (f Failure) String() string { return fmt.Sprintf("%s:%d: %s: %s", f.File, f.Line, f.Ref, f.Why) }

// sect is the section sign.
const sect = "\u00a7"

// The patterns are assembled from pieces so that this file states them without matching
// them itself.
var (
	// mdName is a mention of a Markdown file: a path-like token ending in .md.
	mdName = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]+\.` + `md`)
	// section is a Markdown file name, the section sign and a section number.
	section = regexp.MustCompile(`([A-Za-z0-9_./-]*[A-Za-z0-9_-]+\.` + `md)\s?` + sect + `\s?([0-9]+(?:\.[0-9]+)*)`)
	// linkSection is a Markdown link to a Markdown file, with or without an anchor,
	// followed by the section sign and a section number.
	linkSection = regexp.MustCompile(`\]\(([^()\s#]+\.` + `md)(?:#[^()\s]*)?\)\s?` + "\u00a7" + `\s?([0-9]+(?:\.[0-9]+)*)`)
	// issueNumber is a mention of an issue by its number.
	issueNumber = regexp.MustCompile(`(?i)\bissue` + `s? #?[0-9]+\b`)
	// link is a Markdown inline link or image: [text](target) or [text](target "title").
	link = regexp.MustCompile(`\[[^\]]*\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	// scheme starts an absolute URL (https:, mailto:, ...).
	scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// codeSpan is Markdown inline code, which holds no link.
	codeSpan = regexp.MustCompile("`+[^`]*`+")
)

// Root returns the module root: the nearest directory at or above dir that holds go.mod.
func Root(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("docrefs: no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// Scanned reports whether the file at rel (slash-separated, relative to the root) is one
// the check reads: .go, .md and .sh files, Makefiles and .ci/run.
func Scanned(rel string) bool {
	switch {
	case rel == ".ci/run", path.Base(rel) == "Makefile":
		return true
	}
	switch path.Ext(rel) {
	case ".go", ".md", ".sh":
		return true
	}
	return false
}

// skippedDir reports whether a directory is left out of the walk: node_modules holds other
// projects' packages (the status page's, installed from its lockfile), not this one's.
func skippedDir(name string) bool {
	return name == ".git" || name == "build" || name == "testdata" || name == "node_modules"
}

// Check walks the repository at root and returns every failure, by file and line.
func Check(root string) ([]Failure, error) {
	c := NewChecker(root)
	var out []Failure
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && skippedDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !Scanned(rel) {
			return nil
		}
		content, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out = append(out, c.CheckFile(rel, content)...)
		return nil
	})
	return out, err
}

// Checker checks files of one repository; it reads each referenced file's headings once.
type Checker struct {
	root     string
	headings map[string][]string // by slash path relative to the root
}

// NewChecker returns a checker of the repository at root.
func NewChecker(root string) *Checker {
	return &Checker{root: root, headings: map[string][]string{}}
}

// binary reports whether content looks like a binary file (a NUL byte near the start).
func binary(content []byte) bool {
	return bytes.IndexByte(content[:min(len(content), 8000)], 0) >= 0
}

// CheckFile checks the content of the file at rel (slash-separated, relative to the root).
func (c *Checker) CheckFile(rel string, content []byte) []Failure {
	if binary(content) || strings.HasSuffix(rel, ".wasm") {
		return nil
	}
	dir := path.Dir(rel)
	markdown := path.Ext(rel) == ".md"
	var out []Failure
	fail := func(line int, ref, why string) {
		out = append(out, Failure{File: rel, Line: line, Ref: ref, Why: why})
	}
	fenced := false
	for i, line := range strings.Split(string(content), "\n") {
		n := i + 1
		var linkSpans [][2]int // where links are, so a mention in one is not checked twice
		if markdown {
			if fence(line) {
				fenced = !fenced
			} else if !fenced {
				for _, m := range link.FindAllStringSubmatchIndex(codeSpan.ReplaceAllStringFunc(line, blank), -1) {
					target := line[m[2]:m[3]]
					linkSpans = append(linkSpans, [2]int{m[0], m[1]})
					if why := c.checkLink(dir, target); why != "" {
						fail(n, target, why)
					}
				}
			}
		}
		for _, m := range mdName.FindAllStringIndex(line, -1) {
			ref := line[m[0]:m[1]]
			if m[1] < len(line) && wordByte(line[m[1]]) || strings.HasPrefix(ref, "//") ||
				slices.ContainsFunc(linkSpans, func(s [2]int) bool { return m[0] >= s[0] && m[0] < s[1] }) {
				continue // longer than .md, part of a URL, or in a link checked above
			}
			if _, why := c.resolve(dir, ref); why != "" {
				fail(n, ref, why)
			}
		}
		for _, m := range section.FindAllStringSubmatch(line, -1) {
			if strings.HasPrefix(m[1], "//") {
				continue
			}
			file, why := c.resolve(dir, m[1])
			if why != "" {
				continue // reported as a mention
			}
			if !c.hasSection(file, m[2]) {
				fail(n, m[0], file+" has no heading that starts with "+m[2]+".")
			}
		}
		if markdown && !fenced {
			for _, m := range linkSection.FindAllStringSubmatch(line, -1) {
				if c.checkLink(dir, m[1]) != "" || scheme.MatchString(m[1]) {
					continue // reported as a link, or not in the repository
				}
				file := m[1]
				if strings.HasPrefix(file, "/") {
					file = path.Clean(strings.TrimPrefix(file, "/"))
				} else {
					file = path.Join(dir, file)
				}
				if !c.hasSection(file, m[2]) {
					fail(n, file+" "+sect+m[2], file+" has no heading that starts with "+m[2]+".")
				}
			}
		}
		for _, m := range issueNumber.FindAllString(line, -1) {
			fail(n, m, "an issue number: say what the work was instead")
		}
	}
	return out
}

func blank(s string) string { return strings.Repeat(" ", len(s)) }

func wordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// fence reports whether a Markdown line opens or closes a fenced code block.
func fence(line string) bool {
	t := strings.TrimLeft(line, " ")
	return len(line)-len(t) <= 3 && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"))
}

// checkLink checks a Markdown link target from a file in dir; it returns why it does not
// resolve, or "".
func (c *Checker) checkLink(dir, target string) string {
	if strings.HasPrefix(target, "#") || scheme.MatchString(target) {
		return ""
	}
	p, _, _ := strings.Cut(target, "#")
	p, _, _ = strings.Cut(p, "?")
	if p == "" {
		return ""
	}
	var full string
	if strings.HasPrefix(p, "/") {
		full = path.Clean(strings.TrimPrefix(p, "/"))
	} else {
		full = path.Join(dir, p)
	}
	if outside(full) {
		return "the link leaves the repository"
	}
	if !c.exists(full) {
		return "the link names no file or directory (" + full + ")"
	}
	return ""
}

// resolve finds the file a mention names from a file in dir: relative to dir or, unless
// it starts with ./ or ../, to one of dir's ancestors up to the root. It returns the
// file's slash path relative to the root, or why it does not resolve.
func (c *Checker) resolve(dir, ref string) (string, string) {
	if strings.HasPrefix(ref, "/") {
		p := path.Clean(strings.TrimPrefix(ref, "/"))
		if outside(p) || !c.exists(p) {
			return "", "names no file of the repository"
		}
		return p, ""
	}
	if strings.HasPrefix(ref, "./") || strings.HasPrefix(ref, "../") {
		p := path.Join(dir, ref)
		switch {
		case outside(p):
			return "", "leaves the repository"
		case !c.exists(p):
			return "", "no such file relative to " + dir
		}
		return p, ""
	}
	for d := dir; ; d = path.Dir(d) {
		if p := path.Join(d, ref); !outside(p) && c.exists(p) {
			return p, ""
		}
		if d == "." {
			break
		}
	}
	return "", "resolves neither from " + dir + " nor from a directory above it"
}

// outside reports whether a cleaned slash path relative to the root leaves the root.
func outside(p string) bool { return p == ".." || strings.HasPrefix(p, "../") }

func (c *Checker) exists(rel string) bool {
	_, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(rel)))
	return err == nil
}

// hasSection reports whether the Markdown file at rel has a heading whose text starts
// with the section number num: "3." for 3; for 3.2, "3.2" followed by a dot, a space or
// nothing (so 3.2 is not found in a heading 3.20).
func (c *Checker) hasSection(rel, num string) bool {
	hs, ok := c.headings[rel]
	if !ok {
		b, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(rel)))
		if err != nil {
			return false
		}
		hs = Headings(b)
		c.headings[rel] = hs
	}
	for _, h := range hs {
		rest, ok := strings.CutPrefix(h, num)
		switch {
		case !ok:
		case !strings.Contains(num, "."):
			if strings.HasPrefix(rest, ".") {
				return true
			}
		case rest == "" || rest[0] == ' ' || rest[0] == '.':
			return true
		}
	}
	return false
}

// Headings returns the text of every ATX heading of a Markdown document (# ... to
// ###### ...), outside fenced code blocks.
func Headings(md []byte) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(string(md), "\n") {
		if fence(line) {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		t := strings.TrimLeft(line, "#")
		if len(line)-len(t) > 6 || !strings.HasPrefix(t, " ") {
			continue
		}
		out = append(out, strings.TrimSpace(strings.TrimRight(strings.TrimSpace(t), "#")))
	}
	return out
}
