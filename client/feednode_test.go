package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"plait/client"
	"plait/shells/native/node"
)

// TestFeedOnANode: a pinned listing and a change feed of a real node. The pages hold the
// records as of the snapshot, not a write made between two pages; a feed started at the
// listing's as_of delivers that write and the later ones, each once, also across a drop
// of every connection of the node's API (the client resumes from the last position it
// delivered). A node without pinned listings or feeds (a build before docs/contract.md
// §25.4's endpoints) skips what it lacks.
func TestFeedOnANode(t *testing.T) {
	_, api := startServer(t, node.Config{Name: "A"})
	c := newClient(t, api.URL, client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 3 {
		if _, err := c.Put(ctx, "t", fmt.Appendf(nil, "k%d", i), []byte("before")); err != nil {
			t.Fatal(err)
		}
	}
	var listed []string
	asOf, pinned := "", false
	for p, err := range c.List(ctx, "t", client.ListOptions{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		if len(listed) == 0 {
			// Between the first page and the second: not in the pages, in the feed.
			if _, err := c.Put(ctx, "t", []byte("k9"), []byte("between")); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range p.Records {
			listed = append(listed, string(r.Key)+"="+string(r.Value))
		}
		asOf, pinned = p.AsOf, p.Snapshot != ""
	}
	if !pinned {
		t.Log("the node pins no listing: its pages were read from the live table")
	} else if fmt.Sprint(listed) != "[k0=before k1=before k2=before]" || asOf == "" {
		t.Errorf("the pinned pages %v as of %q, want the three records written before", listed, asOf)
	}

	since := asOf
	if !pinned {
		since = "oldest"
	}
	var got []string
	dropped := false
	for e, err := range c.Changes(ctx, "t", since) {
		if errors.Is(err, client.ErrNotFound) && len(got) == 0 {
			t.Skip("the node has no change feed")
		}
		if err != nil {
			t.Fatalf("the feed after %v: %v", got, err)
		}
		if e.Kind != "change" || len(e.Ops) != 1 || e.Position == "" || len(e.Origin) != 32 {
			t.Fatalf("event %+v", e)
		}
		got = append(got, fmt.Sprintf("%d:%s=%s", e.Seq, e.Ops[0].Key, e.Ops[0].Value))
		if !dropped && len(got) == 1 {
			// Every connection of the API dropped, the feed's among them; the write after
			// it comes through the feed's next connection.
			dropped = true
			api.CloseClientConnections()
			if _, err := c.Put(ctx, "t", []byte("k10"), []byte("after the drop")); err != nil {
				t.Fatal(err)
			}
		}
		if e.Seq == 5 {
			break
		}
	}
	want := "[4:k9=between 5:k10=after the drop]"
	if !pinned {
		want = "[1:k0=before 2:k1=before 3:k2=before 4:k9=between 5:k10=after the drop]"
	}
	if fmt.Sprint(got) != want {
		t.Errorf("the feed delivered %v, want %s", got, want)
	}
}
