//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/viper"

	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
)

// nullStore is a store that keeps nothing: the null collector runs serve's
// HTTP stack and validation on it, so the ingest row can say what the
// store costs. The embedded interface is nil: it compiles whatever methods
// store.Store gains, and the ones serve calls at start and on ingest are
// overridden.
type nullStore struct{ store.Store }

func (nullStore) Ingest(context.Context, []store.Message) error { return nil }
func (nullStore) IngestLeased(context.Context, []store.Message, store.IngestLease) ([]store.Delivery, error) {
	return nil, nil
}
func (nullStore) Lease(context.Context, store.LeaseRequest) ([]store.Delivery, error) {
	return nil, nil
}
func (nullStore) Complete(context.Context, []store.Completion) error { return nil }
func (nullStore) Reclaim(context.Context, time.Time) (int, error)    { return 0, nil }
func (nullStore) Counts(context.Context) ([]store.Count, error)      { return nil, nil }
func (nullStore) Stats(context.Context) (store.Stats, error)         { return store.Stats{}, nil }
func (nullStore) Endpoints(context.Context) ([]store.EndpointState, error) {
	return nil, nil
}
func (nullStore) Prune(context.Context, time.Time) (store.Pruned, error) {
	return store.Pruned{}, nil
}
func (nullStore) Close() error { return nil }

// runNull is the bench re-executed as the null collector: serve with the
// config file's addr and sources on a nullStore, until SIGINT.
func runNull(configFile, cpuprofile string) error {
	v := viper.New()
	v.SetConfigFile(configFile)
	if err := v.ReadInConfig(); err != nil {
		return err
	}
	var cfg serve.Config
	if err := v.Unmarshal(&cfg); err != nil {
		return err
	}
	cfg.Store = ""
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := serve.New(ctx, cfg, serve.Options{Store: nullStore{}})
	if err != nil {
		return fmt.Errorf("null collector: %w", err)
	}
	return srv.Run(ctx)
}
