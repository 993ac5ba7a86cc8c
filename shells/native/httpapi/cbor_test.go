package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// doCBOR posts body to url as application/cbor.
func doCBOR(t *testing.T, url string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/cbor", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// cborOf encodes v as CBOR for a test's body.
func cborOf(t *testing.T, v any) []byte {
	t.Helper()
	b, err := cbor.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type op = map[string]any

func ops(os ...op) map[string]any { return map[string]any{"ops": os} }

// TestCBORBatch: a batch body as application/cbor writes its ops as one transaction, with
// binary values as they are; it is refused exactly where a JSON body would be, with the
// same codes (docs/contract.md §6.3): malformed or trailing bytes, unknown, repeated or
// miscased fields, a tag, a key or value of the wrong CBOR type, no ops, an unknown op, a
// put without a value, a delete with one; and at the bounds of §6.1, taken at each limit
// and refused one byte past it.
func TestCBORBatch(t *testing.T) {
	a, _ := startNode(t, "A")
	batch := a.URL + "/v1/tables/t/batch"
	binary := []byte{0, 0xff, 'x'}
	s, body := doCBOR(t, batch, cborOf(t, ops(
		op{"op": "put", "key": []byte("k1"), "value": binary},
		op{"op": "put", "key": []byte("k2"), "value": []byte{}},
		op{"op": "delete", "key": []byte("k2")})))
	want(t, "a CBOR batch", s, body, 200, `{"origin_seq":1}`)
	if s, body = do(t, "GET", a.URL+"/v1/tables/t/records/k1", ""); s != 200 || body != string(binary) {
		t.Errorf("k1 reads back as %d %q, want %q", s, body, binary)
	}
	s, body = do(t, "GET", a.URL+"/v1/tables/t/records/k2", "")
	want(t, "a key put then deleted in one CBOR batch", s, body, 404, `"not-found"`)
	// A content type with parameters is still CBOR; the JSON body of §6.2 is still JSON.
	resp, err := http.Post(batch, "application/cbor; x=y", bytes.NewReader(cborOf(t, ops(op{"op": "delete", "key": []byte("k3")}))))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("application/cbor with a parameter: %d", resp.StatusCode)
	}
	s, body = do(t, "POST", batch, `{"ops":[{"op":"put","key":"k4","value":"text"}]}`)
	want(t, "a JSON batch beside CBOR ones", s, body, 200, `{"origin_seq":3}`)

	good := cborOf(t, ops(op{"op": "put", "key": []byte("k"), "value": []byte("v")}))
	for _, c := range []struct {
		what   string
		body   []byte
		status int
		code   string
	}{
		{"empty body", nil, 400, "bad-json"},
		{"truncated", good[:len(good)-1], 400, "bad-json"},
		{"trailing bytes", append(append([]byte{}, good...), 0x00), 400, "bad-json"},
		{"JSON sent as CBOR", []byte(`{"ops":[]}`), 400, "bad-json"},
		{"not a map", cborOf(t, []any{1}), 400, "bad-json"},
		{"unknown field", cborOf(t, ops(op{"op": "put", "key": []byte("k"), "value": []byte("v"), "x": 1})), 400, "bad-json"},
		{"unknown top-level field", cborOf(t, map[string]any{"ops": []op{{"op": "delete", "key": []byte("k")}}, "x": 1}), 400, "bad-json"},
		{"field in another case", cborOf(t, map[string]any{"OPS": []op{{"op": "delete", "key": []byte("k")}}}), 400, "bad-json"},
		// {"ops": [{"op": "delete", "op": "delete", "key": h'6b'}]}, the field op twice
		{"repeated field", []byte("\xa1\x63ops\x81\xa3\x62op\x66delete\x62op\x66delete\x63key\x41k"), 400, "bad-json"},
		{"a tag", cborOf(t, cbor.Tag{Number: 55799, Content: ops(op{"op": "delete", "key": []byte("k")})}), 400, "bad-json"},
		{"a text key", cborOf(t, ops(op{"op": "delete", "key": "k"})), 400, "bad-json"},
		{"a text value", cborOf(t, ops(op{"op": "put", "key": []byte("k"), "value": "v"})), 400, "bad-json"},
		{"invalid UTF-8 in op", cborOf(t, ops(op{"op": string([]byte{0xff}), "key": []byte("k")})), 400, "bad-json"},
		{"no ops", cborOf(t, ops()), 400, "bad-json"},
		{"ops absent", cborOf(t, map[string]any{}), 400, "bad-json"},
		{"unknown op", cborOf(t, ops(op{"op": "upsert", "key": []byte("k"), "value": []byte("v")})), 400, "bad-op"},
		{"a put without a value", cborOf(t, ops(op{"op": "put", "key": []byte("k")})), 400, "bad-json"},
		{"a delete with a value", cborOf(t, ops(op{"op": "delete", "key": []byte("k"), "value": []byte("v")})), 400, "bad-json"},
		{"empty key", cborOf(t, ops(op{"op": "delete", "key": []byte{}})), 400, "bad-key"},
		{"no key", cborOf(t, ops(op{"op": "delete"})), 400, "bad-key"},
		{"key of 1025", cborOf(t, ops(op{"op": "delete", "key": bytes.Repeat([]byte("k"), 1025)})), 400, "bad-key"},
		{"value of 1 MiB + 1", cborOf(t, ops(op{"op": "put", "key": []byte("k"), "value": make([]byte, 1<<20+1)})), 413, "too-large"},
		{"a transaction over 8 MiB", nineMiBCBOR(t), 413, "too-large"},
	} {
		s, body := doCBOR(t, batch, c.body)
		want(t, c.what, s, body, c.status, `"code":"`+c.code+`"`)
	}
	// At the limits: taken.
	s, body = doCBOR(t, batch, cborOf(t, ops(op{"op": "put", "key": bytes.Repeat([]byte("k"), 1024), "value": make([]byte, 1<<20)})))
	want(t, "key of 1024, value of 1 MiB", s, body, 200, `{"origin_seq":4}`)
}

// nineMiBCBOR is nine values of 1 MiB in one CBOR batch: within the body bound, over the
// transaction's.
func nineMiBCBOR(t *testing.T) []byte {
	var os []op
	for i := range 9 {
		os = append(os, op{"op": "put", "key": []byte{'k', byte('0' + i)}, "value": make([]byte, 1<<20)})
	}
	return cborOf(t, ops(os...))
}

// TestCBORBatchBodyLimit: a CBOR batch body of exactly the API's batch body bound is
// taken, and one of a byte more is refused with 413 too-large, as a JSON body is.
func TestCBORBatchBodyLimit(t *testing.T) {
	const limit = 4096
	a, _ := startNodeLimits(t, node.Config{Name: "A"}, httpapi.Limits{MaxBatchBody: limit})
	// sized returns a one-put body of exactly n bytes: the value fills what the rest leaves.
	sized := func(n int) []byte {
		for v := n; v >= 0; v-- {
			b := cborOf(t, ops(op{"op": "put", "key": []byte("k"), "value": make([]byte, v)}))
			if len(b) == n {
				return b
			}
		}
		t.Fatalf("no body of %d bytes", n)
		return nil
	}
	s, body := doCBOR(t, a.URL+"/v1/tables/t/batch", sized(limit))
	want(t, "a CBOR body at the bound", s, body, 200, `{"origin_seq":1}`)
	s, body = doCBOR(t, a.URL+"/v1/tables/t/batch", sized(limit+1))
	want(t, "a CBOR body one byte past the bound", s, body, 413, `"code":"too-large"`)
	s, body = do(t, "POST", a.URL+"/v1/tables/t/batch", `{"ops":[{"op":"put","key":"k","value":"`+strings.Repeat("v", limit)+`"}]}`)
	want(t, "a JSON body past the bound", s, body, 413, `"code":"too-large"`)
}
