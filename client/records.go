package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
)

// Put writes value under key in table and answers the write's origin_seq: its sequence
// number in the node's origin log (docs/contract.md §6.1). Sent again only as §25 says.
func (c *Client) Put(ctx context.Context, table string, key, value []byte, opts ...CallOption) (uint64, error) {
	cl := c.newCall(http.MethodPut, recordPath(table, key), write, opts)
	cl.body, cl.retryCodes = value, writeRetryCodes
	if cl.body == nil {
		cl.body = []byte{}
	}
	cl.header.Set("Content-Type", "application/octet-stream")
	return c.writeSeq(ctx, cl)
}

// Delete writes a tombstone of key in table (also for a key that does not exist) and
// answers its origin_seq.
func (c *Client) Delete(ctx context.Context, table string, key []byte, opts ...CallOption) (uint64, error) {
	cl := c.newCall(http.MethodDelete, recordPath(table, key), write, opts)
	cl.retryCodes = writeRetryCodes
	return c.writeSeq(ctx, cl)
}

// Get reads the value of key in table; a missing or deleted key is ErrNotFound.
func (c *Client) Get(ctx context.Context, table string, key []byte, opts ...CallOption) ([]byte, error) {
	cl := c.newCall(http.MethodGet, recordPath(table, key), read, opts)
	cl.limit = 1<<20 + 1 // a value's bound (§6.1)
	_, body, err := c.do(ctx, cl)
	return body, err
}

// Op is one operation of a batch: a put (Delete false) of Value under Key, or a delete.
type Op struct {
	Delete bool
	Key    []byte
	Value  []byte
}

// PutOp is a put of value under key, for Batch.
func PutOp(key, value []byte) Op { return Op{Key: key, Value: value} }

// DeleteOp is a delete of key, for Batch.
func DeleteOp(key []byte) Op { return Op{Delete: true, Key: key} }

// Batch writes ops as one transaction in table and answers its origin_seq. The body is
// JSON while every key is UTF-8, and CBOR (docs/contract.md §6.2) when one is not: a JSON
// string cannot carry a key's other bytes.
func (c *Client) Batch(ctx context.Context, table string, ops []Op, opts ...CallOption) (uint64, error) {
	cl := c.newCall(http.MethodPost, tablePath(table)+"/batch", write, opts)
	cl.retryCodes = writeRetryCodes
	allUTF8 := true
	for _, op := range ops {
		allUTF8 = allUTF8 && utf8.Valid(op.Key)
	}
	if allUTF8 {
		cl.body = jsonBatch(ops)
	} else {
		cl.body = cborBatch(ops)
		cl.header.Set("Content-Type", "application/cbor")
	}
	return c.writeSeq(ctx, cl)
}

func jsonBatch(ops []Op) []byte {
	type jop struct {
		Op       string  `json:"op"`
		Key      string  `json:"key"`
		Value    *string `json:"value,omitempty"`
		ValueB64 *string `json:"value_b64,omitempty"`
	}
	doc := struct {
		Ops []jop `json:"ops"`
	}{Ops: make([]jop, 0, len(ops))}
	for _, op := range ops {
		j := jop{Op: "delete", Key: string(op.Key)}
		if !op.Delete {
			j.Op = "put"
			v := string(op.Value)
			if utf8.Valid(op.Value) {
				j.Value = &v
			} else {
				v = base64.StdEncoding.EncodeToString(op.Value)
				j.ValueB64 = &v
			}
		}
		doc.Ops = append(doc.Ops, j)
	}
	raw, _ := json.Marshal(doc) // strings and pointers to strings: it cannot fail
	return raw
}

// cborBatch is a batch as CBOR (RFC 8949): {"ops":[{"op":..., "key":h'..', "value":h'..'}]},
// keys and values as byte strings, so that any bytes travel as they are.
func cborBatch(ops []Op) []byte {
	type del struct {
		Op  string `cbor:"op"`
		Key []byte `cbor:"key"`
	}
	type put struct {
		Op    string `cbor:"op"`
		Key   []byte `cbor:"key"`
		Value []byte `cbor:"value"`
	}
	doc := struct {
		Ops []any `cbor:"ops"`
	}{Ops: make([]any, 0, len(ops))}
	for _, op := range ops {
		if op.Delete {
			doc.Ops = append(doc.Ops, del{Op: "delete", Key: op.Key})
			continue
		}
		// A put's value is a byte string even when empty (nil would encode as null).
		doc.Ops = append(doc.Ops, put{Op: "put", Key: op.Key, Value: append([]byte{}, op.Value...)})
	}
	raw, _ := cbor.Marshal(doc) // strings and byte strings: it cannot fail
	return raw
}

// writeSeq sends a write and answers its origin_seq.
func (c *Client) writeSeq(ctx context.Context, cl *call) (uint64, error) {
	_, body, err := c.do(ctx, cl)
	if err != nil {
		return 0, err
	}
	var ans struct {
		OriginSeq uint64 `json:"origin_seq"`
	}
	if err := decode(cl, body, &ans); err != nil {
		return 0, err
	}
	return ans.OriginSeq, nil
}

// Record is one live record of a listing.
type Record struct {
	Key   []byte
	Value []byte
}

// Page is one page of a listing.
type Page struct {
	Records []Record
	// Snapshot is the pinned snapshot's id every page was read from (docs/contract.md
	// §24.5); "" when the node does not pin listings: its pages were then read one by one
	// from the live table, and a write between two pages may show in one and not the other.
	Snapshot string
	// AsOf is the position of the node's applied entries the snapshot holds: a change feed
	// started there (Changes) delivers every change after the pages. "" without a snapshot.
	AsOf string
	// Next is the last key of this page when more follow; "" on the last page.
	Next string
}

// ListOptions selects a listing: the keys starting with Prefix, after the key After
// (exclusive), Limit records a page (0: the node's bound, 1000).
type ListOptions struct {
	Prefix, After string
	Limit         int
}

// List iterates over the pages of a listing of table, all of one pinned snapshot: the
// first asks ?snapshot=new, the later ones pass the snapshot's id and the previous page's
// Next (docs/contract.md §25.4). A node that answers the first page without a snapshot
// (one built before pinned listings) is paged the old way, each page from the live table:
// Page.Snapshot is then "". An error ends the iteration (a snapshot that expired between
// two pages is ErrSnapshotExpired: start again). Each page is a read, sent again as
// §25 says; a first page sent again may leave a snapshot on the node until its ttl.
func (c *Client) List(ctx context.Context, table string, o ListOptions, opts ...CallOption) iter.Seq2[*Page, error] {
	return func(yield func(*Page, error) bool) {
		after, snapshot, asOf, first := o.After, "", "", true
		for {
			cl := c.newCall(http.MethodGet, tablePath(table)+"/records", read, opts)
			cl.limit = 0 // a page is bounded by the API (§6.1): 1000 records
			q := url.Values{}
			if o.Prefix != "" {
				q.Set("prefix", o.Prefix)
			}
			if o.Limit > 0 {
				q.Set("limit", strconv.Itoa(o.Limit))
			}
			if !first || o.After != "" {
				q.Set("after", after)
			}
			switch {
			case first:
				q.Set("snapshot", "new")
			case snapshot != "":
				q.Set("snapshot", snapshot)
			}
			cl.query = q
			_, body, err := c.do(ctx, cl)
			if err != nil {
				yield(nil, err)
				return
			}
			var ans struct {
				Records []struct {
					Key      string  `json:"key"`
					Value    *string `json:"value"`
					ValueB64 *string `json:"value_b64"`
				} `json:"records"`
				Next     *string `json:"next"`
				Snapshot string  `json:"snapshot"`
				AsOf     string  `json:"as_of"`
			}
			if err := decode(cl, body, &ans); err != nil {
				yield(nil, err)
				return
			}
			if first {
				snapshot, asOf, first = ans.Snapshot, ans.AsOf, false
			}
			p := &Page{Snapshot: snapshot, AsOf: asOf, Records: make([]Record, 0, len(ans.Records))}
			for _, r := range ans.Records {
				rec := Record{Key: []byte(r.Key)}
				switch {
				case r.Value != nil:
					rec.Value = []byte(*r.Value)
				case r.ValueB64 != nil:
					if rec.Value, err = base64.StdEncoding.DecodeString(*r.ValueB64); err != nil {
						yield(nil, fmt.Errorf("GET %s: the value of %q: %w", cl.path, r.Key, err))
						return
					}
				default:
					yield(nil, fmt.Errorf("GET %s: the record %q has no value", cl.path, r.Key))
					return
				}
				p.Records = append(p.Records, rec)
			}
			if ans.Next != nil {
				p.Next = *ans.Next
			}
			if !yield(p, nil) || ans.Next == nil {
				return
			}
			if *ans.Next == after {
				yield(nil, errors.New("GET "+cl.path+": the node answered the same next key twice"))
				return
			}
			after = *ans.Next
		}
	}
}

// Digest is a table's digest (docs/contract.md §11): the count of live records and the
// hash over them, hex.
type Digest struct {
	Count uint64 `json:"count"`
	Hash  string `json:"hash"`
}

// Digest reads table's digest.
func (c *Client) Digest(ctx context.Context, table string, opts ...CallOption) (Digest, error) {
	cl := c.newCall(http.MethodGet, tablePath(table)+"/digest", read, opts)
	var d Digest
	_, body, err := c.do(ctx, cl)
	if err == nil {
		err = decode(cl, body, &d)
	}
	return d, err
}

// recordPath is /v1/tables/{t}/records/{key}, both escaped: a key is any bytes.
func recordPath(table string, key []byte) string {
	return tablePath(table) + "/records/" + url.PathEscape(string(key))
}
