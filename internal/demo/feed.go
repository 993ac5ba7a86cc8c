package demo

import (
	"context"
	"fmt"
	"sync"
	"time"

	"plait/internal/cluster"
)

// follower is a consumer of one node's change feed of a table, through the Go client: it
// keeps, per origin name, the seqs it was given, and the first fault it saw (a seq given
// twice or out of order, a reread, the feed's end).
type follower struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	last    map[string]uint64 // per origin name, the last seq given
	changes int
	fault   error
}

// follow starts a consumer of table's feed on the named node from its oldest entry: the
// node holds none yet, so the consumer is given every write. From "now" it would start
// wherever the node stood when its request arrived, after writes the demo made meanwhile.
func (d *demoCluster) follow(name, table string) (*follower, error) {
	cl, err := d.nodes[name].Client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{cancel: cancel, done: make(chan struct{}), last: map[string]uint64{}}
	go func() {
		defer close(f.done)
		for ev, err := range cl.Changes(ctx, table, "oldest") {
			f.mu.Lock()
			switch {
			case err != nil:
				if ctx.Err() == nil && f.fault == nil {
					f.fault = fmt.Errorf("the change feed ended: %w", err)
				}
			case ev.Kind != "change":
				f.fault = fmt.Errorf("the change feed asked to reread the table (%s)", ev.Reason)
			case ev.Seq != f.last[ev.OriginName]+1 && f.fault == nil:
				f.fault = fmt.Errorf("the change feed gave %s's seq %d after seq %d", ev.OriginName, ev.Seq, f.last[ev.OriginName])
			default:
				f.last[ev.OriginName] = ev.Seq
				f.changes++
			}
			f.mu.Unlock()
		}
	}()
	return f, nil
}

// await waits up to 30 s until the consumer was given want[origin] changes of each origin,
// and answers how many it was given and its fault, if any.
func (f *follower) await(want map[string]uint64) (int, error) {
	err := cluster.WaitFor("the change feed's changes", 30*time.Second, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.fault != nil {
			return true
		}
		for name, n := range want {
			if f.last[name] != n {
				return false
			}
		}
		return true
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fault != nil {
		return f.changes, f.fault
	}
	if err != nil {
		return f.changes, fmt.Errorf("the change feed gave %v, want %v: %w", f.last, want, err)
	}
	return f.changes, nil
}

// stop ends the consumer and waits for it.
func (f *follower) stop() {
	f.cancel()
	<-f.done
}
