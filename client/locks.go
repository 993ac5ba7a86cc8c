package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Lease is a lock's grant (docs/contract.md §22.9): its token, and how long the node
// takes writes under it from when the call was sent.
type Lease struct {
	Token     string
	ExpiresIn time.Duration
}

// lockRetryCodes are a lock call's: each says the home did nothing of it (§6.3: not
// granted yet, or the request was not sent on) and to retry later. Not unreachable or
// request-timeout: the request reached the home, or may have, and an acquire may have
// granted a lease. Not lock-held: waiting is the acquire's wait_ms, the caller's choice.
var lockRetryCodes = []error{ErrQuarantined, ErrMovePending, ErrTooManyLeases, ErrTooManyWaiters,
	ErrTooManyConfirms, ErrTooManyRequests, ErrNoRoute}

// AcquireLock asks for a lease of key in table for ttl, waiting at most wait at the key's
// home while another lease holds it (POST /v1/tables/{t}/locks/{key}). Another's lease
// past wait is ErrLockHeld, whose *Error.RetryAfter says when it ends at the latest.
func (c *Client) AcquireLock(ctx context.Context, table string, key []byte, ttl, wait time.Duration) (Lease, error) {
	cl := c.lockCall(http.MethodPost, table, key, "", map[string]int64{"ttl_ms": ttl.Milliseconds(), "wait_ms": wait.Milliseconds()})
	var ans struct {
		Token       string `json:"token"`
		ExpiresInMS int64  `json:"expires_in_ms"`
	}
	_, body, err := c.do(ctx, cl)
	if err == nil {
		err = decode(cl, body, &ans)
	}
	return Lease{Token: ans.Token, ExpiresIn: time.Duration(ans.ExpiresInMS) * time.Millisecond}, err
}

// RenewLock runs the lease of token for ttl from now and answers how long the node takes
// writes under it (PUT). A lease that is no longer the key's is ErrLockLost.
func (c *Client) RenewLock(ctx context.Context, table string, key []byte, token string, ttl time.Duration) (time.Duration, error) {
	cl := c.lockCall(http.MethodPut, table, key, token, map[string]int64{"ttl_ms": ttl.Milliseconds()})
	var ans struct {
		ExpiresInMS int64 `json:"expires_in_ms"`
	}
	_, body, err := c.do(ctx, cl)
	if err == nil {
		err = decode(cl, body, &ans)
	}
	return time.Duration(ans.ExpiresInMS) * time.Millisecond, err
}

// ReleaseLock ends the lease of token (DELETE); the next waiter, if any, is granted.
func (c *Client) ReleaseLock(ctx context.Context, table string, key []byte, token string) error {
	_, _, err := c.do(ctx, c.lockCall(http.MethodDelete, table, key, token, nil))
	return err
}

func (c *Client) lockCall(method, table string, key []byte, token string, doc map[string]int64) *call {
	cl := c.newCall(method, tablePath(table)+"/locks/"+url.PathEscape(string(key)), write, nil)
	cl.retryCodes, cl.limit = lockRetryCodes, 4<<10
	if doc != nil {
		cl.body, _ = json.Marshal(doc)
	}
	if token != "" {
		cl.header.Set("Plait-Lock", token)
	}
	return cl
}

// ClusterMap reads the cluster map the node holds (GET /v1/cluster/map): its canonical
// form (docs/contract.md §22.1), `{"generation":0}` before any.
func (c *Client) ClusterMap(ctx context.Context) ([]byte, error) { return c.ClusterMapOf(ctx, "") }

// ClusterMapOf reads the map node holds, asked through this node (?node=NAME, §22.2);
// node "" is this node's own.
func (c *Client) ClusterMapOf(ctx context.Context, node string) ([]byte, error) {
	cl := c.newCall(http.MethodGet, "/v1/cluster/map", read, nil)
	cl.limit = maxMapAnswer
	if node != "" {
		cl.query = url.Values{"node": {node}}
	}
	_, body, err := c.do(ctx, cl)
	return body, err
}

// PutClusterMap publishes doc (PUT /v1/cluster/map, §22.2) and answers the node's map
// after. It is sent again as a read is: publishing the map the node holds again answers
// 200 with it, so a publish whose answer was lost is safely sent twice (and one that lost
// to another map meanwhile is ErrStaleGeneration, which is the truth).
func (c *Client) PutClusterMap(ctx context.Context, doc []byte) ([]byte, error) {
	cl := c.newCall(http.MethodPut, "/v1/cluster/map", read, nil)
	cl.body, cl.limit = doc, maxMapAnswer
	if cl.body == nil {
		cl.body = []byte{}
	}
	_, body, err := c.do(ctx, cl)
	return body, err
}

// maxMapAnswer is a map's bound in canonical form (64 KiB, §22.2) and its newline.
const maxMapAnswer = 64<<10 + 1
