package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"plait/protocol/clustermap"
)

// The API's client side, for the clients in this repository (plait status, plait map, the
// cluster harness): one call of an endpoint, its token and scheme, and its errors.

// ReadOption is an option of a call of the API (Call, ReadStatus, ReadClusterMap, ...).
type ReadOption func(*readConfig)

type readConfig struct {
	token string
	https bool
	lock  string
}

// SendLock sends token in the Plait-Lock header: a lease's token, for the lock endpoints
// and the writes and reads under a lock (docs/contract.md §22.9).
func SendLock(token string) ReadOption { return func(c *readConfig) { c.lock = token } }

// SendToken sends token as the request's bearer token, for a node that requires tokens
// (docs/contract.md §6.4); an empty token sends none.
func SendToken(token string) ReadOption { return func(c *readConfig) { c.token = token } }

// UseHTTPS calls over https://; the client's transport says which certificates it trusts.
func UseHTTPS() ReadOption { return func(c *readConfig) { c.https = true } }

// APIError is an answer other than 200: its status, and the API's error when the body is
// one (docs/contract.md §6.3).
type APIError struct {
	Status     string // as the response says it: "409 Conflict"
	StatusCode int
	Code       string // "" when the body is not the API's error
	Message    string
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return e.Status
	}
	return e.Status + ": " + e.Code + ": " + e.Message
}

// Call sends method path to the node whose HTTP API is at addr (HOST:PORT), with body when
// it is not nil, and answers the body of a 200 answer, refused past limit bytes: a server
// that is not a plait node cannot make a client hold without bound. Any other answer is an
// *APIError.
func Call(client *http.Client, addr, method, path string, body []byte, limit int, opts ...ReadOption) ([]byte, error) {
	var c readConfig
	for _, o := range opts {
		o(&c)
	}
	scheme := "http://"
	if c.https {
		scheme = "https://"
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, scheme+addr+path, rd)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.lock != "" {
		req.Header.Set(headerLock, c.lock)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		ae := &APIError{Status: resp.Status, StatusCode: resp.StatusCode}
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e) == nil && e.Error.Code != "" {
			ae.Code, ae.Message = e.Error.Code, e.Error.Message
		}
		return nil, ae
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > limit {
		return nil, fmt.Errorf("the answer of %s %s is larger than %d bytes", method, path, limit)
	}
	return raw, nil
}

// maxMapAnswer bounds a map document a client takes: the canonical form's bound and the
// answer's newline.
const maxMapAnswer = clustermap.MaxBytes + 1

// ReadClusterMap reads GET /v1/cluster/map of the node at addr: the map it holds, or with
// node not empty the map node holds, asked through it (docs/contract.md §22.2).
func ReadClusterMap(client *http.Client, addr, node string, opts ...ReadOption) ([]byte, error) {
	path := "/v1/cluster/map"
	if node != "" {
		path += "?node=" + url.QueryEscape(node)
	}
	return Call(client, addr, http.MethodGet, path, nil, maxMapAnswer, opts...)
}

// PublishClusterMap publishes doc with PUT /v1/cluster/map on the node at addr and answers
// the node's map after.
func PublishClusterMap(client *http.Client, addr string, doc []byte, opts ...ReadOption) ([]byte, error) {
	if doc == nil {
		doc = []byte{} // an empty body is still a body: the node answers bad-json
	}
	return Call(client, addr, http.MethodPut, "/v1/cluster/map", doc, maxMapAnswer, opts...)
}

// LockGrant is a lock endpoint's answer: the lease's token (an acquire's) and how long this
// node takes writes under it.
type LockGrant struct {
	Token       string `json:"token,omitempty"`
	ExpiresInMS int64  `json:"expires_in_ms"`
}

// maxLockAnswer bounds a lock endpoint's answer a client takes.
const maxLockAnswer = 4 << 10

// Lock calls a lock endpoint of table and key on the node at addr: POST (acquire, token
// ""), PUT (renew) or DELETE (release, whose grant is empty), with ttl and wait.
func Lock(client *http.Client, addr, method, table, key, token string, ttl, wait time.Duration, opts ...ReadOption) (LockGrant, error) {
	var body []byte
	if method != http.MethodDelete {
		doc := map[string]int64{"ttl_ms": ttl.Milliseconds()}
		if method == http.MethodPost {
			doc["wait_ms"] = wait.Milliseconds()
		}
		body, _ = json.Marshal(doc)
	}
	if token != "" {
		opts = append(opts, SendLock(token))
	}
	raw, err := Call(client, addr, method, "/v1/tables/"+url.PathEscape(table)+"/locks/"+url.PathEscape(key), body, maxLockAnswer, opts...)
	if err != nil || method == http.MethodDelete {
		return LockGrant{}, err
	}
	var g LockGrant
	if err := json.Unmarshal(raw, &g); err != nil {
		return LockGrant{}, fmt.Errorf("the lock answer is not JSON: %w", err)
	}
	return g, nil
}
