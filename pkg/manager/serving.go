package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/admission"
	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/ownstate"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/pkg/settingsapi"
)

// admissionReadTimeout bounds the live reads one admission request makes;
// the chart's webhook configuration gives the apiserver 5s
// (timeoutSeconds) to get an answer, so a read that cannot finish in time
// fails here with a clear refusal rather than there with a timeout.
const admissionReadTimeout = 5 * time.Second

// serveTLS starts, on every replica, the HTTPS server of the admission
// webhook and the /v3/settings API (webhookHandler), with the certificate
// keepWebhookCert keeps. It returns once the server listens, or with an
// error when it cannot listen on cfg.WebhookAddr; the server stops when
// ctx ends, and the returned wait blocks until it has (so that a stopped
// process answers no more). A certificate that cannot be had (the Secret
// or the webhook configuration unreadable) never makes it return an
// error: it is retried with backoff while /readyz says why; a server that
// stops by itself makes /healthz fail.
func serveTLS(ctx context.Context, rc *rest.Config, cs kubernetes.Interface, cfg Config, log *slog.Logger, judge AgentJudge, hs *health) (wait func(), err error) {
	cert := keepWebhookCert(ctx, cs, cfg, log, hs)
	return startHTTPS(ctx, cfg, webhookHandler(rc, cs, cfg, log, judge), cert.get, log, hs)
}

// webhookHandler serves the admission webhook (pkg/admission) and the
// /v3/settings API (pkg/settingsapi).
func webhookHandler(rc *rest.Config, cs kubernetes.Interface, cfg Config, log *slog.Logger, judge AgentJudge) http.Handler {
	settingsRes := dynamic.NewForConfigOrDie(rc).Resource(v3.SchemeGroupVersion.WithResource("settings"))
	source := func(ctx context.Context) ([]v3.Setting, map[string]string, error) {
		// The nine by name, live (a cache may lag behind the very write
		// before this one), within a deadline below the webhook's timeout.
		ctx, cancel := context.WithTimeout(ctx, admissionReadTimeout)
		defer cancel()
		var items []v3.Setting
		for _, d := range settings.Registry {
			u, err := settingsRes.Get(ctx, d.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			var s v3.Setting
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s); err != nil {
				return nil, nil, err
			}
			items = append(items, s)
		}
		cm, err := ownstate.Load(ctx, cs.CoreV1(), cfg.Namespace, settings.DefaultStateName)
		if err != nil {
			return nil, nil, err
		}
		var state map[string]string
		if cm != nil {
			state = cm.Data
		}
		return items, state, nil
	}
	lookup := cfg.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	envSet := func(d settings.Definition) bool { _, ok := lookup(d.EnvVar()); return ok }

	mux := http.NewServeMux()
	channel := func(ctx context.Context) (fleet.AgentChannel, bool, error) {
		if cfg.ChannelOverride != "" {
			return cfg.ChannelOverride, true, nil
		}
		cm, err := ownstate.Load(ctx, cs.CoreV1(), cfg.Namespace, fleetenv.ChannelConfigMapName)
		if err != nil || cm == nil {
			return "", false, err
		}
		ch, err := fleet.ParseChannel(cm.Data["channel"])
		return ch, err == nil, nil
	}
	(&admission.Webhook{Source: source, Channel: channel, JudgeAgentTriple: judge, EnvSet: envSet, ServiceAccount: cfg.ServiceAccount, Log: log}).Register(mux)
	(&settingsapi.Server{Base: rc, Log: log}).Register(mux)
	return mux
}

// startHTTPS serves h over TLS on cfg.WebhookAddr with the certificate
// getCert gives, until ctx ends; see serveTLS.
func startHTTPS(ctx context.Context, cfg Config, h http.Handler, getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error), log *slog.Logger, hs *health) (wait func(), err error) {
	ln, err := cfg.listen(cfg.WebhookAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.WebhookAddr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: getCert}}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("webhook server stopped", "addr", ln.Addr().String(), "error", err)
			hs.fail(healthWebhookServer, err.Error())
		}
	}()
	hs.serving(healthWebhookServer)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second) // ctx has ended
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("serving the admission webhook and /v3/settings", "addr", ln.Addr().String())
	return func() { <-stopped }, nil
}

// serve starts the health and metrics servers; the returned function
// stops them. A server that stops by itself (its listener failed) is
// logged and makes /healthz fail, naming it.
func serve(ctx context.Context, cfg Config, hs *health, log *slog.Logger) (func(), error) {
	var servers []*http.Server
	start := func(what, addr string, h http.Handler) error {
		if addr == "" {
			return nil
		}
		ln, err := cfg.listen(addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
		s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, s)
		go func() {
			if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error(what+" stopped", "addr", addr, "error", err)
				hs.fail(what, err.Error())
			}
		}()
		return nil
	}
	health := http.NewServeMux()
	health.HandleFunc("/healthz", hs.healthz)
	health.HandleFunc("/readyz", hs.readyz)
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	stop := func() {
		for _, s := range servers {
			// Stopped after ctx ended: a deadline of its own, ctx's values.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = s.Shutdown(sctx)
			cancel()
		}
	}
	if err := start("health server", cfg.HealthAddr, health); err != nil {
		return stop, err
	}
	if err := start(healthMetricsServer, cfg.MetricsAddr, metricsMux); err != nil {
		stop()
		return stop, err
	}
	return stop, nil
}
