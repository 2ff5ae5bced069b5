package lists

import "sync"

// workers run the statements of a batch (an entities request's reads, a
// batch add's writes) on goroutines that stay. A statement through gocql
// grows a goroutine's stack past the 8 KiB it starts with, so a goroutine
// per statement copied its stack on every one: a fifth of the gateway's
// CPU in a 100-list entities request, measured. A job that finds no idle
// worker runs on a goroutine of its own: a batch never waits for one.
type workers struct {
	jobs  chan func()
	done  chan struct{}
	close func() // ends the idle workers; later jobs get goroutines of their own
}

func newWorkers(n int) *workers {
	w := &workers{jobs: make(chan func()), done: make(chan struct{})}
	w.close = sync.OnceFunc(func() { close(w.done) })
	for range n {
		go w.work()
	}
	return w
}

func (w *workers) work() {
	for {
		select {
		case job := <-w.jobs:
			job()
		case <-w.done:
			return
		}
	}
}

// each runs f(0) … f(n-1), at most limit at once, and returns when all
// have.
func (w *workers) each(n, limit int, f func(i int)) {
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		sem <- struct{}{}
		job := func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}
		select {
		case w.jobs <- job:
		default:
			go job()
		}
	}
	wg.Wait()
}
