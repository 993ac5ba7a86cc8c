package clustermap

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Canonical returns the canonical form of a map's document: doc decoded by encoding/json
// with numbers kept as written, and encoded again with object keys sorted by their bytes,
// no insignificant space and no HTML escaping. Two documents are the same map when their
// canonical forms are equal (docs/design.md §23.1).
//
// doc must be exactly one JSON object in UTF-8, with nothing but space after it, no key
// twice in any one object, and at most MaxBytes bytes, before and in canonical form; the
// error, otherwise, is an *Error of code bad-json or map-too-large. Only the form is
// checked here, not the fields: Parse and Decode check those.
func Canonical(doc []byte) ([]byte, error) {
	_, c, err := canonical(doc)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// canonical decodes doc into a tree of map[string]any, []any, string, json.Number, bool
// and nil, and returns it with its canonical bytes.
func canonical(doc []byte) (map[string]any, []byte, *Error) {
	if len(doc) > MaxBytes {
		return nil, nil, tooLarge(len(doc))
	}
	// encoding/json would take invalid UTF-8 and write U+FFFD in its place: two different
	// documents would become one map without anyone having written that map.
	if !utf8.Valid(doc) {
		return nil, nil, errorf(CodeBadJSON, "the document is not valid UTF-8")
	}
	if len(bytes.Trim(doc, " \t\r\n")) == 0 { // JSON's space, not Unicode's
		return nil, nil, errorf(CodeBadJSON, "the document is empty")
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, syntaxError(err)
	}
	if tok != json.Delim('{') {
		return nil, nil, errorf(CodeBadJSON, "the document is not a JSON object")
	}
	obj, e := readObject(dec, nil)
	if e != nil {
		return nil, nil, e
	}
	switch _, err := dec.Token(); {
	case err == io.EOF:
	case err != nil:
		return nil, nil, errorf(CodeBadJSON, "after the object: %v", err)
	default:
		return nil, nil, errorf(CodeBadJSON, "the document holds more than one JSON value")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		// The tree holds only what the decoder made, which encodes; kept as a value all
		// the same.
		return nil, nil, errorf(CodeBadJSON, "encoding the canonical form: %v", err)
	}
	c := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	// The canonical form can be longer than the document: encoding/json writes U+2028 and
	// U+2029 as escapes. A map is bounded in the form every node stores and sends.
	if len(c) > MaxBytes {
		return nil, nil, errorf(CodeMapTooLarge, "the document is %d bytes in canonical form, over the %d allowed", len(c), MaxBytes)
	}
	return obj, c, nil
}

func syntaxError(err error) *Error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return errorf(CodeBadJSON, "the document ends before its JSON object does")
	}
	return errorf(CodeBadJSON, "not JSON: %v", err)
}

// path is where a value is in the document, for messages: made into a string only for
// one, since building it at every value would cost the square of the depth. The string
// is bounded: the last 8 steps, each key cut to 40 bytes.
type path struct {
	parent  *path
	key     string
	index   int
	isIndex bool
}

func (p *path) String() string {
	if p == nil {
		return "the document"
	}
	var parts []*path
	for ; p != nil && len(parts) < 8; p = p.parent {
		parts = append(parts, p)
	}
	var b strings.Builder
	if p != nil {
		b.WriteString("...")
	}
	for i := len(parts) - 1; i >= 0; i-- {
		q := parts[i]
		if q.isIndex {
			b.WriteString("[" + strconv.Itoa(q.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		if len(q.key) > 40 {
			b.WriteString(strings.ToValidUTF8(q.key[:40], "") + "...")
		} else {
			b.WriteString(q.key)
		}
	}
	return b.String()
}

// readObject reads the members of an object whose '{' was read, up to its '}'. at is
// where the object is (nil: the document).
func readObject(dec *json.Decoder, at *path) (map[string]any, *Error) {
	obj := map[string]any{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxError(err)
		}
		if tok == json.Delim('}') {
			return obj, nil
		}
		key, ok := tok.(string)
		if !ok { // the decoder gives a string or an error where a key belongs; kept as a value
			return nil, errorf(CodeBadJSON, "%s: a key that is not a string", at)
		}
		if _, dup := obj[key]; dup {
			return nil, errorf(CodeBadJSON, "%s: the key %s appears twice", at, quoteShort(key))
		}
		tok, err = dec.Token()
		if err != nil {
			return nil, syntaxError(err)
		}
		v, e := readValue(dec, tok, &path{parent: at, key: key})
		if e != nil {
			return nil, e
		}
		obj[key] = v
	}
}

// readValue reads the value that starts with tok.
func readValue(dec *json.Decoder, tok json.Token, at *path) (any, *Error) {
	switch tok {
	case json.Delim('{'):
		return readObject(dec, at)
	case json.Delim('['):
		// Not nil: encoding/json writes a nil slice as null.
		arr := make([]any, 0)
		for i := 0; ; i++ {
			tok, err := dec.Token()
			if err != nil {
				return nil, syntaxError(err)
			}
			if tok == json.Delim(']') {
				return arr, nil
			}
			v, e := readValue(dec, tok, &path{parent: at, index: i, isIndex: true})
			if e != nil {
				return nil, e
			}
			arr = append(arr, v)
		}
	}
	switch tok.(type) {
	case string, json.Number, bool, nil:
		return tok, nil
	}
	return nil, errorf(CodeBadJSON, "%s: an unexpected %v", at, tok) // a closing delimiter the decoder let through
}
