package manager

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"leasetune.io/leasetune/pkg/admission"
	"leasetune.io/leasetune/pkg/own"
)

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

// webhookCert keeps the serving certificate of the webhook's HTTPS server:
// it reads (or makes) it from the Secret own.WebhookSecret and publishes
// its CA in the caBundle of the ValidatingWebhookConfiguration
// cfg.WebhookConfigName. A look that fails is retried with backoff while
// /readyz says why; at rest the Secret and the configuration are watched,
// by name, and looked at again only when they change (a rotation, a
// changed caBundle).
type webhookCert struct {
	cs    kubernetes.Interface
	cfg   Config
	log   *slog.Logger
	hs    *health
	hosts []string // the names the certificate is made for

	current   atomic.Pointer[tls.Certificate] // served; nil until a look succeeded
	currentCA []byte                          // the CA of current (only refresh touches it)
}

// keepWebhookCert makes the first look at the certificate and starts
// keeping it current until ctx ends (webhookCert). It returns after the
// first look, whether it succeeded or not: until one does, the replica is
// not ready, and the Fail-policy webhook waits rather than the pod
// crash-looping.
func keepWebhookCert(ctx context.Context, cs kubernetes.Interface, cfg Config, log *slog.Logger, hs *health) *webhookCert {
	k := &webhookCert{cs: cs, cfg: cfg, log: log, hs: hs, hosts: append([]string{
		cfg.WebhookService + "." + cfg.Namespace + ".svc",
		cfg.WebhookService + "." + cfg.Namespace + ".svc.cluster.local",
	}, cfg.WebhookHosts...)}
	firstErr := k.refresh(ctx)
	if firstErr != nil {
		hs.wait(readyWebhookCert, notYet(firstErr))
	}
	kick := k.watch(ctx)
	go k.retry(ctx, kick, firstErr)
	return k
}

// get is the server's tls.Config.GetCertificate: the certificate in
// place, or an error before there is one.
func (k *webhookCert) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := k.current.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no webhook certificate yet")
}

// refresh makes one look: it reads (or makes) the certificate, serves it
// when its CA changed, and publishes the CA in the webhook configuration.
// Errors: those of the Secret's read or write, or of the caBundle's patch
// (naming the configuration), each look bounded by certAttemptTimeout.
func (k *webhookCert) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, certAttemptTimeout)
	defer cancel()
	cert, caPEM, err := admission.EnsureCerts(ctx, k.cs, k.cfg.Namespace, own.WebhookSecret, k.hosts)
	if err != nil {
		return err
	}
	if !bytes.Equal(caPEM, k.currentCA) {
		if k.currentCA != nil {
			k.log.Info("webhook certificate changed; serving the new one")
		}
		k.current.Store(&cert)
		k.currentCA = caPEM
	}
	if k.cfg.WebhookConfigName == "" {
		return nil // no webhook configuration to publish the caBundle in
	}
	if err := admission.PatchCABundle(ctx, k.cs, k.cfg.WebhookConfigName, caPEM); err != nil {
		return fmt.Errorf("publish the caBundle of ValidatingWebhookConfiguration %s: %w", k.cfg.WebhookConfigName, err)
	}
	return nil
}

// notYet is what /readyz says until a look has succeeded (the certificate
// served and its caBundle published).
func notYet(err error) string {
	return fmt.Sprintf("not in place yet: %v; trying again with backoff", err)
}

// watch starts the watches, by name, of the Secret and the webhook
// configuration until ctx ends; the returned channel receives when either
// changes (at most one signal waits).
func (k *webhookCert) watch(ctx context.Context) <-chan struct{} {
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
	sf := informers.NewSharedInformerFactoryWithOptions(k.cs, 0, informers.WithNamespace(k.cfg.Namespace), byName(own.WebhookSecret))
	_, _ = sf.Core().V1().Secrets().Informer().AddEventHandler(handler)
	sf.Start(ctx.Done())
	context.AfterFunc(ctx, sf.Shutdown)
	if k.cfg.WebhookConfigName != "" {
		vf := informers.NewSharedInformerFactoryWithOptions(k.cs, 0, byName(k.cfg.WebhookConfigName))
		_, _ = vf.Admissionregistration().V1().ValidatingWebhookConfigurations().Informer().AddEventHandler(handler)
		vf.Start(ctx.Done())
	}
	return kick
}

// retry looks again at every kick, and after a failed look with backoff
// (certFirstRetry, doubled after each failure up to cfg.CertCheckInterval,
// else certCheckInterval, and back to certFirstRetry after a success),
// until ctx ends; firstErr is the first look's error. /readyz says why
// until a look succeeds.
func (k *webhookCert) retry(ctx context.Context, kick <-chan struct{}, firstErr error) {
	maxBackoff := k.cfg.CertCheckInterval
	if maxBackoff <= 0 {
		maxBackoff = certCheckInterval
	}
	backoff := certFirstRetry
	var again <-chan time.Time
	inPlace := firstErr == nil
	fail := func(err error) {
		if !inPlace {
			k.hs.wait(readyWebhookCert, notYet(err))
		}
		k.log.Error("webhook certificate; trying again", "error", err, "in", backoff.String())
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
		err := k.refresh(ctx)
		switch {
		case err == nil:
			if !inPlace {
				k.log.Info("webhook certificate in place; ready")
				inPlace = true
				k.hs.wait(readyWebhookCert, "")
			}
			backoff = certFirstRetry
		case ctx.Err() == nil:
			fail(err)
		}
	}
}
