package framework

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// TokenFiller is a double of kube-controller-manager's token controller,
// which the test control plane does not run: it fills every Secret of type
// kubernetes.io/service-account-token that has no token with one of its
// ServiceAccount (the annotation kubernetes.io/service-account.name), its
// namespace and the API server's CA, the keys
// k8s.io/kubernetes v1.32.13 pkg/controller/serviceaccount/
// tokens_controller.go generateTokenIfNeeded writes. Rancher waits for
// such Secrets (its impersonation accounts; docs/upstream.md).
// The token is a TokenRequest token valid a year (the controller's are
// legacy tokens that never expire), as the README's workaround does.
type TokenFiller struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	filled int
	errs   []string
}

// StartTokenFiller starts the double and returns once its cache synced.
func StartTokenFiller(cfg *rest.Config) (*TokenFiller, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &TokenFiller{cancel: cancel}
	inf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("type", string(corev1.SecretTypeServiceAccountToken)).String()
	})).Core().V1().Secrets().Informer()
	fill := func(obj interface{}) {
		s, ok := obj.(*corev1.Secret)
		if !ok || len(s.Data[corev1.ServiceAccountTokenKey]) > 0 {
			return
		}
		go f.fill(ctx, cs, cfg.CAData, s.Namespace, s.Name)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: fill, UpdateFunc: func(_, n interface{}) { fill(n) }}); err != nil {
		cancel()
		return nil, err
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("token filler: Secret cache did not sync")
	}
	return f, nil
}

func (f *TokenFiller) fill(ctx context.Context, cs kubernetes.Interface, ca []byte, ns, name string) {
	err := func() error {
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.Data[corev1.ServiceAccountTokenKey]) > 0 {
			return nil
		}
		sa := s.Annotations[corev1.ServiceAccountNameKey]
		if sa == "" {
			return fmt.Errorf("no annotation %s", corev1.ServiceAccountNameKey)
		}
		year := int64((365 * 24 * time.Hour).Seconds())
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &year}}, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			return nil // the ServiceAccount is gone (or not yet made): the Secret's next change retries
		}
		if err != nil {
			return err
		}
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[corev1.ServiceAccountTokenKey] = []byte(tr.Status.Token)
		s.Data[corev1.ServiceAccountRootCAKey] = ca
		s.Data[corev1.ServiceAccountNamespaceKey] = []byte(ns)
		_, err = cs.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		return err
	}()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) {
		f.errs = append(f.errs, fmt.Sprintf("%s/%s: %v", ns, name, err))
	} else if err == nil {
		f.filled++
	}
}

// Errors returns what the double could not do.
func (f *TokenFiller) Errors() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.errs...)
}

// Stop stops the double.
func (f *TokenFiller) Stop() { f.cancel() }
