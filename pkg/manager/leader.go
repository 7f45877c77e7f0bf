package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"leasetune.io/leasetune/pkg/metrics"
)

// lockRequestTimeout bounds each request on the Lease.
const lockRequestTimeout = 5 * time.Second

// lockClientFor is the client of the Lease: it gives up on a request after
// lockRequestTimeout, as client-go's release on a stop has no deadline of
// its own, and a kube-apiserver that is going away (as under `make run`'s
// Ctrl-C) would hold the stop for half a minute. Errors: rc is a config no
// client can be made of.
func lockClientFor(rc *rest.Config) (kubernetes.Interface, error) {
	lockCfg := rest.CopyConfig(rc)
	lockCfg.Timeout = lockRequestTimeout
	return kubernetes.NewForConfig(lockCfg)
}

// lead runs components behind client-go leader election on the Lease
// cfg.Namespace/cfg.LeaseName (read and written with lockClient, see
// lockClientFor), with the triple cfg.Timings and the identity
// cfg.Identity, and sets ready once the elector runs (a follower is ready:
// it serves the webhook and the APIs, it does not write). components runs
// while this replica leads, with a context that ends when the lease is
// lost or ctx ends; metrics.Leader is 1 while they run, 0 otherwise.
//
// It returns nil once ctx has ended: the components have stopped first and
// the Lease has been released after (ReleaseOnCancel), so no two leaders
// ever write. It returns the components' error when they fail while
// leading, "leadership lost" when the lease is lost otherwise, and an
// error when cfg.Timings is invalid or the elector cannot be made.
func lead(ctx context.Context, lockClient kubernetes.Interface, cfg Config, log *slog.Logger, ready *atomic.Bool, components func(context.Context) error) error {
	if err := cfg.Timings.Validate(); err != nil {
		return fmt.Errorf("own leader election: %w", err)
	}
	metrics.Leader.Set(0) // a follower until the Lease is acquired
	// running tracks the components; once le.Run has returned, a late
	// OnStartedLeading goroutine must not start them.
	var (
		mu      sync.Mutex
		running sync.WaitGroup
		done    bool
		compErr error
	)
	lostCtx, lost := context.WithCancel(context.WithoutCancel(ctx))
	defer lost()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.LeaseName},
			Client:     lockClient.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
		},
		LeaseDuration:   cfg.Timings.LeaseDuration,
		RenewDeadline:   cfg.Timings.RenewDeadline,
		RetryPeriod:     cfg.Timings.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				mu.Lock()
				if done || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				running.Add(1)
				mu.Unlock()
				defer running.Done()
				// The components stop when the lease is lost or when ctx
				// ends; in the latter case the lease is released only
				// after they have stopped, so no two leaders ever write.
				cctx, ccancel := context.WithCancel(lctx)
				defer ccancel()
				defer context.AfterFunc(ctx, ccancel)()
				log.Info("leading", "lease", cfg.Namespace+"/"+cfg.LeaseName, "identity", cfg.Identity, "timings", cfg.Timings.String())
				metrics.Leader.Set(1)
				defer metrics.Leader.Set(0) // the components have stopped
				if err := components(cctx); err != nil && cctx.Err() == nil {
					compErr = err
					lost()
				}
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					log.Error("leadership lost", "identity", cfg.Identity)
					lost()
				}
			},
			OnNewLeader: func(id string) {
				if id != cfg.Identity {
					log.Info("following", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	ready.Store(true)
	// runCtx is le.Run's, and not cancelled with ctx (WithoutCancel): le.Run releases the
	// Lease as soon as its context ends (renew, then release), so it must
	// end only once the components have stopped, which the goroutine below
	// waits for (a child of ctx ended with ctx, releasing the Lease while
	// the components were still stopping).
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		select {
		case <-lostCtx.Done():
		case <-ctx.Done():
			mu.Lock()
			done = true
			mu.Unlock()
			running.Wait() // the components stop first (ctx ended them) ...
		}
		cancel() // ... then le.Run releases the Lease and returns
	}()
	le.Run(runCtx) // returns once the lease is released or lost
	mu.Lock()
	done = true
	mu.Unlock()
	running.Wait()
	switch {
	case compErr != nil:
		return compErr
	case ctx.Err() == nil:
		return errors.New("leadership lost")
	}
	log.Info("stopped")
	return nil
}
