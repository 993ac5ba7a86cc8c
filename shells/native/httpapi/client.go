package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// The API's client side that package client (plait/client) does not cover, for this
// package's tests: one call of an endpoint with a token, its errors, and ReadStatus, the
// whole status document as StatusDoc. Programs, the commands and the harness call a node
// through package client.

// ReadOption is an option of a call of the API (Call, ReadStatus, ReadClusterMap, ...).
type ReadOption func(*readConfig)

type readConfig struct {
	token string
}

// SendToken sends token as the request's bearer token, for a node that requires tokens
// (docs/contract.md §6.4); an empty token sends none.
func SendToken(token string) ReadOption { return func(c *readConfig) { c.token = token } }

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
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
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
