package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/uiplugin"
)

// UIConfig configures the Rancher UI extension: the server Rancher fetches
// the bundle from, the UIPlugin that tells Rancher where it is, and where
// the page's API uses tokens that come through Rancher's proxy.
type UIConfig struct {
	// Addr serves the bundle over plain HTTP on every replica
	// (uiplugin.Handler; --ui-addr, default :8082); empty disables it.
	Addr string
	// Plugin keeps the UIPlugin cattle-ui-plugin-system/leasetune in place
	// while its CRD exists (on the leader; --ui-plugin).
	Plugin bool
	// Endpoint is the base URL Rancher reaches Addr at, without the
	// versioned path (e.g. http://leasetune-ui.leasetune-system.svc;
	// --ui-endpoint). Empty: http://<Service>.<namespace>.svc.
	Endpoint string
	// Service is the Service in front of Addr (--ui-service, default
	// leasetune-ui), for the default Endpoint.
	Service string
	// API is the page's API (pkg/uiapi), registered on the HTTPS mux of
	// every replica beside /v3/settings; nil: none. (The caller builds it:
	// pkg/uiapi reads through pkg/plan, which imports this package.)
	API interface{ Register(*http.ServeMux) }
}

// endpoint is the UIPlugin's spec.plugin.endpoint for bundle b.
func (c UIConfig) endpoint(namespace string, b *uiplugin.Bundle) string {
	base := c.Endpoint
	if base == "" {
		svc := c.Service
		if svc == "" {
			svc = "leasetune-ui"
		}
		base = "http://" + svc + "." + namespace + ".svc"
	}
	return strings.TrimSuffix(base, "/") + b.PathPrefix()
}

// serveUI starts, on every replica, the plain-HTTP server of the UI
// bundle at cfg.UI.Addr (nothing when empty). It returns a function that
// stops it. Errors: the bundle is not built in, or Addr cannot be listened on.
func serveUI(cfg Config, hs *health, log *slog.Logger) (func(), error) {
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
	mux := http.NewServeMux()
	mux.Handle(b.PathPrefix()+"/", uiplugin.Handler(b))
	s := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 60 * time.Second}
	go func() {
		if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("UI extension server stopped", "addr", cfg.UI.Addr, "error", err)
			hs.fail("UI extension server", err.Error())
		}
	}()
	log.Info("serving the Rancher UI extension", "addr", ln.Addr().String(), "path", b.PathPrefix(), "version", b.Version)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	}, nil
}

// runUIPlugin keeps the UIPlugin in place until ctx ends (on the leader,
// with the components), when cfg.UI.Plugin is set and the bundle is served
// (cfg.UI.Addr): a UIPlugin pointing at nothing would only make Rancher
// retry.
func runUIPlugin(ctx context.Context, rc *rest.Config, cfg Config, log *slog.Logger) {
	if !cfg.UI.Plugin || cfg.UI.Addr == "" {
		return
	}
	b, err := uiplugin.Embedded()
	if err != nil {
		log.Error("the UI extension is not built in: no UIPlugin", "error", err)
		return
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		log.Error("UIPlugin client", "error", err)
		return
	}
	svc := cfg.WebhookService
	if svc == "" {
		svc = "leasetune-webhook"
	}
	r := uiplugin.NewReconciler(uiplugin.Options{Client: dyn, Bundle: b, Endpoint: cfg.UI.endpoint(cfg.Namespace, b), Log: log,
		Metadata: map[string]string{uiplugin.APIProxyKey: uiplugin.APIProxyPath(cfg.Namespace, svc)}})
	go func() { _ = r.Run(ctx) }()
}
