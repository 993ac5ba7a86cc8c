package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"plait/client"
)

// fast is a client of url whose backoff keeps a test short.
func fast(t *testing.T, url string, opts ...client.Option) *client.Client {
	t.Helper()
	return newClient(t, url, append([]client.Option{client.WithBackoff(time.Millisecond, 5*time.Millisecond)}, opts...)...)
}

// failing is a server that answers the first n requests with status and code, and the
// rest with ok; it counts the requests.
func failing(t *testing.T, n int32, status int, code, ok string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var count atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if count.Add(1) <= n {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"code":%q,"message":"as the test says"}}`+"\n", code)
			return
		}
		io.WriteString(w, ok)
	}))
	t.Cleanup(srv.Close)
	return srv, &count
}

// TestReadsAreRetried: a read that fails on the server (5xx) is sent again up to the
// attempts, then succeeds; past the attempts the last error comes back; a 4xx is not sent
// again.
func TestReadsAreRetried(t *testing.T) {
	ctx := context.Background()
	srv, count := failing(t, 3, 503, "unavailable", "value")
	if v, err := fast(t, srv.URL).Get(ctx, "t", []byte("k")); err != nil || string(v) != "value" || count.Load() != 4 {
		t.Errorf("a read failing 3 times: %q %v after %d requests, want the value after 4", v, err, count.Load())
	}
	srv, count = failing(t, 3, 500, "internal", "value")
	_, err := fast(t, srv.URL, client.WithMaxAttempts(3)).Get(ctx, "t", []byte("k"))
	wantAPIError(t, "a read failing past its attempts", err, client.ErrInternal, 500, client.ClassInternal)
	if count.Load() != 3 {
		t.Errorf("%d requests, want the 3 attempts", count.Load())
	}
	srv, count = failing(t, 1, 404, "not-found", "value")
	_, err = fast(t, srv.URL).Get(ctx, "t", []byte("k"))
	wantAPIError(t, "a 404", err, client.ErrNotFound, 404, client.ClassNotFound)
	if count.Load() != 1 {
		t.Errorf("a 404 sent %d times, want once", count.Load())
	}
	// A read whose connection fails before any answer is sent again too.
	dead := deadServer(t, 2)
	if _, err := fast(t, dead.URL).Status(ctx); err != nil || dead.count.Load() != 3 {
		t.Errorf("a read whose connection died: %v after %d requests, want a value after 3", err, dead.count.Load())
	}
}

// TestWritesRetriedOnlyWhenNothingApplied: a write refused storage-full, storage-failed or
// clock-offset (nothing applied) is sent again; one refused no-carrier (a forwarded write
// may have applied), unavailable or request-timeout is not.
func TestWritesRetriedOnlyWhenNothingApplied(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		status int
		code   string
		again  bool
	}{
		{507, "storage-full", true}, {503, "storage-failed", true}, {503, "clock-offset", true},
		{503, "no-carrier", false}, {503, "unavailable", false}, {504, "request-timeout", false},
		{502, "unreachable", false}, {503, "origin-rewound", false}, {500, "internal", false},
	} {
		srv, count := failing(t, 2, tc.status, tc.code, `{"origin_seq":7}`+"\n")
		seq, err := fast(t, srv.URL).Put(ctx, "t", []byte("k"), []byte("v"))
		switch {
		case tc.again && (err != nil || seq != 7 || count.Load() != 3):
			t.Errorf("%s: %d %v after %d requests, want seq 7 after 3", tc.code, seq, err, count.Load())
		case !tc.again && (err == nil || count.Load() != 1):
			t.Errorf("%s: %d %v after %d requests, want the refusal after 1", tc.code, seq, err, count.Load())
		}
		sentinel, _ := client.Sentinel(tc.code)
		if !tc.again && !errors.Is(err, sentinel) {
			t.Errorf("%s: %v, want its sentinel", tc.code, err)
		}
	}
	// A batch and a delete follow the same rule.
	srv, count := failing(t, 1, 507, "storage-full", `{"origin_seq":8}`+"\n")
	if seq, err := fast(t, srv.URL).Batch(ctx, "t", []client.Op{client.PutOp([]byte("k"), []byte("v"))}); err != nil || seq != 8 || count.Load() != 2 {
		t.Errorf("a batch refused storage-full once: %d %v after %d requests", seq, err, count.Load())
	}
	srv, count = failing(t, 1, 503, "no-carrier", `{"origin_seq":9}`+"\n")
	if _, err := fast(t, srv.URL).Delete(ctx, "t", []byte("k")); !errors.Is(err, client.ErrNoCarrier) || count.Load() != 1 {
		t.Errorf("a delete refused no-carrier: %v after %d requests, want no-carrier after 1", err, count.Load())
	}
}

// deadServer is a server whose first n connections read a request whole and close without
// an answer; the later ones answer a status document.
type dead struct {
	URL   string
	count atomic.Int32
}

func deadServer(t *testing.T, n int32) *dead {
	t.Helper()
	d := &dead{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if d.count.Add(1) <= n {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		io.WriteString(w, `{"node":{"name":"A"},"origin_seq":5}`)
	}))
	t.Cleanup(srv.Close)
	d.URL = srv.URL
	return d
}

// TestWriteSentIsNotRetried: a write whose connection dies after the request went whole
// is not sent again (it may have applied); the error says it was sent.
func TestWriteSentIsNotRetried(t *testing.T) {
	d := deadServer(t, 1)
	_, err := fast(t, d.URL).Put(context.Background(), "t", []byte("k"), []byte("v"))
	var te *client.TransportError
	if !errors.As(err, &te) || !te.Sent || d.count.Load() != 1 {
		t.Errorf("a write whose answer was lost: %v (%T) after %d requests, want a sent *TransportError after 1", err, err, d.count.Load())
	}
}

// TestWriteNotSentIsRetried: a write whose connection could not be made (nothing sent) is
// sent again.
func TestWriteNotSentIsRetried(t *testing.T) {
	srv, count := failing(t, 0, 0, "", `{"origin_seq":3}`+"\n")
	var dials atomic.Int32
	var d net.Dialer
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) <= 2 {
			return nil, errors.New("the test refuses this dial")
		}
		return d.DialContext(ctx, network, addr)
	}}}
	seq, err := fast(t, srv.URL, client.WithHTTPClient(hc)).Put(context.Background(), "t", []byte("k"), []byte("v"))
	if err != nil || seq != 3 || dials.Load() != 3 || count.Load() != 1 {
		t.Errorf("a write whose dial failed twice: %d %v after %d dials and %d requests, want seq 3 after 3 and 1", seq, err, dials.Load(), count.Load())
	}
}

// TestRetryAfter: an answer's Retry-After longer than the backoff's bound ends the
// retries at once; a short one is waited.
func TestRetryAfter(t *testing.T) {
	var count atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if count.Add(1) == 1 {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(503)
			io.WriteString(w, `{"error":{"code":"quarantined","message":"not yet"}}`)
			return
		}
		io.WriteString(w, `{"token":"t","expires_in_ms":10}`)
	}))
	defer srv.Close()
	_, err := fast(t, srv.URL).AcquireLock(context.Background(), "t", []byte("k"), time.Second, 0)
	var ae *client.Error
	if !errors.As(err, &ae) || ae.RetryAfter != 30*time.Second || count.Load() != 1 {
		t.Errorf("a Retry-After of 30s: %v after %d requests, want the refusal after 1", err, count.Load())
	}
}

// TestStatusTolerant: a status document with fields the client does not name, and a
// counter that is not a number, decodes: the named fields typed, the rest in Raw.
func TestStatusTolerant(t *testing.T) {
	doc := `{"node":{"name":"A","origin":"` + origin + `","protocol":{"min":1,"max":9},"later":{"x":[1]}},` +
		`"origins":[{"origin":"` + origin + `","name":"A","applied_seq":5,"stuck":"clock-ahead","newer":true}],` +
		`"counters":{"txns_applied":5,"a_later_gauge":{"open":2},"ratio":0.5},"feeds":{"open":1}}`
	srv, _ := failing(t, 0, 0, "", doc)
	s, err := fast(t, srv.URL).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Node.Name != "A" || s.Node.Protocol.Max != 9 || len(s.Origins) != 1 || s.Origins[0].AppliedSeq != 5 ||
		s.Origins[0].Stuck == nil || *s.Origins[0].Stuck != "clock-ahead" || s.Counters["txns_applied"] != 5 ||
		len(s.Counters) != 1 || string(s.Raw) != doc {
		t.Errorf("status %+v counters %v", s, s.Counters)
	}
}
