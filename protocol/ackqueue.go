package protocol

// ackQueue holds, in arrival order, what a session received and handed to its caller but
// has not acknowledged to the peer yet, with the bytes each item holds. An acknowledgement
// pops a prefix. Version 1's unacknowledged frames and each version-2 channel's pending
// entries are this one queue.
type ackQueue[T any] struct {
	items []queued[T]
	head  int // items before head are popped
	bytes int // held by the items not popped
}

type queued[T any] struct {
	item T
	size int
}

// push appends an item that holds size bytes.
func (q *ackQueue[T]) push(item T, size int) {
	q.items = append(q.items, queued[T]{item: item, size: size})
	q.bytes += size
}

// front returns the oldest item not popped.
func (q *ackQueue[T]) front() (T, bool) {
	if q.head == len(q.items) {
		var zero T
		return zero, false
	}
	return q.items[q.head].item, true
}

// pop removes the oldest item and returns the bytes it held. The queue must not be empty.
func (q *ackQueue[T]) pop() int {
	n := q.items[q.head].size
	q.head++
	q.bytes -= n
	return n
}

// compact makes the popped items' memory reusable after a run of pops: all of it once the
// queue is empty, and by moving the rest to the front once more than half is popped (so
// the copying stays proportional to what was pushed).
func (q *ackQueue[T]) compact() {
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > len(q.items)/2 {
		q.items, q.head = q.items[:copy(q.items, q.items[q.head:])], 0
	}
}
