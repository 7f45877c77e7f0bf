package manager

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"leasetune.io/leasetune/pkg/admission"
	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/controllers/fleetsettings"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/ownstate"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/pkg/settingsapi"
)

// WebhookSecretName is the Secret holding the webhook's CA and serving certificate.
const WebhookSecretName = "leasetune-webhook-tls"

// admissionReadTimeout bounds the live reads one admission request makes;
// the chart's webhook configuration gives the apiserver 5s
// (timeoutSeconds) to get an answer, so a read that cannot finish in time
// fails here with a clear refusal rather than there with a timeout.
const admissionReadTimeout = 5 * time.Second

// certCheckInterval is the longest wait between failed looks at the
// webhook Secret and configuration (Config.CertCheckInterval replaces it);
// otherwise they are watched (by name) and looked at only when they change.
const certCheckInterval = 30 * time.Second

// certFirstRetry is the wait after the first failed look; each further
// failure doubles it, up to certCheckInterval.
const certFirstRetry = time.Second

// certAttemptTimeout bounds one look (read or create the Secret, patch the
// caBundle), so that an apiserver that does not answer holds neither the
// start nor the retries.
const certAttemptTimeout = 15 * time.Second

// serveTLS starts, on every replica, the HTTPS server of the admission
// webhook and the /v3/settings API. It returns once the server listens, or
// with an error when it cannot listen on cfg.WebhookAddr; the server stops
// when ctx ends, and the returned wait blocks until it has (so that a
// stopped process answers no more). A certificate that cannot be had (the
// Secret or the webhook configuration unreadable) never makes it return an
// error: it is retried with backoff while /readyz says why; a server that
// stops by itself makes /healthz fail.
func serveTLS(ctx context.Context, rc *rest.Config, cs kubernetes.Interface, cfg Config, log *slog.Logger, judge AgentJudge, hs *health) (wait func(), err error) {
	hosts := append([]string{
		cfg.WebhookService + "." + cfg.Namespace + ".svc",
		cfg.WebhookService + "." + cfg.Namespace + ".svc.cluster.local",
	}, cfg.WebhookHosts...)
	var current atomic.Pointer[tls.Certificate]
	var currentCA []byte
	refresh := func() error {
		ctx, cancel := context.WithTimeout(ctx, certAttemptTimeout)
		defer cancel()
		cert, caPEM, err := admission.EnsureCerts(ctx, cs, cfg.Namespace, WebhookSecretName, hosts)
		if err != nil {
			return err
		}
		if !bytes.Equal(caPEM, currentCA) {
			if currentCA != nil {
				log.Info("webhook certificate changed; serving the new one")
			}
			current.Store(&cert)
			currentCA = caPEM
		}
		if cfg.WebhookConfigName == "" {
			return nil // no webhook configuration to publish the caBundle in
		}
		if err := admission.PatchCABundle(ctx, cs, cfg.WebhookConfigName, caPEM); err != nil {
			return fmt.Errorf("publish the caBundle of ValidatingWebhookConfiguration %s: %w", cfg.WebhookConfigName, err)
		}
		return nil
	}
	// notYet is what /readyz says until a look has succeeded (the
	// certificate served and its caBundle published).
	notYet := func(err error) string {
		return fmt.Sprintf("not in place yet: %v; trying again with backoff", err)
	}
	// A first look that fails (the apiserver down or refusing during a
	// restart) is retried below with backoff; until a certificate is there
	// the replica is not ready, and the Fail-policy webhook waits rather
	// than the pod crash-looping.
	firstErr := refresh()
	if firstErr != nil {
		hs.wait(readyWebhookCert, notYet(firstErr))
	}
	// Watches, by name, of the Secret and the webhook configuration: a
	// rotation (the Secret deleted and made anew) or a changed caBundle is
	// followed when it happens, and at rest nothing is read.
	maxBackoff := cfg.CertCheckInterval
	if maxBackoff <= 0 {
		maxBackoff = certCheckInterval
	}
	kick := make(chan struct{}, 1)
	poke := func(interface{}) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, n interface{}) { poke(n) }, DeleteFunc: poke}
	byName := func(name string) informers.SharedInformerOption {
		return informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
	}
	sf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(cfg.Namespace), byName(WebhookSecretName))
	_, _ = sf.Core().V1().Secrets().Informer().AddEventHandler(handler)
	sf.Start(ctx.Done())
	if cfg.WebhookConfigName != "" {
		vf := informers.NewSharedInformerFactoryWithOptions(cs, 0, byName(cfg.WebhookConfigName))
		_, _ = vf.Admissionregistration().V1().ValidatingWebhookConfigurations().Informer().AddEventHandler(handler)
		vf.Start(ctx.Done())
	}
	go func() {
		defer sf.Shutdown()
		// backoff is the wait before the next attempt after a failed one:
		// certFirstRetry, doubled after each failure up to maxBackoff, and
		// back to certFirstRetry after a success.
		backoff := certFirstRetry
		var again <-chan time.Time
		inPlace := firstErr == nil
		fail := func(err error) {
			if !inPlace {
				hs.wait(readyWebhookCert, notYet(err))
			}
			log.Error("webhook certificate; trying again", "error", err, "in", backoff.String())
			again = time.After(backoff)
			backoff = min(2*backoff, maxBackoff)
		}
		if firstErr != nil {
			fail(firstErr)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
			case <-again:
			}
			again = nil
			err := refresh()
			switch {
			case err == nil:
				if !inPlace {
					log.Info("webhook certificate in place; ready")
					inPlace = true
					hs.wait(readyWebhookCert, "")
				}
				backoff = certFirstRetry
			case ctx.Err() == nil:
				fail(err)
			}
		}
	}()

	settingsRes := dynamic.NewForConfigOrDie(rc).Resource(v3.SchemeGroupVersion.WithResource("settings"))
	source := func(ctx context.Context) ([]v3.Setting, map[string]string, error) {
		// The six by name, live (a cache may lag behind the very write
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
		cm, err := ownstate.Load(ctx, cs.CoreV1(), cfg.Namespace, fleetsettings.ChannelConfigMapName)
		if err != nil || cm == nil {
			return "", false, err
		}
		ch, err := fleet.ParseChannel(cm.Data["channel"])
		return ch, err == nil, nil
	}
	(&admission.Webhook{Source: source, Channel: channel, JudgeAgentTriple: judge, EnvSet: envSet, ServiceAccount: cfg.ServiceAccount, Log: log}).Register(mux)
	(&settingsapi.Server{Base: rc, Log: log}).Register(mux)
	if cfg.UI.API != nil {
		cfg.UI.API.Register(mux) // the Rancher UI page's data (pkg/uiapi)
	}
	ln, err := cfg.listen(cfg.WebhookAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.WebhookAddr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				if c := current.Load(); c != nil {
					return c, nil
				}
				return nil, errors.New("no webhook certificate yet")
			}}}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("webhook server stopped", "addr", ln.Addr().String(), "error", err)
			hs.fail(healthWebhookServer, err.Error())
		}
	}()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("serving the admission webhook and /v3/settings", "addr", ln.Addr().String())
	return func() { <-stopped }, nil
}
