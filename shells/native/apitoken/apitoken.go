package apitoken

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// Scope is what a token may do. Each scope covers the ones below it.
type Scope int

// The scopes, lowest first.
const (
	Read  Scope = iota + 1 // GET of records, listings, digests, status, metrics and the cluster map
	Write                  // Read, and record PUT and DELETE, and batches
	Admin                  // Write, and POST /v1/peers, DELETE /v1/peers/{name} and PUT /v1/cluster/map
)

// String is the scope's name in a token file.
func (s Scope) String() string {
	switch s {
	case Read:
		return "read"
	case Write:
		return "write"
	case Admin:
		return "admin"
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// Covers reports whether a token of scope s may do what needs scope need.
func (s Scope) Covers(need Scope) bool { return s >= need }

// ParseScope reads a scope's name: read, write or admin.
func ParseScope(name string) (Scope, bool) {
	switch name {
	case "read":
		return Read, true
	case "write":
		return Write, true
	case "admin":
		return Admin, true
	}
	return 0, false
}

// MinTokenLen is the shortest token a file may hold: 128 bits of a random hex or base64
// string is 22 characters or more, so 16 bytes refuses only tokens no one should use.
const MinTokenLen = 16

// MaxFileSize bounds a token file: a file that large is not a token file.
const MaxFileSize = 1 << 20

// Set is the tokens of one token file, each with its scope. It is never changed once
// parsed, so that a reload swaps whole sets.
type Set struct {
	entries []entry
}

type entry struct {
	sum   [sha256.Size]byte
	scope Scope
}

// Len is the number of tokens in the set.
func (s *Set) Len() int { return len(s.entries) }

// compare is subtle.ConstantTimeCompare; it is a variable only so that a test can see that
// every lookup goes through it, once per token held.
var compare = subtle.ConstantTimeCompare

// Lookup returns the scope of token, and whether the set holds it. The presented token is
// hashed first, so that every comparison is of 32 bytes whatever its length, and it is
// compared with every token of the set: the time a lookup takes depends on the number of
// tokens held, not on which one matched or how much of one did.
func (s *Set) Lookup(token string) (Scope, bool) {
	sum := sha256.Sum256([]byte(token))
	found, scope := 0, 0
	for i := range s.entries {
		e := &s.entries[i]
		eq := compare(sum[:], e.sum[:])
		scope = subtle.ConstantTimeSelect(eq, int(e.scope), scope)
		found |= eq
	}
	return Scope(scope), found == 1
}

// LineError is a token file's line that is refused. Its message names the line, never the
// token on it.
type LineError struct {
	Line int
	Why  string
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Why) }

// ErrNoTokens is the refusal of a file that holds no token: it would lock every client out,
// and a file truncated while it is rewritten looks like one.
var ErrNoTokens = errors.New("the file holds no token")

// Parse reads a token file: one `TOKEN SCOPE` a line, the two separated by spaces or tabs;
// blank lines, and lines whose first character other than a space or tab is `#`, are
// skipped. A token is at least MinTokenLen bytes of RFC 6750's token68 characters
// (A-Z a-z 0-9 - . _ ~ + /, then any number of =), so that it can travel in an
// Authorization header as it is; it appears once. A scope is read, write or admin.
// The first line refused is the error (a *LineError), and the file is refused whole.
func Parse(r io.Reader) (*Set, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxFileSize)
	s := &Set{}
	seen := map[[sha256.Size]byte]int{} // a token's line
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, &LineError{n, fmt.Sprintf("%d fields, want 2: TOKEN SCOPE", len(fields))}
		}
		token, name := fields[0], fields[1]
		if len(token) < MinTokenLen {
			return nil, &LineError{n, fmt.Sprintf("the token is %d bytes, shorter than %d (use e.g. openssl rand -hex 32)", len(token), MinTokenLen)}
		}
		if !token68(token) {
			return nil, &LineError{n, "the token has a character outside A-Z a-z 0-9 - . _ ~ + / (and a trailing =)"}
		}
		scope, ok := ParseScope(name)
		if !ok {
			return nil, &LineError{n, fmt.Sprintf("unknown scope %q: read, write or admin", name)}
		}
		sum := sha256.Sum256([]byte(token))
		if first, dup := seen[sum]; dup {
			return nil, &LineError{n, fmt.Sprintf("the same token as line %d", first)}
		}
		seen[sum] = n
		s.entries = append(s.entries, entry{sum: sum, scope: scope})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("a line longer than %d bytes", MaxFileSize)
		}
		return nil, err
	}
	if len(s.entries) == 0 {
		return nil, ErrNoTokens
	}
	return s, nil
}

// token68 reports whether t is RFC 6750's b64token (RFC 7235's token68): the characters a
// bearer token is sent with.
func token68(t string) bool {
	body := strings.TrimRight(t, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}

// ParseFile reads and parses the token file at path. Its errors name the file.
func ParseFile(path string) (*Set, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxFileSize)
	}
	return b, nil
}

// File is a token file and the set it last loaded: what a node checks tokens against.
// Reload reads the file again; a file that does not parse is refused and the set before it
// kept, so that a half-written or mistyped file does not lock clients out.
type File struct {
	path string
	cur  atomic.Pointer[Set]
	mu   sync.Mutex // serializes reloads

	reloads, failures atomic.Uint64
}

// Load reads the token file at path. Its errors name the file and, for a refused line,
// the line.
func Load(path string) (*File, error) {
	s, err := ParseFile(path)
	if err != nil {
		return nil, err
	}
	f := &File{path: path}
	f.cur.Store(s)
	return f, nil
}

// Path is the file's path.
func (f *File) Path() string { return f.path }

// Current is the set in use.
func (f *File) Current() *Set { return f.cur.Load() }

// Lookup is Current().Lookup: the scope of a presented token.
func (f *File) Lookup(token string) (Scope, bool) { return f.Current().Lookup(token) }

// Reload reads the file again and, when it parses, uses its set from the next lookup on.
// When it does not, the set in use is kept and the error returned; either way the reload
// is counted (Reloads).
func (f *File) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := ParseFile(f.path)
	if err != nil {
		f.failures.Add(1)
		return err
	}
	f.cur.Store(s)
	f.reloads.Add(1)
	return nil
}

// Reloads counts the reloads that loaded a new set and the ones refused, since Load.
func (f *File) Reloads() (ok, failed uint64) { return f.reloads.Load(), f.failures.Load() }
