package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/admission"
	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	management "leasetune.io/leasetune/pkg/generated/controllers/management.cattle.io"
	"leasetune.io/leasetune/pkg/settingsapi"
)

// WebhookSecretName is the Secret holding the webhook's CA and serving certificate.
const WebhookSecretName = "leasetune-webhook-tls"

// serveTLS starts, on every replica, the HTTPS server of the admission
// webhook and the /v3/settings API, with a read-only cache of the Setting
// objects. It returns once the server listens and the cache has synced, or
// with an error; the server stops when ctx ends.
func serveTLS(ctx context.Context, rc *rest.Config, cs kubernetes.Interface, cfg Config, log *slog.Logger) error {
	hosts := append([]string{
		cfg.WebhookService + "." + cfg.Namespace + ".svc",
		cfg.WebhookService + "." + cfg.Namespace + ".svc.cluster.local",
	}, cfg.WebhookHosts...)
	cert, caPEM, err := admission.EnsureCerts(ctx, cs, cfg.Namespace, WebhookSecretName, hosts)
	if err != nil {
		return err
	}
	if err := admission.PatchCABundle(ctx, cs, cfg.WebhookConfigName, caPEM); err != nil {
		return fmt.Errorf("publish the webhook caBundle: %w", err)
	}

	mf, err := management.NewFactoryFromConfig(rc)
	if err != nil {
		return err
	}
	cache := mf.Management().V3().Setting().Cache()
	if err := startFactory(ctx, mf.Start); err != nil {
		return err
	}
	list := func() ([]v3.Setting, error) {
		objs, err := cache.List(labels.Everything())
		if err != nil {
			return nil, err
		}
		out := make([]v3.Setting, 0, len(objs))
		for _, o := range objs {
			out = append(out, *o)
		}
		return out, nil
	}

	mux := http.NewServeMux()
	(&admission.Webhook{Settings: list, ServiceAccount: cfg.ServiceAccount, Log: log}).Register(mux)
	(&settingsapi.Server{Base: rc, Log: log}).Register(mux)
	ln, err := net.Listen("tcp", cfg.WebhookAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.WebhookAddr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("webhook server stopped", "error", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("serving the admission webhook and /v3/settings", "addr", ln.Addr().String())
	return nil
}
