package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"plait/client"
	"plait/shells/native/apitoken"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// startNode runs a node with its HTTP API on httptest, and answers the node and the API's
// URL. The client under test imports nothing of plait; its tests do, to have a real node.
func startNode(t *testing.T, cfg node.Config, opts ...httpapi.Option) (*node.Node, string) {
	t.Helper()
	n, api := startServer(t, cfg, opts...)
	return n, api.URL
}

// startServer is startNode that gives the API's server, whose client connections a test
// may drop.
func startServer(t *testing.T, cfg node.Config, opts ...httpapi.Option) (*node.Node, *httptest.Server) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.Listener, cfg.Secret = t.TempDir(), l, []byte("client test secret, long enough..")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(httpapi.New(n, httpapi.Limits{}, opts...))
	t.Cleanup(func() {
		api.Close()
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
	})
	return n, api
}

func newClient(t *testing.T, url string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantAPIError checks err is the *client.Error of status, code and class, and that
// errors.Is matches its sentinel.
func wantAPIError(t *testing.T, what string, err error, sentinel error, status int, class client.Class) {
	t.Helper()
	var ae *client.Error
	if !errors.As(err, &ae) {
		t.Errorf("%s: %v (%T), want a *client.Error", what, err, err)
		return
	}
	if !errors.Is(err, sentinel) || ae.StatusCode != status || ae.Class != class || ae.Code != client.Code(sentinel) {
		t.Errorf("%s: %d %s class %s (%v), want %d %s class %s", what, ae.StatusCode, ae.Code, ae.Class, err, status, client.Code(sentinel), class)
	}
}

// TestRecordsOnANode: every record call against a real node, the values checked back.
func TestRecordsOnANode(t *testing.T) {
	_, url := startNode(t, node.Config{Name: "A"})
	c := newClient(t, url)
	ctx := context.Background()
	seq, err := c.Put(ctx, "t", []byte("dir/k1"), []byte("one"))
	if err != nil || seq != 1 {
		t.Fatalf("put: %d %v, want seq 1", seq, err)
	}
	if v, err := c.Get(ctx, "t", []byte("dir/k1")); err != nil || string(v) != "one" {
		t.Fatalf("get: %q %v, want one", v, err)
	}
	// A key and value that are not UTF-8: the batch goes as CBOR, the listing's value as
	// value_b64.
	odd := []byte{0xff, 0x00, 'k'}
	seq, err = c.Batch(ctx, "t", []client.Op{client.PutOp(odd, []byte{0xfe, 0x01}), client.PutOp([]byte("k2"), []byte("two")), client.DeleteOp([]byte("dir/k1"))})
	if err != nil || seq != 2 {
		t.Fatalf("batch: %d %v, want seq 2", seq, err)
	}
	if v, err := c.Get(ctx, "t", odd); err != nil || !bytes.Equal(v, []byte{0xfe, 0x01}) {
		t.Fatalf("get of the odd key: %x %v", v, err)
	}
	_, err = c.Get(ctx, "t", []byte("dir/k1"))
	wantAPIError(t, "get of a deleted key", err, client.ErrNotFound, 404, client.ClassNotFound)
	seq, err = c.Batch(ctx, "t", []client.Op{client.PutOp([]byte("k3"), []byte{0x80}), client.PutOp([]byte("k4"), []byte("four"))})
	if err != nil || seq != 3 {
		t.Fatalf("JSON batch: %d %v", seq, err)
	}
	if seq, err = c.Delete(ctx, "t", []byte("k4")); err != nil || seq != 4 {
		t.Fatalf("delete: %d %v", seq, err)
	}

	// Pinned or not (a node without docs/contract.md §25.4's listings pages the old way,
	// Snapshot ""), the pages hold the live records in key order.
	var keys []string
	pages := 0
	for p, err := range c.List(ctx, "t", client.ListOptions{Prefix: "k", Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range p.Records {
			keys = append(keys, string(r.Key)+"="+string(r.Value))
		}
		if (p.Snapshot == "") != (p.AsOf == "") {
			t.Errorf("a page with one of a snapshot and an as_of: %+v", p)
		}
	}
	if want := "[k2=two k3=\x80]"; pages != 2 || fmtKeys(keys) != want {
		t.Errorf("listing: %d pages %q, want 2 pages %q", pages, fmtKeys(keys), want)
	}

	d, err := c.Digest(ctx, "t")
	if err != nil || d.Count != 3 || len(d.Hash) != 64 {
		t.Errorf("digest: %+v %v, want 3 records", d, err)
	}

	s, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Node.Name != "A" || len(s.Node.Origin) != 32 || len(s.Origins) != 1 || s.Origins[0].AppliedSeq != 4 ||
		s.Counters["txns_applied"] != 4 || s.Node.Protocol.Max == 0 || s.Node.Storage.State != "ok" || len(s.Raw) == 0 {
		t.Errorf("status: %+v", s)
	}

	// The refusals' classes.
	_, err = c.Put(ctx, "bad table!", []byte("k"), []byte("v"))
	wantAPIError(t, "a bad table", err, client.ErrBadTable, 400, client.ClassInvalid)
	_, err = c.Put(ctx, "t", bytes.Repeat([]byte("k"), 1025), []byte("v"))
	wantAPIError(t, "a long key", err, client.ErrBadKey, 400, client.ClassInvalid)
	_, err = c.Put(ctx, "t", []byte("k"), make([]byte, 1<<20+1))
	wantAPIError(t, "a large value", err, client.ErrTooLarge, 413, client.ClassInvalid)
	for range c.List(ctx, "t", client.ListOptions{Limit: 1001}) {
	}
	_, err = firstErr(c.List(ctx, "t", client.ListOptions{Limit: 1001}))
	wantAPIError(t, "a listing's limit", err, client.ErrBadLimit, 400, client.ClassInvalid)
}

func firstErr[V any](seq func(func(V, error) bool)) (V, error) {
	var v V
	var e error
	seq(func(x V, err error) bool { v, e = x, err; return err == nil })
	return v, e
}

func fmtKeys(k []string) string {
	var b bytes.Buffer
	b.WriteString("[")
	for i, s := range k {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(s)
	}
	b.WriteString("]")
	return b.String()
}

// TestTokensOnANode: the token is sent; none is 401 unauthorized, a read token writing
// is 403 forbidden, and a token file is read.
func TestTokensOnANode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("read-token-of-the-client-test read\nwrite-token-of-the-client-test write\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := apitoken.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	_, url := startNode(t, node.Config{Name: "A"}, httpapi.RequireTokens(tokens))
	ctx := context.Background()
	_, err = newClient(t, url).Status(ctx)
	wantAPIError(t, "no token", err, client.ErrUnauthorized, 401, client.ClassUnauthorized)
	_, err = newClient(t, url, client.WithToken("read-token-of-the-client-test")).Put(ctx, "t", []byte("k"), []byte("v"))
	wantAPIError(t, "a read token's write", err, client.ErrForbidden, 403, client.ClassUnauthorized)
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte("write-token-of-the-client-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := newClient(t, url, client.WithTokenFile(tf)).Put(ctx, "t", []byte("k"), []byte("v")); err != nil {
		t.Errorf("a write token from a file: %v", err)
	}
}

// TestMapAndLocksOnANode: the cluster map's calls and the lock calls on a one-node
// cluster that is its own lock home; the acquire is sent again through the home's
// restart quarantine (503 quarantined, Retry-After), as a lock refusal that granted
// nothing is.
func TestMapAndLocksOnANode(t *testing.T) {
	cfg := node.Config{Name: "A"}
	cfg.Locks.MaxTTL, cfg.MaxClockOffset = 2*time.Second, 100*time.Millisecond
	_, url := startNode(t, cfg)
	c := newClient(t, url, client.WithMaxAttempts(20), client.WithBackoff(50*time.Millisecond, 5*time.Second))
	ctx := context.Background()

	_, err := c.AcquireLock(ctx, "t", []byte("k"), time.Second, 0)
	wantAPIError(t, "no lock homes", err, client.ErrNoLockHomes, 503, client.ClassUnavailable)
	m, err := c.ClusterMap(ctx)
	if err != nil || string(bytes.TrimSpace(m)) != `{"generation":0}` {
		t.Fatalf("the map before any: %s %v", m, err)
	}
	doc := []byte(`{"generation":1,"nodes":[{"name":"A"}],"lock_homes":["A"]}`)
	if m, err = c.PutClusterMap(ctx, doc); err != nil || !bytes.Contains(m, []byte(`"generation":1`)) {
		t.Fatalf("publish: %s %v", m, err)
	}
	if again, err := c.PutClusterMap(ctx, doc); err != nil || !bytes.Equal(again, m) {
		t.Errorf("the same map again: %s %v, want it answered as before", again, err)
	}
	_, err = c.PutClusterMap(ctx, []byte(`{"generation":1,"nodes":[{"name":"B"}]}`))
	wantAPIError(t, "a stale generation", err, client.ErrStaleGeneration, 409, client.ClassConflict)
	if got, err := c.ClusterMapOf(ctx, "A"); err != nil || !bytes.Equal(got, m) {
		t.Errorf("the map of A through A: %s %v", got, err)
	}
	once := newClient(t, url, client.WithMaxAttempts(1)) // reads are sent again on 5xx: not here
	_, err = once.ClusterMapOf(ctx, "Z")
	wantAPIError(t, "the map of a node with no route", err, client.ErrNoRoute, 502, client.ClassUpstream)

	_, err = c.AcquireLock(ctx, "t", []byte("k"), 5*time.Second, 0)
	wantAPIError(t, "a ttl above the home's", err, client.ErrBadTTL, 400, client.ClassInvalid)
	lease, err := c.AcquireLock(ctx, "t", []byte("k"), time.Second, 0)
	if err != nil || len(lease.Token) != 80 || lease.ExpiresIn <= 0 || lease.ExpiresIn > time.Second {
		t.Fatalf("acquire: %+v %v", lease, err)
	}
	_, err = once.AcquireLock(ctx, "t", []byte("k"), time.Second, 0)
	wantAPIError(t, "a held key", err, client.ErrLockHeld, 409, client.ClassConflict)
	if seq, err := c.Put(ctx, "t", []byte("k"), []byte("locked"), client.UnderLock(lease.Token)); err != nil || seq == 0 {
		t.Errorf("a write under the lease: %d %v", seq, err)
	}
	if v, err := c.Get(ctx, "t", []byte("k"), client.UnderLock(lease.Token)); err != nil || string(v) != "locked" {
		t.Errorf("a read under the lease: %q %v", v, err)
	}
	_, err = c.Batch(ctx, "t", []client.Op{client.PutOp([]byte("k"), nil), client.PutOp([]byte("other"), nil)}, client.UnderLock(lease.Token))
	wantAPIError(t, "a batch of another key beside the lease's", err, client.ErrLockScope, 400, client.ClassInvalid)
	if d, err := c.RenewLock(ctx, "t", []byte("k"), lease.Token, 2*time.Second); err != nil || d <= time.Second || d > 2*time.Second {
		t.Errorf("renew: %v %v", d, err)
	}
	if err := c.ReleaseLock(ctx, "t", []byte("k"), lease.Token); err != nil {
		t.Errorf("release: %v", err)
	}
	err = c.ReleaseLock(ctx, "t", []byte("k"), lease.Token)
	wantAPIError(t, "a release of a released lease", err, client.ErrLockLost, 409, client.ClassConflict)
	_, err = c.RenewLock(ctx, "t", []byte("k"), "nothex", time.Second)
	wantAPIError(t, "a bad token", err, client.ErrBadToken, 400, client.ClassInvalid)
}
