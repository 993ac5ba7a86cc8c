package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"plait/protocol/clustermap"
	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/apitoken"
)

// The cluster map's endpoints (docs/contract.md §22.2): the map this node holds or another
// node holds, and publishing one. The decisions are the replica's (replica.PublishMap,
// replica.Ask); the API reads the body, chooses the node, and says the answers in HTTP.

// mapDoc answers a map document: its canonical JSON as the node holds it, with the newline
// every JSON answer of the API ends with.
func mapDoc(w http.ResponseWriter, doc []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(doc[:len(doc):len(doc)], '\n')) // an error means the client went away
}

// noMap is the document of a node that holds no map.
var noMap = []byte(`{"generation":0}`)

func (a *API) getMap(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("node") {
		st, err := a.n.ClusterMap()
		if err != nil {
			fail(w, err)
			return
		}
		mapDoc(w, st.Document)
		return
	}
	target := q.Get("node")
	if !wire.ValidName(target) {
		fail(w, &apiError{http.StatusBadRequest, clustermap.CodeBadName, fmt.Sprintf("node %q: a node name is 1 to 64 of [A-Za-z0-9_.-]", cut(target))})
		return
	}
	ans, err := a.n.Ask(r.Context(), target, "map", a.callerScope(r).String(), nil)
	if err != nil {
		fail(w, err)
		return
	}
	if ans.Code != "" {
		fail(w, requestError(ans))
		return
	}
	m, err := wire.DecodeMapAnswer(ans.Body)
	switch {
	case err != nil:
		fail(w, &apiError{http.StatusBadGateway, codeBadAnswer, "node " + target + " answered a map that does not decode: " + err.Error()})
	case m == nil:
		mapDoc(w, noMap)
	default:
		mapDoc(w, m.Document)
	}
}

func (a *API) putMap(w http.ResponseWriter, r *http.Request) {
	// One byte past the bound tells a document over it from one at it, without reading
	// more of a body that is refused anyway.
	doc, err := io.ReadAll(io.LimitReader(r.Body, clustermap.MaxBytes+1))
	if err != nil {
		fail(w, &apiError{http.StatusBadRequest, clustermap.CodeBadJSON, "reading the body: " + err.Error()})
		return
	}
	if len(doc) > clustermap.MaxBytes {
		fail(w, &apiError{http.StatusBadRequest, clustermap.CodeMapTooLarge, fmt.Sprintf("the body is over %d bytes", clustermap.MaxBytes)})
		return
	}
	st, err := a.n.PublishMap(doc)
	var ce *clustermap.Error
	var we *wire.Error
	switch {
	case errors.As(err, &ce) && (ce.Code == clustermap.CodeUnfenced || ce.Code == clustermap.CodeLeafWindowLowered):
		// The document is valid; it is refused for the map the node holds, as a stale
		// generation is.
		fail(w, &apiError{http.StatusConflict, ce.Code, ce.Message})
	case errors.As(err, &ce) && ce.Code == clustermap.CodeClusterNotV4:
		// A map that would turn locks on, while a member it lists is not known to speak
		// version 4: the whole-cluster gate (docs/design.md §23.3), until it does.
		fail(w, &apiError{http.StatusServiceUnavailable, ce.Code, ce.Message})
	case errors.As(err, &ce):
		fail(w, &apiError{http.StatusBadRequest, ce.Code, ce.Message})
	case errors.As(err, &we) && we.Code == replica.CodeStaleGeneration:
		fail(w, &apiError{http.StatusConflict, string(we.Code), we.Message})
	case err != nil:
		fail(w, err)
	default:
		mapDoc(w, st.Document)
	}
}

// codeBadAnswer answers a request whose target answered what this node cannot decode.
const codeBadAnswer = "bad-answer"

// requestStatus is the HTTP status of each refusal of a request between nodes
// (docs/contract.md §22.7): the way to the node failed (502), it took too long (504), a
// connection on the way is full for now (503), or the node refused the caller's scope
// (403).
var requestStatus = map[wire.Code]int{
	replica.CodeNoRoute:         http.StatusBadGateway,
	replica.CodeUnreachable:     http.StatusBadGateway,
	replica.CodeRequestTimeout:  http.StatusGatewayTimeout,
	replica.CodeTooManyRequests: http.StatusServiceUnavailable,
	replica.CodeForbidden:       http.StatusForbidden,
	replica.CodeUnknownKind:     http.StatusBadGateway,
	wire.CodeInternal:           http.StatusInternalServerError,
}

// requestError is the API's error for a refused request: its code and message as the
// node that refused it gave them. A code this build does not know (a newer node's) is the
// other node's failure: 502.
func requestError(ans replica.Answer) *apiError {
	status, ok := requestStatus[ans.Code]
	if !ok {
		status = http.StatusBadGateway
	}
	return &apiError{status, string(ans.Code), ans.Message}
}

// callerScope is the scope of the request's bearer token, which ServeHTTP checked; every
// scope's without tokens, where the API is open (docs/contract.md §6.4). A request to
// another node carries it, and that node checks it as its own API would.
func (a *API) callerScope(r *http.Request) apitoken.Scope {
	if have, forwarded := forwardedScope(r.Context()); forwarded {
		return have // the scope a request forwarded here carries (forward.go)
	}
	if a.tokens == nil {
		return apitoken.Admin
	}
	scope, why := a.authenticate(r)
	if why != "" { // ServeHTTP let the request through, so a reload dropped its token since
		return 0
	}
	return scope
}

// cut is a name as an error message quotes it: at most 100 bytes, as the node's own
// messages cut what a client sent.
func cut(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
