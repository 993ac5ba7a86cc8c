package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"plait/client"
)

// These examples are compiled, not run: each needs a node at the address.

func ExampleNew() {
	c, err := client.New("https://node-a.example:7401",
		client.WithTokenFile("/etc/plait/token"),
		client.WithCAFile("/etc/plait/ca.pem"),
		client.WithTimeout(10*time.Second),
		client.WithMaxAttempts(5),
		client.WithBackoff(200*time.Millisecond, 5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.URL())
}

func ExampleClient_Put() {
	c, _ := client.New("http://127.0.0.1:7401")
	seq, err := c.Put(context.Background(), "orders", []byte("o-17"), []byte(`{"qty":3}`))
	var te *client.TransportError
	switch {
	case errors.As(err, &te) && te.Sent:
		log.Printf("the write may have applied (no answer): read it back before writing again: %v", err)
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println("written at origin_seq", seq)
}

func ExampleClient_Get() {
	c, _ := client.New("http://127.0.0.1:7401")
	v, err := c.Get(context.Background(), "orders", []byte("o-17"))
	if errors.Is(err, client.ErrNotFound) {
		fmt.Println("no such order")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", v)
}

func ExampleClient_Delete() {
	c, _ := client.New("http://127.0.0.1:7401")
	if _, err := c.Delete(context.Background(), "orders", []byte("o-17")); err != nil {
		log.Fatal(err)
	}
}

func ExampleClient_Batch() {
	c, _ := client.New("http://127.0.0.1:7401")
	seq, err := c.Batch(context.Background(), "orders", []client.Op{
		client.PutOp([]byte("o-18"), []byte(`{"qty":1}`)),
		client.DeleteOp([]byte("o-17")),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("one transaction at origin_seq", seq)
}

func ExampleClient_List() {
	c, _ := client.New("http://127.0.0.1:7401")
	ctx := context.Background()
	asOf := ""
	for page, err := range c.List(ctx, "orders", client.ListOptions{Prefix: "o-"}) {
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range page.Records {
			fmt.Printf("%s=%s\n", r.Key, r.Value)
		}
		asOf = page.AsOf
	}
	// A feed from asOf delivers every change after the listing, none twice (a node that
	// does not pin listings gives no asOf).
	fmt.Println("listed as of", asOf)
}

func ExampleClient_Digest() {
	c, _ := client.New("http://127.0.0.1:7401")
	d, err := c.Digest(context.Background(), "orders")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Count, d.Hash)
}

func ExampleClient_Status() {
	c, _ := client.New("http://127.0.0.1:7401")
	s, err := c.Status(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range s.Origins {
		fmt.Printf("%s applied %d, %d behind\n", o.Name, o.AppliedSeq, o.LagSeq)
	}
}

func ExampleClient_Changes() {
	c, _ := client.New("http://127.0.0.1:7401")
	ctx := context.Background()
	for e, err := range c.Changes(ctx, "orders", "now") {
		if errors.Is(err, client.ErrPurged) {
			log.Fatal("the feed's position is purged: list the table again, then follow from its as_of")
		}
		if err != nil {
			log.Fatal(err)
		}
		switch e.Kind {
		case "change":
			for _, op := range e.Ops {
				fmt.Printf("%s:%d %s delete=%v\n", e.OriginName, e.Seq, op.Key, op.Delete)
			}
		case "reread":
			fmt.Println("read the table again:", e.Reason)
		}
		// Keep e.Position to start again after this event.
	}
}

func ExampleClient_AcquireLock() {
	c, _ := client.New("http://127.0.0.1:7401")
	ctx := context.Background()
	lease, err := c.AcquireLock(ctx, "accounts", []byte("acct-9"), 30*time.Second, 5*time.Second)
	var ae *client.Error
	if errors.Is(err, client.ErrLockHeld) && errors.As(err, &ae) {
		log.Fatalf("held by another; it ends within %v", ae.RetryAfter)
	}
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Put(ctx, "accounts", []byte("acct-9"), []byte("100"), client.UnderLock(lease.Token)); err != nil {
		log.Fatal(err)
	}
	if _, err := c.RenewLock(ctx, "accounts", []byte("acct-9"), lease.Token, 30*time.Second); err != nil {
		log.Fatal(err)
	}
	if err := c.ReleaseLock(ctx, "accounts", []byte("acct-9"), lease.Token); err != nil {
		log.Fatal(err)
	}
}

func ExampleClient_ClusterMap() {
	c, _ := client.New("http://127.0.0.1:7401")
	m, err := c.ClusterMap(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", m)
}

func ExampleClient_PutClusterMap() {
	c, _ := client.New("http://127.0.0.1:7401", client.WithToken("an-admin-token-of-the-node"))
	m, err := c.PutClusterMap(context.Background(), []byte(`{"generation":2,"nodes":[{"name":"A"},{"name":"B"}]}`))
	if errors.Is(err, client.ErrStaleGeneration) {
		log.Fatal("another map of this generation or above is adopted: read it and publish above it")
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", m)
}

func ExampleClient_ClusterMapOf() {
	c, _ := client.New("http://127.0.0.1:7401")
	// The map node B holds, asked through this node: B need not be reachable from here.
	m, err := c.ClusterMapOf(context.Background(), "B")
	if errors.Is(err, client.ErrNoRoute) {
		log.Fatal("no route to B")
	}
	fmt.Printf("%s", m)
}

func ExampleClient_RenewLock() {
	c, _ := client.New("http://127.0.0.1:7401")
	token := "the token AcquireLock gave"
	left, err := c.RenewLock(context.Background(), "accounts", []byte("acct-9"), token, 30*time.Second)
	if errors.Is(err, client.ErrLockLost) {
		log.Fatal("the lease is no longer ours: stop writing under it")
	}
	fmt.Println("writes taken for", left)
}

func ExampleClient_ReleaseLock() {
	c, _ := client.New("http://127.0.0.1:7401")
	if err := c.ReleaseLock(context.Background(), "accounts", []byte("acct-9"), "the token AcquireLock gave"); err != nil {
		log.Print(err)
	}
}
