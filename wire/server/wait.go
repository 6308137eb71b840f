package server

import "sync"

type topicPartition struct {
	topic     string
	partition int32
}

// waiters are the long-polling Fetch requests, by the partitions each one
// reads (Kafka's DelayedFetch purgatory, keyed the same way). A waiter
// registers before its first read, so a Notify between that read and the
// wait is not lost.
type waiters struct {
	mu sync.Mutex
	m  map[topicPartition]map[*waiter]struct{}
}

// waiter is one waiting Fetch; wake has room for one signal, which is all
// a wait needs to read again.
type waiter struct {
	wake chan struct{}
	tps  []topicPartition
}

func (ws *waiters) add(tps []topicPartition) *waiter {
	w := &waiter{wake: make(chan struct{}, 1), tps: tps}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.m == nil {
		ws.m = map[topicPartition]map[*waiter]struct{}{}
	}
	for _, tp := range tps {
		set := ws.m[tp]
		if set == nil {
			set = map[*waiter]struct{}{}
			ws.m[tp] = set
		}
		set[w] = struct{}{}
	}
	return w
}

func (ws *waiters) remove(w *waiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, tp := range w.tps {
		set := ws.m[tp]
		delete(set, w)
		if len(set) == 0 {
			delete(ws.m, tp)
		}
	}
}

func (ws *waiters) notify(tp topicPartition) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.m[tp] {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}
