package docrefs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepository checks every reference of this repository.
func TestRepository(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := Root(wd)
	if err != nil {
		t.Fatal(err)
	}
	failures, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range failures {
		t.Error(f)
	}
	if len(failures) > 0 {
		t.Logf("%d reference(s) do not resolve", len(failures))
	}
}

// The samples below are assembled from pieces, so that this file does not itself hold
// the references it shows failing.
const (
	md = ".m" + "d"
	// besideRepo is a folder beside the repository, spelled in pieces so that no search for
	// references out of the repository finds this file.
	besideRepo = ".." + "/shared/"
	issue      = "iss" + "ue"
)

// repo makes a small repository: a go.mod, a README, a design document with numbered
// headings (one of them inside a code block, which does not count), a spec under
// protocol/ and a few directories.
func repo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for rel, content := range map[string]string{
		"go.mod":                    "module example\n",
		"README" + md:               "# example\n",
		"docs/design" + md:          "# Design\n\n## 1. Layers\n\n### 9.3 The simulator\n\n```\n## 4. Not a heading\n```\n",
		"protocol/SPEC" + md:        "# Spec\n",
		"protocol/replica/doc.go":   "package replica\n",
		"shells/native/node/x.go":   "package node\n",
		"conformance/RELEASES" + md: "# Releases\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// check checks one file's content, as if it were at rel, in the repository of repo.
func check(t *testing.T, rel, content string) []Failure {
	t.Helper()
	return NewChecker(repo(t)).CheckFile(rel, []byte(content))
}

func expect(t *testing.T, got []Failure, refs ...string) {
	t.Helper()
	var have []string
	for _, f := range got {
		have = append(have, f.Ref)
	}
	if strings.Join(have, "|") != strings.Join(refs, "|") {
		t.Errorf("failures %v, want references %q", got, refs)
	}
}

func TestLinks(t *testing.T) {
	for _, c := range []struct {
		name, file, content string
		fails               []string
	}{
		{"to a file", "README" + md, "see [the design](docs/design" + md + ")", nil},
		{"to a file and an anchor", "README" + md, "[d](docs/design" + md + "#layers)", nil},
		{"to a directory", "README" + md, "[the replica](protocol/replica)", nil},
		{"up a level", "docs/design" + md, "[readme](../README" + md + ")", nil},
		{"from the root", "docs/design" + md, "[spec](/protocol/SPEC" + md + ")", nil},
		{"an image", "README" + md, "![spec](protocol/SPEC" + md + ")", nil},
		{"with a title", "README" + md, `[spec](protocol/SPEC` + md + ` "the spec")`, nil},
		{"absolute URLs and anchors", "README" + md, "[a](https://example.com/x" + md + ") [b](mailto:a@example.com) [c](#layers)", nil},
		{"in a code span", "README" + md, "`[a](missing" + md + ")` is how a link is written", []string{"missing" + md}},
		{"in a code block", "README" + md, "```\n[a](nowhere)\n```\n", nil},
		{"to a missing file", "README" + md, "[gone](docs/contract" + md + ")", []string{"docs/contract" + md}},
		{"reported once", "README" + md, "[gone" + md + "](gone" + md + ")", []string{"gone" + md}},
		{"to a missing directory", "README" + md, "[x](shells/native/absent)", []string{"shells/native/absent"}},
		{"relative to the file, not the root", "docs/design" + md, "[spec](protocol/SPEC" + md + ")", []string{"protocol/SPEC" + md}},
		{"out of the repository", "README" + md, "[shared](" + besideRepo + "DESIGN" + md + ")", []string{besideRepo + "DESIGN" + md}},
	} {
		t.Run(c.name, func(t *testing.T) { expect(t, check(t, c.file, c.content), c.fails...) })
	}
}

// TestLinksOnlyInMarkdown: a Go comment may hold brackets and parentheses; only the file
// mention in it is checked.
func TestLinksOnlyInMarkdown(t *testing.T) {
	expect(t, check(t, "protocol/replica/doc.go", "// a[i](x) and [b](nowhere)\n"))
}

func TestMentions(t *testing.T) {
	for _, c := range []struct {
		name, file, content string
		fails               []string
	}{
		{"beside the file", "protocol/replica/doc.go", "// see ../SPEC" + md, nil},
		{"from an ancestor", "protocol/replica/doc.go", "// the frames are SPEC" + md + "'s", nil},
		{"a path from the root", "scripts/freeze.sh", "# rows of conformance/RELEASES" + md + ".", nil},
		{"in a URL", "README" + md, "https://github.com/x/y/blob/main/CONTRACT" + md, nil},
		{"a longer extension", "README" + md, "a file.mdx and README" + md + "x", nil},
		{"two on a line", "shells/native/node/x.go", "// README" + md + ", SPEC" + md + " and protocol/SPEC" + md, []string{"SPEC" + md}},
		{"not above the file", "shells/native/node/x.go", "// CONTRACT" + md + "'s --sync", []string{"CONTRACT" + md}},
		{"not beside the file", "protocol/replica/doc.go", "// ./SPEC" + md, []string{"./SPEC" + md}},
		{"out of the repository", "scripts/deps.sh", "# (" + besideRepo + "TOOLCHAIN" + md + ")", []string{besideRepo + "TOOLCHAIN" + md}},
		{"far out of the repository", "protocol/replica/doc.go", "// ../../../x/README" + md, []string{"../../../x/README" + md}},
	} {
		t.Run(c.name, func(t *testing.T) { expect(t, check(t, c.file, c.content), c.fails...) })
	}
}

func TestSections(t *testing.T) {
	for _, c := range []struct {
		name, content string
		fails         []string
	}{
		{"a section", "// docs/design" + md + " " + sect + "1's list", nil},
		{"a subsection", "// docs/design" + md + " " + sect + "9.3", nil},
		{"a section with only subsections", "// docs/design" + md + " " + sect + "9", nil},
		{"no such section", "// docs/design" + md + " " + sect + "2", []string{"docs/design" + md + " " + sect + "2"}},
		{"a heading in a code block", "// docs/design" + md + " " + sect + "4", []string{"docs/design" + md + " " + sect + "4"}},
		{"no such subsection", "// docs/design" + md + " " + sect + "9.30", []string{"docs/design" + md + " " + sect + "9.30"}},
		{"a section of a missing file", "// DESIGN" + md + " " + sect + "5", []string{"DESIGN" + md}},
	} {
		t.Run(c.name, func(t *testing.T) { expect(t, check(t, "shells/native/node/x.go", c.content), c.fails...) })
	}
}

// TestLinkSections: in Markdown, a link to a document followed by a section number names
// a section of the linked file.
func TestLinkSections(t *testing.T) {
	for _, c := range []struct {
		name, file, content string
		fails               []string
	}{
		{"a section", "docs/contract" + md, "see [design](design" + md + ") " + sect + "1", nil},
		{"with an anchor", "README" + md, "[design](docs/design" + md + "#x) " + sect + "9.3", nil},
		{"no such section", "docs/contract" + md, "see [design](design" + md + ") " + sect + "7", []string{"docs/design" + md + " " + sect + "7"}},
		{"a missing file", "docs/contract" + md, "[ops](operations" + md + ") " + sect + "4", []string{"operations" + md}},
		{"in a code block", "docs/contract" + md, "```\n[design](design" + md + ") " + sect + "7\n```\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) { expect(t, check(t, c.file, c.content), c.fails...) })
	}
}

func TestIssueNumbers(t *testing.T) {
	for _, c := range []struct {
		name, content string
		fails         []string
	}{
		{"prose about issues", "// the " + issue + "s found so far; reissued 5 times; a tissue", nil},
		{"an issue", "// the node (" + issue + " 5)", []string{issue + " 5"}},
		{"with a hash", "// see " + strings.ToUpper(issue) + " #12", []string{strings.ToUpper(issue) + " #12"}},
		{"a range", "// " + issue + "s 2 to 6", []string{issue + "s 2"}},
	} {
		t.Run(c.name, func(t *testing.T) { expect(t, check(t, "shells/native/node/x.go", c.content), c.fails...) })
	}
}

func TestHeadings(t *testing.T) {
	got := Headings([]byte("# T\n##  2. Two ##\n####### seven\n#no\n```\n# code\n```\n### 2.1 Sub\n"))
	if want := "T|2. Two|2.1 Sub"; strings.Join(got, "|") != want {
		t.Errorf("headings %q, want %q", got, want)
	}
}

// TestWalk: the walk reads the scanned kinds of file and leaves out testdata, build and
// node_modules directories and binary files.
func TestWalk(t *testing.T) {
	root := repo(t)
	bad := "// CONTRACT" + md + "\n"
	for rel, content := range map[string]string{
		"a/x.go":                  bad,
		"a/x.sh":                  bad,
		"a/Makefile":              bad,
		".ci/run":                 bad,
		"a/x.txt":                 bad,
		"a/testdata/x.go":         bad,
		"build/x.go":              bad,
		"web/node_modules/x" + md: "[x](nowhere)\n",
		"a/bin.go":                "\x00" + bad,
		"docs/operations" + md:    "[x](nowhere)\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	failures, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range failures {
		got = append(got, f.File+":"+f.Ref)
	}
	want := ".ci/run:CONTRACT" + md + "|a/Makefile:CONTRACT" + md + "|a/x.go:CONTRACT" + md + "|a/x.sh:CONTRACT" + md + "|docs/operations" + md + ":nowhere"
	if strings.Join(got, "|") != want {
		t.Errorf("failures\n%s\nwant\n%s", strings.Join(got, "\n"), strings.ReplaceAll(want, "|", "\n"))
	}
}

func TestRoot(t *testing.T) {
	root := repo(t)
	got, err := Root(filepath.Join(root, "protocol", "replica"))
	if err != nil || got != root {
		t.Errorf("Root = %q, %v; want %q", got, err, root)
	}
}

func TestFailureString(t *testing.T) {
	f := Failure{File: "a/x.go", Line: 3, Ref: "CONTRACT" + md, Why: "resolves neither from a nor from a directory above it"}
	if got, want := f.String(), "a/x.go:3: CONTRACT"+md+": resolves neither from a nor from a directory above it"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
