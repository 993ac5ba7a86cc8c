package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	fastjson "github.com/segmentio/encoding/json"

	"plait/protocol/clustermap"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
	"plait/shells/native/apitoken"
	"plait/shells/native/node"
	"plait/shells/native/statuspage"
	"plait/shells/native/tlsfiles"
)

// Limits are the API's own bounds (docs/contract.md §6.1); zero fields take the defaults. A key's
// and a value's bounds are the node's (node.Node.WriteLimits): the API refuses exactly
// what the replica would, only earlier and with its own error codes.
type Limits struct {
	MaxBatchBody int // a batch request's body, JSON or CBOR (default 12 MiB: 8 MiB of transaction in base64)
	MaxList      int // the largest listing page (default 1000)
	// MaxURL is the longest request target (path and query) answered other than 414
	// too-large (default 16 KiB: the longest the API needs, a listing with a prefix and an
	// after key of 1024 bytes each percent-encoded, is under 7 KiB).
	MaxURL int
	// MaxHeaders is the most header bytes (names and values) a request may carry before it
	// is answered 431 too-large (default 64 KiB).
	MaxHeaders int
	// LockFenceWait bounds how long a read under a lock waits for this node to apply the
	// lease's fence before it answers 503 fence-timeout (default DefaultLockFenceWait).
	LockFenceWait time.Duration
	// The change feeds' bounds (docs/contract.md §24.4): how long a feed whose position
	// this node has not applied waits before 409 behind (FeedCatchUp), how often an idle
	// feed sends a heartbeat (FeedHeartbeat), how long a write to a feed's client may block
	// before the feed is closed stalled (FeedStallTimeout), and the feeds open at once
	// (MaxFeeds; one more is 503 too-many-feeds).
	FeedCatchUp      time.Duration
	FeedHeartbeat    time.Duration
	FeedStallTimeout time.Duration
	MaxFeeds         int
}

// DefaultLockFenceWait is Limits.LockFenceWait's default (--lock-fence-wait): longer
// than a healthy cluster's replication lag by far, short enough that a client behind a
// partition hears of it while its lease runs.
const DefaultLockFenceWait = 5 * time.Second

// MaxRequestHead is the HTTP server's own bound on a request's line and headers
// (http.Server.MaxHeaderBytes): past it, net/http answers 431 in plain text before any
// handler runs. It is far above MaxURL and MaxHeaders, so that every request a client
// could send by mistake is answered by the API, in its JSON error form.
const MaxRequestHead = 16 << 20

func (l Limits) withDefaults() Limits {
	if l.MaxURL == 0 {
		l.MaxURL = 16 << 10
	}
	if l.MaxHeaders == 0 {
		l.MaxHeaders = 64 << 10
	}
	if l.MaxBatchBody == 0 {
		l.MaxBatchBody = 12 << 20
	}
	if l.LockFenceWait <= 0 {
		l.LockFenceWait = DefaultLockFenceWait
	}
	if l.MaxList == 0 {
		l.MaxList = 1000
	}
	if l.FeedCatchUp <= 0 {
		l.FeedCatchUp = DefaultFeedCatchUp
	}
	if l.FeedHeartbeat <= 0 {
		l.FeedHeartbeat = DefaultFeedHeartbeat
	}
	if l.FeedStallTimeout <= 0 {
		l.FeedStallTimeout = DefaultFeedStallTimeout
	}
	if l.MaxFeeds <= 0 {
		l.MaxFeeds = DefaultMaxFeeds
	}
	return l
}

// API serves one node.
type API struct {
	n           *node.Node
	limits      Limits
	writeLimits replica.WriteLimits // the node's
	mux         *http.ServeMux
	scopes      map[string]apitoken.Scope // by the mux's pattern: the scope each endpoint needs

	tokens  *apitoken.File   // nil: the API is open
	tls     *tlsfiles.Source // the HTTPS certificate, for /metrics; nil when none
	refused [2]atomic.Uint64 // unauthorized, forbidden
	locks   lockCounters
	feeds   *feedRegistry
}

// Option is an option of New beyond the API's bounds.
type Option func(*API)

// RequireTokens makes every endpoint but GET /healthz answer only requests that carry a
// bearer token of tokens whose scope covers the endpoint's (docs/contract.md §6.4). Without
// it, the API is open to whoever reaches it.
func RequireTokens(tokens *apitoken.File) Option { return func(a *API) { a.tokens = tokens } }

// ReportTLS adds the HTTPS certificate's expiry and reloads to /metrics (§9); the listener
// that serves with src is the caller's.
func ReportTLS(src *tlsfiles.Source) Option { return func(a *API) { a.tls = src } }

// open is the scope of an endpoint that needs no token.
const open apitoken.Scope = 0

// New returns the API of n.
func New(n *node.Node, limits Limits, opts ...Option) *API {
	a := &API{n: n, limits: limits.withDefaults(), writeLimits: n.WriteLimits(), mux: http.NewServeMux(),
		scopes: map[string]apitoken.Scope{}, feeds: newFeedRegistry()}
	for _, o := range opts {
		o(a)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&metrics{n: n}, &apiMetrics{a: a})
	for _, r := range a.routes(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) {
		a.handle(r.pattern, r.scope, r.h)
	}
	n.ServeAPI(a.serveForwarded)
	return a
}

// route is one endpoint: its pattern (http.ServeMux's), the token scope it needs, and its
// handler.
type route struct {
	pattern string
	scope   apitoken.Scope
	h       http.Handler
}

// routes is the one table of endpoints and the scope each needs: a route cannot be added
// without one, and docs/contract.md §6.4's scope table is checked against it.
func (a *API) routes(metrics http.Handler) []route {
	return []route{
		// The table endpoints go to a carrier when this node does not carry the table
		// (forward.go), with the body each takes, under its own bound.
		{"PUT /v1/tables/{t}/records/{key...}", apitoken.Write, a.placed(a.put, func() int { return a.writeLimits.MaxValue })},
		{"GET /v1/tables/{t}/records/{key...}", apitoken.Read, a.placed(a.get, noBody)},
		{"DELETE /v1/tables/{t}/records/{key...}", apitoken.Write, a.placed(a.del, noBody)},
		{"POST /v1/tables/{t}/batch", apitoken.Write, a.placed(a.batch, func() int { return a.limits.MaxBatchBody })},
		{"GET /v1/tables/{t}/records", apitoken.Read, a.placed(a.list, noBody)},
		{"GET /v1/tables/{t}/digest", apitoken.Read, a.placed(a.digest, noBody)},
		// A feed is never forwarded: a stream through another node would hold it for as
		// long as it runs (feeds.go).
		{"GET /v1/tables/{t}/changes", apitoken.Read, http.HandlerFunc(a.changes)},
		// Named feeds (namedfeeds.go): an admin makes and drops them (each holds
		// retention); a consumer reads and acks with read.
		{"PUT /v1/feeds/{name}", apitoken.Admin, http.HandlerFunc(a.putNamedFeed)},
		{"GET /v1/feeds/{name}", apitoken.Read, http.HandlerFunc(a.getNamedFeed)},
		{"DELETE /v1/feeds/{name}", apitoken.Admin, http.HandlerFunc(a.deleteNamedFeed)},
		{"POST /v1/feeds/{name}/ack", apitoken.Read, http.HandlerFunc(a.ackNamedFeed)},
		{"GET /v1/feeds/{name}/changes", apitoken.Read, http.HandlerFunc(a.namedFeedChanges)},
		// A lock request goes to the key's home, whoever carries the table (locks.go).
		{"POST /v1/tables/{t}/locks/{key...}", apitoken.Write, http.HandlerFunc(a.lockAcquire)},
		{"PUT /v1/tables/{t}/locks/{key...}", apitoken.Write, http.HandlerFunc(a.lockRenew)},
		{"DELETE /v1/tables/{t}/locks/{key...}", apitoken.Write, http.HandlerFunc(a.lockRelease)},
		{"GET /v1/status", apitoken.Read, http.HandlerFunc(a.status)},
		{"GET /v1/status/lag", apitoken.Read, http.HandlerFunc(a.lagHistory)},
		{"POST /v1/peers", apitoken.Admin, http.HandlerFunc(a.addPeer)},
		{"PUT /v1/peers/{name}", apitoken.Admin, http.HandlerFunc(a.setPeer)},
		{"DELETE /v1/peers/{name}", apitoken.Admin, http.HandlerFunc(a.removePeer)},
		{"GET /v1/cluster/map", apitoken.Read, http.HandlerFunc(a.getMap)},
		{"PUT /v1/cluster/map", apitoken.Admin, http.HandlerFunc(a.putMap)},
		{"GET /metrics", apitoken.Read, metrics},
		// Open: load balancers and orchestrators probe health without credentials.
		{"GET /healthz", open, http.HandlerFunc(a.healthz)},
		// Open: the status page holds no data; it asks for a token and reads the status with it.
		{"GET /{$}", open, statuspage.Handler()},
		{"GET /assets/{file}", open, statuspage.Handler()},
	}
}

// noBody is the body bound of an endpoint that takes none.
func noBody() int { return 0 }

func (a *API) handle(pattern string, scope apitoken.Scope, h http.Handler) {
	a.mux.Handle(pattern, h)
	a.scopes[pattern] = scope
}

// healthz answers 200 ok while the node serves, 200 "degraded: CODE" while its storage is
// degraded (it still serves reads and status, and recovers by itself), 503 once it
// stopped (a store failure other than degraded storage stops it).
func (a *API) healthz(w http.ResponseWriter, _ *http.Request) {
	if !a.n.Serving() {
		fail(w, &apiError{http.StatusServiceUnavailable, "unavailable", "the node has stopped"})
		return
	}
	if code := a.n.StorageState(); code != "" {
		_, _ = io.WriteString(w, "degraded: "+string(code))
		return
	}
	_, _ = io.WriteString(w, "ok") // an error means the client went away: nothing to answer
}

// ServeHTTP serves a request. With tokens required, a request without a valid bearer
// token is answered 401 unauthorized, and one whose token's scope is below the endpoint's
// 403 forbidden, before anything else; that includes a path or method the API does not
// have, so that the endpoints are not shown to a client without a token. A path or method
// the API does not have is then answered in the API's error form: not-found (404) or
// bad-method (405).
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if n := len(r.RequestURI); n > a.limits.MaxURL {
		fail(w, &apiError{http.StatusRequestURITooLong, "too-large", fmt.Sprintf("the URL is %d bytes, over the bound of %d", n, a.limits.MaxURL)})
		return
	}
	if n := headerBytes(r.Header); n > a.limits.MaxHeaders {
		fail(w, &apiError{http.StatusRequestHeaderFieldsTooLarge, "too-large", fmt.Sprintf("the headers are %d bytes, over the bound of %d", n, a.limits.MaxHeaders)})
		return
	}
	_, pattern := a.mux.Handler(r)
	need, known := a.scopes[pattern]
	if have, forwarded := forwardedScope(r.Context()); forwarded {
		// Another node forwarded the request with its caller's scope (forward.go): this
		// node checks it as it checks a token's, whether or not it requires tokens itself.
		if known && !have.Covers(need) {
			a.refused[1].Add(1)
			fail(w, &apiError{http.StatusForbidden, "forbidden",
				fmt.Sprintf("%s needs scope %s; the request forwarded here carries scope %s", pattern, need, have)})
			return
		}
	} else if a.tokens != nil && (!known || need != open) {
		have, why := a.authenticate(r)
		if why != "" {
			a.refused[0].Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer realm="plait"`)
			fail(w, &apiError{http.StatusUnauthorized, "unauthorized", why})
			return
		}
		if known && !have.Covers(need) {
			a.refused[1].Add(1)
			fail(w, &apiError{http.StatusForbidden, "forbidden",
				fmt.Sprintf("%s needs a token of scope %s; this token's scope is %s", pattern, need, have)})
			return
		}
	}
	if !known {
		probe := &statusProbe{header: http.Header{}}
		a.mux.ServeHTTP(probe, r) // the mux's own answer, to tell 404 from 405
		if allow := probe.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		if probe.status == http.StatusMethodNotAllowed {
			fail(w, &apiError{http.StatusMethodNotAllowed, "bad-method", r.Method + " is not allowed on " + r.URL.Path})
			return
		}
		fail(w, &apiError{http.StatusNotFound, "not-found", "no such endpoint: " + r.URL.Path})
		return
	}
	a.mux.ServeHTTP(w, r)
}

// headerBytes is the bytes of a request's header names and values.
func headerBytes(h http.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v)
		}
	}
	return n
}

// authenticate returns the scope of the request's bearer token, or why the request is not
// authenticated. The token comes from the one Authorization header, `Bearer TOKEN` (the
// scheme in any case, RFC 7235); never from the query, where logs and proxies keep it.
func (a *API) authenticate(r *http.Request) (apitoken.Scope, string) {
	const form = "Authorization: Bearer TOKEN"
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		return 0, "a bearer token is required (" + form + ")"
	case 1:
	default:
		return 0, "more than one Authorization header"
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	token = strings.TrimLeft(token, " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t") {
		return 0, "the Authorization header is not " + form
	}
	scope, ok := a.tokens.Lookup(token)
	if !ok {
		return 0, "the bearer token is not valid"
	}
	return scope, ""
}

// statusProbe records the status a handler answers with, and drops the body.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header { return p.header }

func (p *statusProbe) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	return len(b), nil
}

func (p *statusProbe) WriteHeader(status int) {
	if p.status == 0 {
		p.status = status
	}
}

// apiError is an error answer: {"error":{"code":...,"message":...}}.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func fail(w http.ResponseWriter, err error) {
	var ae *apiError
	var we *wire.Error
	var se *store.StorageError
	var ce *clustermap.Error
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &ce) && (ce.Code == clustermap.CodeMixedPlacement || ce.Code == clustermap.CodeNotCarried || ce.Code == clustermap.CodeLockRequired ||
		ce.Code == string(replica.CodeLeafNoLocks)):
		// The request is well formed and this node's cluster map refuses it: 409, as a
		// request that conflicts with the state the node holds (docs/contract.md §23.2,
		// §23.3).
		ae = &apiError{http.StatusConflict, ce.Code, ce.Message}
	case errors.As(err, &ce) && ce.Code == clustermap.CodeClusterNotV4:
		// A write under a lock's token while a member is not known to speak version 4
		// (docs/contract.md §22.6): the cluster, not the request, is not ready.
		ae = &apiError{http.StatusServiceUnavailable, ce.Code, ce.Message}
	case errors.Is(err, replica.ErrTxnTooLarge):
		ae = &apiError{http.StatusRequestEntityTooLarge, "too-large", err.Error()}
	case errors.As(err, &we) && we.Code == wire.CodeBadArgument:
		ae = &apiError{http.StatusBadRequest, string(we.Code), we.Message}
	case errors.As(err, &se) && se.Code == wire.CodeStorageFull:
		// The node's disk is full: 507, the storage's own status; it heals once space is back.
		ae = &apiError{http.StatusInsufficientStorage, string(se.Code), se.Error()}
	case errors.As(err, &se):
		ae = &apiError{http.StatusServiceUnavailable, string(se.Code), se.Error()}
	case errors.As(err, &we) && we.Code == wire.CodeClockOffset:
		// The node's clock, not the request, is at fault, and it heals: 503, as a node
		// that cannot take writes for now.
		ae = &apiError{http.StatusServiceUnavailable, string(we.Code), we.Message}
	case errors.As(err, &we) && we.Code == wire.CodeOriginRewound:
		// The node's own log went back (a restored backup): it takes no write until an
		// operator reseeds it. 503, as a node that cannot take writes: a client writes to
		// another node.
		ae = &apiError{http.StatusServiceUnavailable, string(we.Code), we.Message}
	case errors.Is(err, node.ErrTooManySnapshots):
		ae = &apiError{http.StatusServiceUnavailable, "too-many-snapshots", err.Error()}
	case errors.Is(err, node.ErrSnapshotExpired):
		ae = &apiError{http.StatusGone, "snapshot-expired", err.Error()}
	case errors.As(err, new(*node.SnapshotTableError)):
		ae = &apiError{http.StatusBadRequest, "bad-snapshot", err.Error()}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		ae = &apiError{http.StatusServiceUnavailable, "unavailable", err.Error()}
	default:
		ae = &apiError{http.StatusInternalServerError, "internal", err.Error()}
	}
	body := map[string]any{"error": map[string]string{"code": ae.code, "message": ae.message}}
	writeJSON(w, ae.status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the status line is sent; an error means the client went away
}

// target reads and checks the table and key of a request.
func (a *API) target(r *http.Request, withKey bool) (table, key []byte, err error) {
	table = []byte(r.PathValue("t"))
	if !replica.ValidTable(table) {
		return nil, nil, &apiError{http.StatusBadRequest, "bad-table", "a table name is 1 to 64 of [A-Za-z0-9_.-]"}
	}
	if withKey {
		key = []byte(r.PathValue("key"))
		if err := a.checkKey(key); err != nil {
			return nil, nil, err
		}
	}
	return table, key, nil
}

func (a *API) checkKey(key []byte) error {
	if len(key) == 0 || len(key) > a.writeLimits.MaxKey {
		return &apiError{http.StatusBadRequest, "bad-key", fmt.Sprintf("a key is 1 to %d bytes", a.writeLimits.MaxKey)}
	}
	return nil
}

// readBody reads a body of at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, int64(limit))
	if n := r.ContentLength; n >= 0 && n <= int64(limit) {
		// The length is known and allowed: one buffer of it, read once, instead of a
		// buffer grown (and copied) as the body comes. The server's reader ends the body
		// at that length.
		b := make([]byte, n)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	b, err := io.ReadAll(body)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, &apiError{http.StatusRequestEntityTooLarge, "too-large", fmt.Sprintf("the body exceeds %d bytes", limit)}
	}
	return b, err
}

func (a *API) write(w http.ResponseWriter, r *http.Request, ops []wire.Op) {
	tok, locked, err := lockToken(r)
	switch {
	case err != nil:
		a.lockFail(w, err)
		return
	case locked:
		a.lockedWrite(w, r, tok, ops)
		return
	case a.n.Fenced(ops[0].Table):
		a.lockFail(w, &apiError{http.StatusConflict, codeLockRequired, "table " + string(ops[0].Table) + " is fenced: its writes carry a live lock's token in Plait-Lock"})
		return
	}
	seq, err := a.n.Write(r.Context(), ops)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]uint64{"origin_seq": seq})
}

func (a *API) put(w http.ResponseWriter, r *http.Request) {
	table, key, err := a.target(r, true)
	if err != nil {
		fail(w, err)
		return
	}
	value, err := readBody(w, r, a.writeLimits.MaxValue)
	if err != nil {
		fail(w, err)
		return
	}
	a.write(w, r, []wire.Op{{Kind: wire.OpPut, Table: table, Key: key, Value: value}})
}

func (a *API) del(w http.ResponseWriter, r *http.Request) {
	table, key, err := a.target(r, true)
	if err != nil {
		fail(w, err)
		return
	}
	a.write(w, r, []wire.Op{{Kind: wire.OpDelete, Table: table, Key: key}})
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	table, key, err := a.target(r, true)
	if err != nil {
		fail(w, err)
		return
	}
	if tok, locked, err := lockToken(r); err != nil {
		a.lockFail(w, err)
		return
	} else if locked {
		if err := a.awaitFence(r, tok, table, key); err != nil {
			a.lockFail(w, err)
			return
		}
	}
	rec, found, err := a.n.Get(table, key)
	switch {
	case err != nil:
		fail(w, err)
	case !found || rec.Deleted:
		fail(w, &apiError{http.StatusNotFound, "not-found", "no record " + string(key) + " in table " + string(table)})
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(rec.Value) // an error means the client went away: nothing to answer
	}
}

type batchOp struct {
	Op       string  `json:"op"`
	Key      string  `json:"key"`
	Value    *string `json:"value"`
	ValueB64 *string `json:"value_b64"`
}

// cborBatch is a batch body as CBOR (application/cbor, docs/contract.md §6.2): the JSON
// body's fields, with the key and the value as byte strings, so that a binary value needs
// no base64 and decoding copies bytes instead of parsing text.
type cborBatch struct {
	Ops []cborOp `cbor:"ops"`
}

type cborOp struct {
	Op    string  `cbor:"op"`
	Key   []byte  `cbor:"key"`
	Value *[]byte `cbor:"value"` // nil when absent (or null): a delete's
}

// cborBatchMode decodes CBOR batch bodies as strictly as JSON ones are read: unknown or
// repeated fields, tags and field names in another case are refused. The body's own bound
// (Limits.MaxBatchBody) bounds the number of ops, as it does for JSON, so the decoder's
// array bound is set to its largest rather than making a second, smaller limit; a length
// that the body does not hold is refused before anything is allocated, since the decoder
// checks that the whole item is well formed first.
var cborBatchMode = func() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		TagsMd:            cbor.TagsForbidden,
		MaxArrayElements:  math.MaxInt32,
		UTF8:              cbor.UTF8RejectInvalid,
		FieldNameMatching: cbor.FieldNameMatchingCaseSensitive,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	}.DecMode()
	if err != nil {
		panic("httpapi: CBOR batch decoding options: " + err.Error())
	}
	return m
}()

// batchItem is one op of a batch body, JSON or CBOR, before the checks that both share.
type batchItem struct {
	op       string
	key      []byte
	value    []byte
	valueErr string // why a put's value is refused as bad-json; "" when it is not
	hasValue bool   // whether the op carries a value at all (a delete must not)
}

// isCBOR reports whether a request's body is CBOR: its media type is application/cbor.
// Any other, or none, is read as JSON, as every batch was before CBOR was taken.
func isCBOR(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/cbor"
}

// jsonBatch decodes a JSON batch body. The decoder is segmentio/encoding's, which takes and
// refuses exactly what encoding/json does (FuzzJSONBatchAgrees holds the two to it) at a
// fraction of its cost: the body's decoding is the largest cost of the HTTP write path
// that is the API's own (BENCHMARKS.md §2).
func jsonBatch(body []byte) ([]batchItem, error) {
	var req struct {
		Ops []batchOp `json:"ops"`
	}
	dec := fastjson.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, &apiError{http.StatusBadRequest, "bad-json", err.Error()}
	}
	items := make([]batchItem, len(req.Ops))
	for i, o := range req.Ops {
		it := batchItem{op: o.Op, key: []byte(o.Key), hasValue: o.Value != nil || o.ValueB64 != nil}
		switch {
		case o.Value != nil && o.ValueB64 == nil:
			it.value = []byte(*o.Value)
		case o.ValueB64 != nil && o.Value == nil:
			var err error
			if it.value, err = base64.StdEncoding.DecodeString(*o.ValueB64); err != nil {
				it.valueErr = "value_b64: " + err.Error()
			}
		default:
			it.valueErr = `a put has exactly one of "value" and "value_b64"`
		}
		items[i] = it
	}
	return items, nil
}

// cborBatchItems decodes a CBOR batch body; the item must be the whole body.
func cborBatchItems(body []byte) ([]batchItem, error) {
	var req cborBatch
	if err := cborBatchMode.Unmarshal(body, &req); err != nil {
		return nil, &apiError{http.StatusBadRequest, "bad-json", "CBOR: " + err.Error()}
	}
	items := make([]batchItem, len(req.Ops))
	for i, o := range req.Ops {
		it := batchItem{op: o.Op, key: o.Key, hasValue: o.Value != nil}
		if o.Value != nil {
			it.value = *o.Value
		} else {
			it.valueErr = `a put has a "value"`
		}
		items[i] = it
	}
	return items, nil
}

func (a *API) batch(w http.ResponseWriter, r *http.Request) {
	table, _, err := a.target(r, false)
	if err != nil {
		fail(w, err)
		return
	}
	body, err := readBody(w, r, a.limits.MaxBatchBody)
	if err != nil {
		fail(w, err)
		return
	}
	decode := jsonBatch
	if isCBOR(r) {
		decode = cborBatchItems
	}
	items, err := decode(body)
	if err != nil {
		fail(w, err)
		return
	}
	if len(items) == 0 {
		fail(w, &apiError{http.StatusBadRequest, "bad-json", `a batch needs "ops" with at least one op`})
		return
	}
	ops := make([]wire.Op, len(items))
	for i, o := range items {
		at := "op " + strconv.Itoa(i) + ": "
		if err := a.checkKey(o.key); err != nil {
			fail(w, &apiError{http.StatusBadRequest, "bad-key", at + err.(*apiError).message})
			return
		}
		switch o.op {
		case "put":
			if o.valueErr != "" {
				fail(w, &apiError{http.StatusBadRequest, "bad-json", at + o.valueErr})
				return
			}
			if len(o.value) > a.writeLimits.MaxValue {
				fail(w, &apiError{http.StatusRequestEntityTooLarge, "too-large", at + fmt.Sprintf("a value is at most %d bytes", a.writeLimits.MaxValue)})
				return
			}
			ops[i] = wire.Op{Kind: wire.OpPut, Table: table, Key: o.key, Value: o.value}
		case "delete":
			if o.hasValue {
				fail(w, &apiError{http.StatusBadRequest, "bad-json", at + "a delete has no value"})
				return
			}
			ops[i] = wire.Op{Kind: wire.OpDelete, Table: table, Key: o.key}
		default:
			fail(w, &apiError{http.StatusBadRequest, "bad-op", at + `"op" is "put" or "delete"`})
			return
		}
	}
	a.write(w, r, ops)
}

// record is a listed record: value when the bytes are UTF-8, value_b64 otherwise.
type record struct {
	Key      string  `json:"key"`
	Value    *string `json:"value,omitempty"`
	ValueB64 *string `json:"value_b64,omitempty"`
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	table, _, err := a.target(r, false)
	if err != nil {
		fail(w, err)
		return
	}
	q := r.URL.Query()
	limit := a.limits.MaxList
	if s := q.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > a.limits.MaxList {
			fail(w, &apiError{http.StatusBadRequest, "bad-limit", fmt.Sprintf("limit is 1 to %d", a.limits.MaxList)})
			return
		}
	}
	var after []byte
	if q.Has("after") {
		after = []byte(q.Get("after"))
	}
	prefix := []byte(q.Get("prefix"))
	var recs []store.Record
	var more bool
	var page *node.SnapshotPage // a listing from a pinned snapshot (docs/contract.md §24.5)
	switch id := q.Get("snapshot"); {
	case !q.Has("snapshot"):
		recs, more, err = a.n.List(table, prefix, after, limit)
	case id == "new":
		var p node.SnapshotPage
		p, err = a.n.OpenSnapshot(r.Context(), table, prefix, after, limit)
		page, recs, more = &p, p.Records, p.More
	case !node.ValidSnapshotID(id):
		err = &apiError{http.StatusBadRequest, "bad-snapshot", fmt.Sprintf("snapshot is new or an id of %d lowercase hex digits", node.SnapshotIDLen)}
	default:
		var p node.SnapshotPage
		p, err = a.n.SnapshotPage(id, table, prefix, after, limit)
		page, recs, more = &p, p.Records, p.More
	}
	if err != nil {
		fail(w, err)
		return
	}
	out := listing{Records: []record{}}
	for _, rec := range recs {
		x := record{Key: string(rec.Key)}
		if utf8.Valid(rec.Value) {
			v := string(rec.Value)
			x.Value = &v
		} else {
			v := base64.StdEncoding.EncodeToString(rec.Value)
			x.ValueB64 = &v
		}
		out.Records = append(out.Records, x)
	}
	if more && len(recs) > 0 {
		next := string(recs[len(recs)-1].Key)
		out.Next = &next
	}
	if page != nil {
		asOf := positionText(page.AsOf)
		out.AsOf, out.Snapshot = &asOf, &page.ID
	}
	writeJSON(w, http.StatusOK, out)
}

// listing is a listing's answer; a page of a pinned snapshot adds the snapshot's id and
// the position it holds, every page the same (docs/contract.md §24.5).
type listing struct {
	Records  []record `json:"records"`
	Next     *string  `json:"next"`
	AsOf     *string  `json:"as_of,omitempty"`
	Snapshot *string  `json:"snapshot,omitempty"`
}

func (a *API) digest(w http.ResponseWriter, r *http.Request) {
	table, _, err := a.target(r, false)
	if err != nil {
		fail(w, err)
		return
	}
	count, sum, err := a.n.Digest(string(table))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"count": count, "hash": sum})
}

func (a *API) status(w http.ResponseWriter, _ *http.Request) {
	st, err := a.n.Status()
	if err != nil {
		fail(w, err)
		return
	}
	d := NewStatusDoc(st)
	d.SetTLS(a.n.TLS())
	ls, err := a.n.LockStatus()
	if err != nil {
		fail(w, err)
		return
	}
	d.Locks = NewLocksDoc(ls)
	d.Locks.Caller = a.locks.doc()
	ss, err := a.n.Snapshots()
	if err != nil {
		fail(w, err)
		return
	}
	d.Snapshots = NewSnapshotsDoc(ss)
	d.Feeds = a.feeds.doc()
	writeJSON(w, http.StatusOK, d)
}

func (a *API) lagHistory(w http.ResponseWriter, _ *http.Request) {
	h, err := a.n.LagHistory()
	if err != nil {
		fail(w, err)
		return
	}
	peers, err := a.n.PeerLagHistory()
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, NewLagDoc(h, peers))
}

func (a *API) addPeer(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r, 64<<10)
	if err != nil {
		fail(w, err)
		return
	}
	var p struct {
		Name string `json:"name"`
		URL  string `json:"url"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		fail(w, &apiError{http.StatusBadRequest, "bad-json", err.Error()})
		return
	}
	if !wire.ValidName(p.Name) {
		fail(w, &apiError{http.StatusBadRequest, "bad-peer", "a peer needs a valid name"})
		return
	}
	var bad *node.PeerURLError
	switch err := a.n.AddPeer(node.Peer{Name: p.Name, URL: p.URL}); {
	case errors.As(err, &bad):
		fail(w, &apiError{http.StatusBadRequest, "bad-peer", bad.Error()})
	case errors.Is(err, node.ErrPeerExists):
		fail(w, &apiError{http.StatusConflict, "peer-exists", "peer " + p.Name + " is configured already"})
	case errors.Is(err, node.ErrLeafPeers):
		fail(w, leafPeers())
	case err != nil:
		fail(w, err)
	default:
		writeJSON(w, http.StatusCreated, map[string]string{"name": p.Name, "url": p.URL})
	}
}

// peerBody is the body of PUT /v1/peers/{name} (docs/contract.md §6.2): the peer's URL
// and this node's settings for the link to it. Mode is a pointer so that an empty one is
// refused, not taken for one left out.
type peerBody struct {
	URL     string   `json:"url"`
	Mode    *string  `json:"mode"`
	Exclude []string `json:"exclude"`
}

// peerAnswer is its answer: the peer as this node now dials it, its link's settings as
// kept (the tables sorted).
type peerAnswer struct {
	Name    string   `json:"name"`
	URL     string   `json:"url"`
	Mode    string   `json:"mode"`
	Exclude []string `json:"exclude"`
}

// setPeer adds a peer or changes one, with this node's settings for the link to it, on
// its connection at once (docs/design.md §24.6). The body says the whole settings: a mode
// left out is both, an exclude left out excludes nothing; a url left out keeps the one
// configured. The settings are checked here first, each rule with its own code: the mode,
// then the number of tables, then each table in the order given.
func (a *API) setPeer(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	body, err := readBody(w, r, 64<<10)
	if err != nil {
		fail(w, err)
		return
	}
	var p peerBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		fail(w, &apiError{http.StatusBadRequest, "bad-json", err.Error()})
		return
	}
	if dec.More() {
		fail(w, &apiError{http.StatusBadRequest, "bad-json", "the body has more than one JSON value"})
		return
	}
	if !wire.ValidName(name) {
		fail(w, &apiError{http.StatusBadRequest, "bad-peer", fmt.Sprintf("peer name %q is not 1 to 64 of [A-Za-z0-9_.-]", name)})
		return
	}
	var ls replica.LinkSettings
	if p.Mode != nil {
		mode, ok := wire.ParseLinkMode(*p.Mode)
		if !ok {
			fail(w, &apiError{http.StatusBadRequest, "bad-mode", fmt.Sprintf("mode %q is none of receive, send and both", *p.Mode)})
			return
		}
		ls.Mode = mode
	}
	if len(p.Exclude) > wire.MaxLinkTables {
		fail(w, &apiError{http.StatusBadRequest, "too-many-tables",
			fmt.Sprintf("exclude names %d tables; a link excludes at most %d", len(p.Exclude), wire.MaxLinkTables)})
		return
	}
	seen := map[string]bool{}
	for _, t := range p.Exclude {
		switch {
		case !wire.ValidName(t):
			fail(w, &apiError{http.StatusBadRequest, "bad-table", fmt.Sprintf("exclude: table %q is not 1 to 64 of [A-Za-z0-9_.-]", t)})
			return
		case seen[t]:
			fail(w, &apiError{http.StatusBadRequest, "bad-table", fmt.Sprintf("exclude: table %q is named twice", t)})
			return
		}
		seen[t] = true
		ls.Exclude = append(ls.Exclude, []byte(t))
	}
	var bad *node.PeerURLError
	dialed, added, err := a.n.SetPeer(node.Peer{Name: name, URL: p.URL}, ls)
	switch {
	case errors.As(err, &bad):
		fail(w, &apiError{http.StatusBadRequest, "bad-peer", bad.Error()})
		return
	case errors.Is(err, node.ErrPeerURLNeeded):
		fail(w, &apiError{http.StatusBadRequest, "bad-peer", "peer " + name + " is not configured: adding it needs a url"})
		return
	case errors.Is(err, node.ErrLeafPeers):
		fail(w, leafPeers())
		return
	case err != nil:
		fail(w, err)
		return
	}
	ans := peerAnswer{Name: name, URL: dialed.URL, Mode: ls.Mode.String(), Exclude: append([]string{}, slices.Sorted(maps.Keys(seen))...)}
	status := http.StatusOK
	if added {
		status = http.StatusCreated
	}
	writeJSON(w, status, ans)
}

// leafPeers is the answer to a peer added to or changed on a leaf (docs/contract.md
// §26.1): a leaf dials its hub, given by --hub, and nothing else.
func leafPeers() *apiError {
	return &apiError{http.StatusBadRequest, "bad-peer", "this node is a leaf (--hub): it dials only its hub and takes no peers"}
}

func (a *API) removePeer(w http.ResponseWriter, r *http.Request) {
	switch err := a.n.RemovePeer(r.PathValue("name")); {
	case errors.Is(err, node.ErrPeerUnknown):
		fail(w, &apiError{http.StatusNotFound, "not-found", "no peer " + r.PathValue("name")})
	case err != nil:
		fail(w, err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}
