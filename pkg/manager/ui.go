package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"leasetune.io/leasetune/pkg/uiplugin"
)

// UIConfig configures the server Rancher fetches the UI extension's bundle
// from. The UIPlugin that tells Rancher where it is comes from the Helm
// chart (charts/leasetune/templates/uiplugin.yaml), not from this process.
type UIConfig struct {
	// Addr serves the bundle over plain HTTP on every replica
	// (uiplugin.Handler; --ui-addr, the chart's :8082 behind the Service
	// leasetune-ui); empty disables it.
	Addr string
}

// uiHandler serves the bundle b at b.PathPrefix() and nothing else: every
// other path is 404, so the Service in front of it (which Rancher, and
// anyone allowed services/proxy on it, reaches) leads to no webhook, API,
// health or metrics endpoint.
func uiHandler(b *uiplugin.Bundle) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(b.PathPrefix()+"/", uiplugin.Handler(b))
	return mux
}

// serveUI starts, on every replica, the plain-HTTP server of the UI
// bundle at cfg.UI.Addr (nothing when empty). It returns a function that
// stops it. Errors: the bundle is not built in, or Addr cannot be listened on.
func serveUI(ctx context.Context, cfg Config, hs *health, log *slog.Logger) (func(), error) {
	if cfg.UI.Addr == "" {
		return func() {}, nil
	}
	b, err := uiplugin.Embedded()
	if err != nil {
		return nil, err
	}
	ln, err := cfg.listen(cfg.UI.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.UI.Addr, err)
	}
	s := &http.Server{Handler: uiHandler(b), ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 60 * time.Second}
	go func() {
		if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("UI extension server stopped", "addr", cfg.UI.Addr, "error", err)
			hs.fail(healthUIServer, err.Error())
		}
	}()
	hs.serving(healthUIServer)
	log.Info("serving the Rancher UI extension", "addr", ln.Addr().String(), "path", b.PathPrefix(), "version", b.Version)
	return func() {
		// Stopped after ctx ended: a deadline of its own, ctx's values.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(sctx)
	}, nil
}
