package wire

import (
	"strconv"
)

// The bodies of a request of kind api (SPEC.md, "Version 4"; docs/design.md §24.5): an HTTP
// API request for a table the asking node does not carry, which a carrier runs through its
// own API and answers. They travel in REQUEST's and RESPONSE's body, so the peer's frame
// limit bounds them; nothing else does.

// APIRequest is the body of a request of kind api: the HTTP method, the request's path as
// sent (percent-encoded), its query (without the "?"), the body's content type and the body.
type APIRequest struct {
	Method      string `cbor:"1,keyasint"`
	Path        string `cbor:"2,keyasint"`
	Query       string `cbor:"3,keyasint,omitempty"`
	ContentType string `cbor:"4,keyasint,omitempty"`
	Body        []byte `cbor:"5,keyasint,omitempty"`
	Unknown
}

// APIAnswer is the body of a successful answer to a request of kind api: the carrier's
// HTTP status, content type and body, as its API answered.
type APIAnswer struct {
	Status      uint64 `cbor:"1,keyasint"`
	ContentType string `cbor:"2,keyasint,omitempty"`
	Body        []byte `cbor:"3,keyasint,omitempty"`
	Unknown
}

const (
	// MaxAPITarget bounds an api request's path and query together, in bytes: the API's
	// own bound on a request's URL (docs/contract.md §6.1).
	MaxAPITarget = 16 << 10
	// MaxAPIContentType bounds a content type of an api request or answer, in bytes.
	MaxAPIContentType = 256
)

// Validate: a method of GET, PUT, DELETE or POST; a path that starts with "/", its path and
// query at most MaxAPITarget bytes together; a content type of at most MaxAPIContentType.
// Whether the path is an endpoint, and the body one it takes, is the carrier API's to say.
func (a *APIRequest) Validate() error {
	switch {
	case a.Method != "GET" && a.Method != "PUT" && a.Method != "DELETE" && a.Method != "POST":
		return badField("api request method " + strconv.Quote(cutText(a.Method)) + " is none of GET, PUT, DELETE and POST")
	case len(a.Path) == 0 || a.Path[0] != '/':
		return badField("api request path " + strconv.Quote(cutText(a.Path)) + " does not start with /")
	case len(a.Path)+len(a.Query) > MaxAPITarget:
		return badField("api request path and query of " + strconv.Itoa(len(a.Path)+len(a.Query)) + " bytes exceed " + strconv.Itoa(MaxAPITarget))
	case len(a.ContentType) > MaxAPIContentType:
		return badField("api request content type of " + strconv.Itoa(len(a.ContentType)) + " bytes exceeds " + strconv.Itoa(MaxAPIContentType))
	}
	return nil
}

// Validate: a status of 100 to 599; a content type of at most MaxAPIContentType bytes.
func (a *APIAnswer) Validate() error {
	switch {
	case a.Status < 100 || a.Status > 599:
		return badField("api answer status " + strconv.FormatUint(a.Status, 10) + " is outside 100..599")
	case len(a.ContentType) > MaxAPIContentType:
		return badField("api answer content type of " + strconv.Itoa(len(a.ContentType)) + " bytes exceeds " + strconv.Itoa(MaxAPIContentType))
	}
	return nil
}

// AppendAPIRequest appends a's encoding, checked as DecodeAPIRequest checks it.
func AppendAPIRequest(dst []byte, a *APIRequest) ([]byte, error) {
	if err := a.Validate(); err != nil {
		return dst, err
	}
	return appendMap(dst, a, a.Extra)
}

// DecodeAPIRequest decodes and checks the body of a request of kind api: a control body's
// CBOR rules (Core Deterministic Encoding, no tags), keys 1 and 2 required, later keys
// kept.
func DecodeAPIRequest(b []byte) (*APIRequest, error) {
	a := new(APIRequest)
	extra, err := decodeMap(b, a, 5, 1, 2)
	if err != nil {
		return nil, err
	}
	a.Extra = extra
	return a, a.Validate()
}

// AppendAPIAnswer appends a's encoding, checked as DecodeAPIAnswer checks it.
func AppendAPIAnswer(dst []byte, a *APIAnswer) ([]byte, error) {
	if err := a.Validate(); err != nil {
		return dst, err
	}
	return appendMap(dst, a, a.Extra)
}

// DecodeAPIAnswer decodes and checks the body of an answer to a request of kind api, key 1
// required.
func DecodeAPIAnswer(b []byte) (*APIAnswer, error) {
	a := new(APIAnswer)
	extra, err := decodeMap(b, a, 3, 1)
	if err != nil {
		return nil, err
	}
	a.Extra = extra
	return a, a.Validate()
}

// cutText is a client's text as a message quotes it: at most 64 bytes.
func cutText(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
