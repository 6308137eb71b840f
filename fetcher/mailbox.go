package fetcher

import "sync"

// mailbox is an unbounded queue that one goroutine posts to without ever
// blocking and another drains once ready fires. The Manager's orders to a
// worker and a worker's hand-backs to the Manager travel this way, so Run
// never waits behind a worker's fsync and a worker never waits behind Run's
// Metadata request.
type mailbox[T any] struct {
	mu    sync.Mutex
	items []T
	ready chan struct{} // holds a token while items may be waiting
}

func newMailbox[T any]() *mailbox[T] {
	return &mailbox[T]{ready: make(chan struct{}, 1)}
}

// post queues v; it never blocks.
func (b *mailbox[T]) post(v T) {
	b.mu.Lock()
	b.items = append(b.items, v)
	b.mu.Unlock()
	select {
	case b.ready <- struct{}{}:
	default: // a token is already there
	}
}

// take returns what was posted since the last take, in order.
func (b *mailbox[T]) take() []T {
	b.mu.Lock()
	defer b.mu.Unlock()
	items := b.items
	b.items = nil
	return items
}
