package analytics

import (
	"context"
	"time"
)

// WithSleep replaces the wait between attempts, so tests can record the
// delays the client chose without waiting them out.
func WithSleep(cfg Config, f func(context.Context, time.Duration) error) Config {
	cfg.sleep = f
	return cfg
}
