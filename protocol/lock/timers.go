package lock

import (
	"container/heap"
	"time"
)

// A timer is one instant the table must act at: a lease's expiry at the home or a waiter's
// deadline. Every live lease and every waiter has exactly one, so the heap holds no stale
// entries and never outgrows MaxLeases + MaxWaiters.
type timer struct {
	at    time.Time
	kind  timerKind
	seq   uint64 // creation order: ties end in the order they were set, never by memory
	e     *entry
	w     *waiter // the waiter of a timerWait
	index int     // in the heap, kept by Swap (heap.Fix and heap.Remove need it)
}

type timerKind uint8

// At one instant a lease ends before a wait does: a key freed at the instant a waiter's wait
// ends goes to that waiter, rather than answering it lock-held with nothing left to wait.
const (
	timerExpiry timerKind = iota
	timerWait
)

type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }

func (h timerHeap) Less(i, j int) bool {
	if c := h[i].at.Compare(h[j].at); c != 0 {
		return c < 0
	}
	if h[i].kind != h[j].kind {
		return h[i].kind < h[j].kind
	}
	return h[i].seq < h[j].seq
}

func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *timerHeap) Push(x any) {
	tm := x.(*timer)
	tm.index = len(*h)
	*h = append(*h, tm)
}

func (h *timerHeap) Pop() any {
	old := *h
	n := len(old) - 1
	tm := old[n]
	old[n] = nil
	tm.index = -1
	*h = old[:n]
	return tm
}

func (t *Table) setTimer(at time.Time, kind timerKind, e *entry, w *waiter) *timer {
	t.seq++
	tm := &timer{at: at, kind: kind, seq: t.seq, e: e, w: w}
	heap.Push(&t.timers, tm)
	return tm
}

func (t *Table) moveTimer(tm *timer, at time.Time) {
	tm.at = at
	t.seq++
	tm.seq = t.seq
	heap.Fix(&t.timers, tm.index)
}

func (t *Table) stopTimer(tm *timer) {
	if tm != nil && tm.index >= 0 {
		heap.Remove(&t.timers, tm.index)
	}
}
