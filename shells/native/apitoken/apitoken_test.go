package apitoken

import (
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	readTok  = "read-token-0123456789"
	writeTok = "write-token-0123456789"
	adminTok = "admin-token-0123456789"
)

const good = `# the CI reader
` + readTok + ` read

	` + writeTok + "\twrite" + `
   # an indented comment
` + adminTok + `   admin
`

func TestParseAndLookup(t *testing.T) {
	s, err := Parse(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3 {
		t.Fatalf("%d tokens, want 3", s.Len())
	}
	for _, c := range []struct {
		token string
		scope Scope
		ok    bool
	}{
		{readTok, Read, true},
		{writeTok, Write, true},
		{adminTok, Admin, true},
		{"", 0, false},
		{"read-token-012345678", 0, false},   // a prefix
		{"read-token-01234567890", 0, false}, // one byte more
		{"READ-TOKEN-0123456789", 0, false},  // tokens are case-sensitive
		{"read", 0, false},                   // a scope is not a token
	} {
		scope, ok := s.Lookup(c.token)
		if scope != c.scope || ok != c.ok {
			t.Errorf("Lookup(%q) = %v, %v; want %v, %v", c.token, scope, ok, c.scope, c.ok)
		}
	}
}

// TestLookupComparesEveryToken: a lookup compares the SHA-256 of the presented token with
// every token's, through subtle.ConstantTimeCompare, whether it matches the first, the last
// or none: the constant-time path is the only one.
func TestLookupComparesEveryToken(t *testing.T) {
	s, err := Parse(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	real := compare
	t.Cleanup(func() { compare = real })
	var calls int
	compare = func(x, y []byte) int {
		calls++
		if len(x) != sha256.Size || len(y) != sha256.Size {
			t.Errorf("compared %d and %d bytes, not two SHA-256 sums", len(x), len(y))
		}
		return real(x, y)
	}
	for _, tok := range []string{readTok, adminTok, "nothing like any token", "x", strings.Repeat("y", 5000)} {
		calls = 0
		s.Lookup(tok)
		if calls != s.Len() {
			t.Errorf("Lookup(%.20q) made %d comparisons, want one per token (%d)", tok, calls, s.Len())
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct {
		what, file string
		line       int
		why        string
	}{
		{"a short token", "# x\n" + readTok + " read\nshort-token-123 read\n", 3, "shorter than 16"},
		{"an unknown scope", readTok + " root\n", 1, `unknown scope "root"`},
		{"a scope in capitals", readTok + " READ\n", 1, "unknown scope"},
		{"a duplicate token", readTok + " read\n\n" + writeTok + " write\n" + readTok + " admin\n", 4, "the same token as line 1"},
		{"one field", readTok + "\n", 1, "1 fields, want 2"},
		{"a trailing comment", readTok + " read # the reader\n", 1, "5 fields, want 2"},
		{"three fields", readTok + " read write\n", 1, "3 fields, want 2"},
		{"a bad character", "token-with-a-colon:12345 read\n", 1, "a character outside"},
		{"= inside", "token=with-an-equals-sign read\n", 1, "a character outside"},
		{"only =", "================ read\n", 1, "a character outside"},
	} {
		_, err := Parse(strings.NewReader(c.file))
		var le *LineError
		if !errors.As(err, &le) || le.Line != c.line || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v; want line %d, %q", c.what, err, c.line, c.why)
			continue
		}
		// The message names the line, never a token of the file.
		for _, f := range strings.Fields(c.file) {
			if len(f) >= 8 && strings.Contains(err.Error(), f) {
				t.Errorf("%s: the error %q shows %q", c.what, err, f)
			}
		}
	}
	for _, empty := range []string{"", "\n\n", "# only a comment\n"} {
		if _, err := Parse(strings.NewReader(empty)); !errors.Is(err, ErrNoTokens) {
			t.Errorf("Parse(%q): %v, want ErrNoTokens", empty, err)
		}
	}
	// Trailing = is padding, and allowed.
	if _, err := Parse(strings.NewReader("dG9rZW4tb2YtYmFzZTY0LQ== write\n")); err != nil {
		t.Errorf("a base64 token: %v", err)
	}
}

func TestScopes(t *testing.T) {
	for _, c := range []struct {
		have, need Scope
		ok         bool
	}{
		{Read, Read, true}, {Read, Write, false}, {Read, Admin, false},
		{Write, Read, true}, {Write, Write, true}, {Write, Admin, false},
		{Admin, Read, true}, {Admin, Write, true}, {Admin, Admin, true},
	} {
		if got := c.have.Covers(c.need); got != c.ok {
			t.Errorf("%v.Covers(%v) = %v", c.have, c.need, got)
		}
	}
	for _, s := range []Scope{Read, Write, Admin} {
		if back, ok := ParseScope(s.String()); !ok || back != s {
			t.Errorf("ParseScope(%q) = %v, %v", s.String(), back, ok)
		}
	}
}

// TestReload: a reload that parses replaces the set; one that does not keeps it; both are
// counted.
func TestReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(readTok + " read\n")
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Lookup(readTok); !ok {
		t.Fatal("the loaded token is not known")
	}
	write(adminTok + " admin\n")
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Lookup(readTok); ok {
		t.Error("a token removed from the file is still known after a reload")
	}
	if s, ok := f.Lookup(adminTok); !ok || s != Admin {
		t.Errorf("the new token: %v, %v", s, ok)
	}
	write(adminTok + " admin\n" + readTok + " superuser\n")
	err = f.Reload()
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 || !strings.Contains(err.Error(), path) {
		t.Errorf("a bad reload: %v; want line 2 of %s", err, path)
	}
	if s, ok := f.Lookup(adminTok); !ok || s != Admin {
		t.Errorf("after a refused reload the kept token: %v, %v", s, ok)
	}
	os.Remove(path)
	if err := f.Reload(); err == nil {
		t.Error("a reload of a removed file succeeded")
	}
	if _, ok := f.Lookup(adminTok); !ok {
		t.Error("a removed file dropped the kept set")
	}
	if ok, failed := f.Reloads(); ok != 1 || failed != 2 {
		t.Errorf("Reloads() = %d ok, %d failed; want 1, 2", ok, failed)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Load of a missing file: %v", err)
	}
	write(strings.Repeat("#", MaxFileSize+1))
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load of a huge file: %v", err)
	}
}
