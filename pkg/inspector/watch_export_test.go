package inspector

// Watch subscribes to l's events as a page would, draining them, until
// the returned func is called (for benchmarks).
func Watch(l *Listen) (stop func()) {
	c := l.hub.subscribe()
	done := make(chan struct{})
	go func() {
		for range c {
		}
		close(done)
	}()
	return func() { l.hub.unsubscribe(c); <-done }
}
