package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// stdBatch is the batch decoder as encoding/json gives it: the reference jsonBatch, which
// decodes with goccy/go-json for speed, must agree with on every body.
func stdBatch(body []byte) ([]batchOp, error) {
	var req struct {
		Ops []batchOp `json:"ops"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	return req.Ops, err
}

// FuzzJSONBatchAgrees: jsonBatch takes exactly the bodies encoding/json takes (unknown
// fields, trailing data, nulls, escapes, invalid UTF-8, numbers where strings belong), and
// yields the same ops from them. `go test` runs the seeds below; `go test -fuzz
// FuzzJSONBatchAgrees ./shells/native/httpapi` looks for more.
func FuzzJSONBatchAgrees(f *testing.F) {
	for _, s := range []string{
		`{"ops":[{"op":"put","key":"k","value":"v"}]}`,
		`{"ops":[{"op":"put","key":"k","value_b64":"AAEC"}]}`,
		`{"ops":[{"op":"delete","key":"k"}]}`,
		`{"ops":[]}`, `{}`, `null`, `[]`, ``, `{"ops":null}`,
		`{"ops":[{"op":"put","key":"k","value":"v","x":1}]}`,
		`{"ops":[{"op":"put","key":"k","value":"v"}],"more":true}`,
		`{"ops":[{"op":"put","key":"k","value":"v"}]} trailing`,
		`{"ops":[{"op":"put","key":"k","value":null}]}`,
		`{"ops":[{"op":"put","key":1,"value":"v"}]}`,
		`{"ops":[{"op":"put","key":"k","value":"\u00e9\ud83d\ude00\n\"\\/"}]}`,
		"{\"ops\":[{\"op\":\"put\",\"key\":\"k\xff\",\"value\":\"\xc3\x28\"}]}",
		`{"ops":[{"op":"put","key":"k","value":"\ud800"}]}`,
		`{"OPS":[{"OP":"put","KEY":"k","VALUE":"v"}]}`,
		`{"ops":[{"op":"put","key":"k","value":"a","value":"b"}]}`,
		`{"ops":[{"op":"put","key":"k","value":"v"},]}`,
		`{"ops":[{"op":"put" "key":"k"}]}`,
		` {"ops" : [ {"op":"put","key":"","value":""} ] } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, werr := stdBatch(body)
		got, gerr := jsonBatch(body)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%q: encoding/json says %v, jsonBatch %v", body, werr, gerr)
		}
		if werr != nil {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d ops, encoding/json %d", body, len(got), len(want))
		}
		for i, o := range want {
			w := batchItem{op: o.Op, key: []byte(o.Key), hasValue: o.Value != nil || o.ValueB64 != nil}
			if o.Value != nil && o.ValueB64 == nil {
				w.value = []byte(*o.Value)
			}
			g := got[i]
			if g.op != w.op || !bytes.Equal(g.key, w.key) || g.hasValue != w.hasValue || o.ValueB64 == nil && !reflect.DeepEqual(g.value, w.value) && (len(g.value) != 0 || len(w.value) != 0) {
				t.Fatalf("%q: op %d is %+v; encoding/json gives %+v", body, i, g, w)
			}
		}
	})
}
