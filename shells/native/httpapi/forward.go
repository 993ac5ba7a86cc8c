package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/apitoken"
)

// Requests for a table this node does not carry (docs/design.md §24.5, docs/contract.md
// §23.4): every table endpoint sends such a request to a carrier, as a request of kind api
// (replica.Forward, wire.APIRequest), and answers what the carrier's API answered; a
// carrier runs the requests it is sent through its own API, with the scope they carry. The
// choice of the carrier and the counts are the replica's.

// The headers of forwarding: a client's refusal of it, and the node that forwarded an
// answer.
const (
	headerForward     = "Plait-Forward"
	headerForwardedBy = "Plait-Forwarded-By"
)

// The codes of forwarding (docs/contract.md §6.3, §23.4).
const (
	codeNoCarrier  = "no-carrier"
	codeNotCarried = "not-carried"
)

// forwardedKey marks the context of a request another node forwarded here: its value is
// the caller's scope, which the request carried.
type forwardedKey struct{}

// forwardedScope is the scope a request forwarded here carries; false for a request made
// here.
func forwardedScope(ctx context.Context) (apitoken.Scope, bool) {
	s, ok := ctx.Value(forwardedKey{}).(apitoken.Scope)
	return s, ok
}

// placed serves a table endpoint: h for a table this node carries (and for a name that is
// no table, which h refuses); otherwise the request goes to a carrier, or is answered
// not-carried when it is not to be forwarded. maxBody is the endpoint's bound on a body
// (0: it takes none), the same bound h applies.
func (a *API) placed(h http.HandlerFunc, maxBody func() int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		table := []byte(r.PathValue("t"))
		// A table this node was added to and has not filled: it takes writes, and its reads
		// go to a carrier that holds it (docs/contract.md §23.6).
		filling := r.Method == http.MethodGet && a.n.Filling(table)
		if !replica.ValidTable(table) || a.n.Carries(table) && !filling {
			h(w, r)
			return
		}
		// A request forwarded here is never forwarded again: the two nodes' maps differ,
		// and the asker learns the carriers this node knows.
		// A request under a lock is never forwarded either: its token would not travel,
		// and the write's confirm is this node's to ask (locks.go).
		_, locked := r.Header[headerLock]
		if _, forwarded := forwardedScope(r.Context()); forwarded || locked || strings.EqualFold(r.Header.Get(headerForward), "no") {
			a.notCarried(w, table)
			return
		}
		a.forward(w, r, table, maxBody())
	})
}

// carrierDoc is one carrier in a not-carried answer.
type carrierDoc struct {
	Name string `json:"name"`
	API  string `json:"api,omitempty"`
}

// notCarried answers 409 not-carried with the table's carriers.
func (a *API) notCarried(w http.ResponseWriter, table []byte) {
	carriers, err := a.n.NotCarried(table)
	if err != nil {
		fail(w, err)
		return
	}
	docs := make([]carrierDoc, len(carriers))
	names := make([]string, len(carriers))
	for i, c := range carriers {
		docs[i], names[i] = carrierDoc{c.Name, c.API}, c.Name
	}
	msg := fmt.Sprintf("this node (%s) does not carry table %s: its carriers are %s", a.n.Name(), table, strings.Join(names, ", "))
	writeJSON(w, http.StatusConflict, map[string]any{
		"error":    map[string]string{"code": codeNotCarried, "message": msg},
		"carriers": docs,
	})
}

// forward sends a request for table to a carrier and answers the carrier's answer.
func (a *API) forward(w http.ResponseWriter, r *http.Request, table []byte, maxBody int) {
	var body []byte
	if maxBody > 0 {
		var err error
		if body, err = readBody(w, r, maxBody); err != nil {
			fail(w, err)
			return
		}
	}
	enc, err := wire.AppendAPIRequest(nil, &wire.APIRequest{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
		ContentType: r.Header.Get("Content-Type"), Body: body})
	if err != nil {
		fail(w, &apiError{http.StatusBadRequest, string(wire.CodeBadArgument), "the request cannot be forwarded: " + err.Error()})
		return
	}
	carrier, ans, err := a.n.Forward(r.Context(), table, a.callerScope(r).String(), enc)
	switch {
	case err != nil:
		fail(w, err)
		return
	case carrier == "":
		fail(w, &apiError{http.StatusServiceUnavailable, codeNoCarrier, fmt.Sprintf("this node (%s) does not carry table %s and reaches none of its carriers", a.n.Name(), table)})
		return
	case replica.ForwardFoundNoCarrier(ans.Code):
		fail(w, &apiError{http.StatusServiceUnavailable, codeNoCarrier, fmt.Sprintf("the request for table %s to its carrier %s: %s: %s", table, carrier, ans.Code, ans.Message)})
		return
	case ans.Code == wire.CodeFrameTooLarge:
		fail(w, &apiError{http.StatusRequestEntityTooLarge, "too-large", fmt.Sprintf("forwarded to %s: %s", carrier, ans.Message)})
		return
	case ans.Code != "":
		fail(w, requestError(ans))
		return
	}
	got, err := wire.DecodeAPIAnswer(ans.Body)
	if err != nil {
		fail(w, &apiError{http.StatusBadGateway, codeBadAnswer, "carrier " + carrier + " answered what does not decode: " + err.Error()})
		return
	}
	w.Header().Set(headerForwardedBy, a.n.Name())
	out := got.Body
	if got.Status == http.StatusOK && r.Method != http.MethodGet && isJSON(got.ContentType) {
		// A write's answer names the node whose origin_seq it is: the carrier's.
		var doc map[string]json.RawMessage
		if json.Unmarshal(out, &doc) == nil && doc != nil {
			doc["origin"], _ = json.Marshal(carrier)
			writeJSON(w, http.StatusOK, doc)
			return
		}
	}
	if got.ContentType != "" {
		w.Header().Set("Content-Type", got.ContentType)
	}
	w.WriteHeader(int(got.Status))
	_, _ = w.Write(out) // an error means the client went away
}

// isJSON reports whether a content type is JSON.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// serveForwarded runs a request of kind api another node sent this one through this
// node's API, with the scope it carries, and answers the API's status, content type and
// body. It is node.APIHandler.
func (a *API) serveForwarded(ctx context.Context, scope string, body []byte) (wire.Code, string, []byte) {
	req, err := wire.DecodeAPIRequest(body)
	if err != nil {
		return wire.CodeBadArgument, "the api request does not decode: " + err.Error(), nil
	}
	have, ok := apitoken.ParseScope(scope)
	if !ok { // REQUEST's rule allows read, write and admin only
		return replica.CodeForbidden, "scope " + scope, nil
	}
	target := req.Path
	if req.Query != "" {
		target += "?" + req.Query
	}
	hr, err := http.NewRequestWithContext(context.WithValue(ctx, forwardedKey{}, have), req.Method, target, bytes.NewReader(req.Body))
	if err != nil {
		return wire.CodeBadArgument, "the api request: " + err.Error(), nil
	}
	hr.RequestURI = target
	if req.ContentType != "" {
		hr.Header.Set("Content-Type", req.ContentType)
	}
	rec := &recorder{header: http.Header{}}
	a.ServeHTTP(rec, hr)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	ct := rec.header.Get("Content-Type")
	if len(ct) > wire.MaxAPIContentType {
		ct = ""
	}
	ans, err := wire.AppendAPIAnswer(nil, &wire.APIAnswer{Status: uint64(rec.status), ContentType: ct, Body: rec.body.Bytes()})
	if err != nil {
		return wire.CodeInternal, "the api answer: " + err.Error(), nil
	}
	return "", "", ans
}

// recorder keeps what a handler answers: its header, status and body.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (rc *recorder) Header() http.Header { return rc.header }

func (rc *recorder) Write(b []byte) (int, error) {
	if rc.status == 0 {
		rc.status = http.StatusOK
	}
	return rc.body.Write(b)
}

func (rc *recorder) WriteHeader(status int) {
	if rc.status == 0 {
		rc.status = status
	}
}
