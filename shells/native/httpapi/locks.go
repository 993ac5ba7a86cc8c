package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"plait/protocol/clustermap"
	"plait/protocol/lock"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// Locks (docs/contract.md §22.9, docs/design.md §25): the lock endpoints send their request
// to the key's home over the request exchange (node.Lock) and answer what it answered; a
// write under a token is checked live, written as a format-2 entry and acknowledged only
// once the home confirmed it; a read under a token waits until this node has applied the
// lease's fence.

// headerLock carries a lease's token on renew, release, writes and reads.
const headerLock = "Plait-Lock"

// The lock codes the API adds to the home's (lock.Code*, replica.Code*).
const (
	codeLockRequired = "lock-required" // a write without a token in a fenced table
	codeLockScope    = "lock-scope"    // a write under a token of more than the lock's key
	codeFenceTimeout = "fence-timeout" // a read under a token waited --lock-fence-wait
	// codeFenceUnreachable: a read under a token below its fence, which no peer can bring.
	codeFenceUnreachable = "fence-unreachable"
	fencePollInterval    = 5 * time.Millisecond
	maxLockRequestBytes  = 4 << 10
)

// lockStatus is the HTTP status of each refusal of a lock request; a code not here is the
// request exchange's (requestStatus).
var lockStatus = map[wire.Code]int{
	wire.Code(lock.CodeHeld):           http.StatusConflict,
	wire.Code(lock.CodeLost):           http.StatusConflict,
	wire.Code(lock.CodeBadTTL):         http.StatusBadRequest,
	wire.Code(lock.CodeBadWait):        http.StatusBadRequest,
	wire.Code(lock.CodeBadToken):       http.StatusBadRequest,
	wire.Code(lock.CodeQuarantined):    http.StatusServiceUnavailable,
	wire.Code(lock.CodeMovePending):    http.StatusServiceUnavailable,
	wire.Code(lock.CodeTooManyLeases):  http.StatusServiceUnavailable,
	wire.Code(lock.CodeTooManyWaiters): http.StatusServiceUnavailable,
	replica.CodeNoLockHomes:            http.StatusServiceUnavailable,
	replica.CodeClusterNotV4:           http.StatusServiceUnavailable,
	replica.CodeNotHome:                http.StatusServiceUnavailable,
	replica.CodeLockHomeOff:            http.StatusServiceUnavailable,
	replica.CodeTooManyConfirms:        http.StatusServiceUnavailable,
	replica.CodeLeafNoLocks:            http.StatusConflict, // a leaf takes no locks (docs/contract.md §26.4)
	wire.CodeBadArgument:               http.StatusBadRequest,
}

// lockCounters are the API's counts of lock requests as a caller (docs/contract.md §8.9).
type lockCounters struct {
	acquired, renewed, released atomic.Uint64
	refused                     codeCounts
	writes, writesLost          atomic.Uint64
	fenceWaits, fenceTimeouts   atomic.Uint64
}

// codeCounts counts refusals by code.
type codeCounts struct {
	mu sync.Mutex
	m  map[string]uint64
}

func (c *codeCounts) add(code string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]uint64{}
	}
	c.m[code]++
}

func (c *codeCounts) snapshot() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}

// lockError is the API's error for a lock request's refusal: Retry-After is set by
// lockFail when the home gave one.
type lockError struct {
	apiError
	retryAfter time.Duration
}

func (e *lockError) Error() string { return e.apiError.Error() }

// lockRefusal is the error of a refused lock answer.
func lockRefusal(ans replica.Answer) *lockError {
	e := &lockError{apiError: *requestError(ans)}
	if s, ok := lockStatus[ans.Code]; ok {
		e.status = s
	}
	if res, err := replica.ParseLockReply(ans.Body); err == nil {
		e.retryAfter = res.RetryAfter
	}
	return e
}

// lockFail answers a lock request's error, with Retry-After in whole seconds rounded up
// when the home said when to come back, and counts the refusal.
func (a *API) lockFail(w http.ResponseWriter, err error) {
	var le *lockError
	if errors.As(err, &le) {
		a.locks.refused.add(le.code)
		if le.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.FormatInt(int64((le.retryAfter+time.Second-1)/time.Second), 10))
		}
		fail(w, &le.apiError)
		return
	}
	var ae *apiError
	if errors.As(err, &ae) {
		a.locks.refused.add(ae.code)
	}
	fail(w, err)
}

// lockBody is the body of an acquire or a renew.
type lockBody struct {
	TTLMS  *int64 `json:"ttl_ms"`
	WaitMS *int64 `json:"wait_ms"`
}

func readLockBody(w http.ResponseWriter, r *http.Request) (ttl, wait time.Duration, err error) {
	b, err := readBody(w, r, maxLockRequestBytes)
	if err != nil {
		return 0, 0, err
	}
	var lb lockBody
	if len(bytes.TrimSpace(b)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&lb); err != nil {
			return 0, 0, &apiError{http.StatusBadRequest, "bad-json", "a lock body is {\"ttl_ms\":N,\"wait_ms\":M}: " + err.Error()}
		}
	}
	if lb.TTLMS == nil || *lb.TTLMS <= 0 || *lb.TTLMS > int64(lock.MaxTTLLimit/time.Millisecond) {
		return 0, 0, &apiError{http.StatusBadRequest, string(lock.CodeBadTTL), "ttl_ms is a number of milliseconds above 0 and at most the home's --lock-max-ttl"}
	}
	if lb.WaitMS != nil && (*lb.WaitMS < 0 || *lb.WaitMS > int64(lock.MaxWaitLimit/time.Millisecond)) {
		return 0, 0, &apiError{http.StatusBadRequest, string(lock.CodeBadWait), "wait_ms is a number of milliseconds from 0 to the home's --lock-max-wait"}
	}
	ttl = time.Duration(*lb.TTLMS) * time.Millisecond
	if lb.WaitMS != nil {
		wait = time.Duration(*lb.WaitMS) * time.Millisecond
	}
	return ttl, wait, nil
}

// lockToken reads the request's Plait-Lock header; ok false when it has none.
func lockToken(r *http.Request) (tok lock.Token, ok bool, err error) {
	text, ok := r.Header[headerLock]
	if !ok {
		return lock.Token{}, false, nil
	}
	if len(text) != 1 {
		return lock.Token{}, true, &apiError{http.StatusBadRequest, string(lock.CodeBadToken), "one Plait-Lock header, of 80 lowercase hex characters"}
	}
	tok, err = lock.ParseToken(text[0])
	if err != nil {
		return lock.Token{}, true, &apiError{http.StatusBadRequest, string(lock.CodeBadToken), "Plait-Lock: " + err.Error()}
	}
	return tok, true, nil
}

// lockAsk sends op to the key's home and reads a success's answer.
func (a *API) lockAsk(ctx context.Context, r *http.Request, op replica.LockOp) (replica.LockResult, error) {
	ans, err := a.n.Lock(ctx, a.callerScope(r).String(), op)
	if err != nil {
		return replica.LockResult{}, err
	}
	if ans.Code != "" {
		return replica.LockResult{}, lockRefusal(ans)
	}
	res, err := replica.ParseLockReply(ans.Body)
	if err != nil {
		return replica.LockResult{}, &apiError{http.StatusBadGateway, codeBadAnswer, "the key's home answered what does not decode: " + err.Error()}
	}
	return res, nil
}

// expiresIn is how long this node takes writes under tok: until its holder deadline, or
// ttl·(1−ρ) when it keeps none.
func (a *API) expiresIn(tok lock.Token, fallback time.Duration) int64 {
	if h, ok := a.n.HeldLease(tok); ok {
		return max(time.Until(h.Deadline).Milliseconds(), 0)
	}
	return fallback.Milliseconds()
}

func (a *API) lockAcquire(w http.ResponseWriter, r *http.Request) {
	table, key, err := a.target(r, true)
	if err != nil {
		a.lockFail(w, err)
		return
	}
	ttl, wait, err := readLockBody(w, r)
	if err != nil {
		a.lockFail(w, err)
		return
	}
	res, err := a.lockAsk(r.Context(), r, replica.LockOp{Kind: replica.KindLockAcquire, Table: string(table), Key: key, TTL: ttl, Wait: wait, Holder: a.n.Name()})
	if err != nil {
		a.lockFail(w, err)
		return
	}
	a.locks.acquired.Add(1)
	writeJSON(w, http.StatusOK, map[string]any{"token": res.Token.String(), "expires_in_ms": a.expiresIn(res.Token, res.ExpiresIn)})
}

// leaseTarget reads the table, the key and the Plait-Lock token of a request on a held
// lease (a renew, a release); it answers the refusal itself and reports false.
func (a *API) leaseTarget(w http.ResponseWriter, r *http.Request, what string) ([]byte, []byte, lock.Token, bool) {
	table, key, err := a.target(r, true)
	if err != nil {
		a.lockFail(w, err)
		return nil, nil, lock.Token{}, false
	}
	tok, ok, err := lockToken(r)
	if err == nil && !ok {
		err = &apiError{http.StatusBadRequest, string(lock.CodeBadToken), "a " + what + " carries the lease's token in Plait-Lock"}
	}
	if err != nil {
		a.lockFail(w, err)
		return nil, nil, lock.Token{}, false
	}
	return table, key, tok, true
}

func (a *API) lockRenew(w http.ResponseWriter, r *http.Request) {
	table, key, tok, ok := a.leaseTarget(w, r, "renew")
	if !ok {
		return
	}
	ttl, _, err := readLockBody(w, r)
	if err != nil {
		a.lockFail(w, err)
		return
	}
	res, err := a.lockAsk(r.Context(), r, replica.LockOp{Kind: replica.KindLockRenew, Table: string(table), Key: key, TTL: ttl, Token: tok})
	if err != nil {
		a.lockFail(w, err)
		return
	}
	a.locks.renewed.Add(1)
	writeJSON(w, http.StatusOK, map[string]any{"expires_in_ms": a.expiresIn(tok, res.ExpiresIn)})
}

func (a *API) lockRelease(w http.ResponseWriter, r *http.Request) {
	table, key, tok, ok := a.leaseTarget(w, r, "release")
	if !ok {
		return
	}
	if _, err := a.lockAsk(r.Context(), r, replica.LockOp{Kind: replica.KindLockRelease, Table: string(table), Key: key, Token: tok}); err != nil {
		a.lockFail(w, err)
		return
	}
	a.locks.released.Add(1)
	w.WriteHeader(http.StatusNoContent)
}

// live checks that tok is the live lease of table and key: by its holder deadline on the
// node that acquired it, else by asking the home (lock-check).
func (a *API) live(r *http.Request, tok lock.Token, table, key []byte) error {
	if h, ok := a.n.HeldLease(tok); ok {
		if h.Key.Table != string(table) || !bytes.Equal(h.Key.Key, key) {
			return &lockError{apiError: apiError{http.StatusConflict, string(lock.CodeLost), "the token is a lease of another key"}}
		}
		return nil
	}
	_, err := a.lockAsk(r.Context(), r, replica.LockOp{Kind: replica.KindLockCheck, Table: string(table), Key: key, Token: tok})
	return err
}

// lockedWrite writes ops under the request's token: every op of the lock's one key, the
// lease live, then written, then confirmed by the home (docs/design.md §25.6). A confirm
// the home refuses answers lock-lost, and the entry stays in the log.
func (a *API) lockedWrite(w http.ResponseWriter, r *http.Request, tok lock.Token, ops []wire.Op) {
	table, key := ops[0].Table, ops[0].Key
	for _, op := range ops[1:] {
		if !bytes.Equal(op.Table, table) || !bytes.Equal(op.Key, key) {
			a.lockFail(w, &apiError{http.StatusBadRequest, codeLockScope, "a write under a lock writes the lock's key alone"})
			return
		}
	}
	if err := a.live(r, tok, table, key); err != nil {
		a.lockFail(w, err)
		return
	}
	origin, seq, err := a.n.WriteTokened(r.Context(), tok, ops)
	if err != nil {
		// The replica refuses a token's write while a member is below version 4 (a map
		// listing one came after the grant): a refusal of a locked write, counted as the
		// caller's (docs/contract.md §8.9).
		var ce *clustermap.Error
		if errors.As(err, &ce) {
			a.locks.refused.add(ce.Code)
		}
		fail(w, err)
		return
	}
	a.locks.writes.Add(1)
	if _, err := a.lockAsk(r.Context(), r, replica.LockOp{Kind: replica.KindLockConfirm, Table: string(table), Key: key, Token: tok, Origin: origin, Seq: seq}); err != nil {
		var le *lockError
		if errors.As(err, &le) && le.code == string(lock.CodeLost) {
			a.locks.writesLost.Add(1)
		}
		a.lockFail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]uint64{"origin_seq": seq})
}

// awaitFence waits until this node has applied the fence of the lease tok of table and
// key: from the grant on the node that acquired it, else from the home (lock-fence). It
// answers fence-unreachable as soon as the replica says no connection can bring the fence
// (replica.FenceReach), fence-timeout after --lock-fence-wait.
func (a *API) awaitFence(r *http.Request, tok lock.Token, table, key []byte) error {
	h, ok := a.n.HeldLease(tok)
	fence := h.Fence
	if ok && (h.Key.Table != string(table) || !bytes.Equal(h.Key.Key, key)) {
		return &lockError{apiError: apiError{http.StatusConflict, string(lock.CodeLost), "the token is a lease of another key"}}
	}
	if !ok {
		res, err := a.lockAsk(r.Context(), r, replica.LockOp{Kind: replica.KindLockFence, Table: string(table), Key: key, Token: tok})
		if err != nil {
			return err
		}
		fence = res.Fence
	}
	deadline := time.Now().Add(a.limits.LockFenceWait)
	waited := false
	for {
		state, origin, err := a.n.FenceReach(fence)
		if err != nil {
			return err
		}
		switch state {
		case replica.FenceMet:
			return nil
		case replica.FenceUnreachable:
			// No connection can bring the fence's entries: waiting longer would only end in
			// fence-timeout, and never in a stale read (docs/design.md §25.7).
			return &apiError{http.StatusServiceUnavailable, codeFenceUnreachable, "this node is below the lease's fence in origin " + origin.String() +
				" and every peer it takes entries from has purged that origin past its position; read on the node that holds the lease, or retry once this node has taken a copy"}
		}
		if !waited {
			waited = true
			a.locks.fenceWaits.Add(1)
		}
		if !time.Now().Before(deadline) {
			a.locks.fenceTimeouts.Add(1)
			return &apiError{http.StatusServiceUnavailable, codeFenceTimeout, "this node has not applied the lease's fence within --lock-fence-wait (" + a.limits.LockFenceWait.String() + ")"}
		}
		select {
		case <-time.After(fencePollInterval):
		case <-r.Context().Done():
			return r.Context().Err()
		}
	}
}
