package admission

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"leasetune.io/leasetune/pkg/own"
)

// Secret keys of the webhook's TLS Secret.
const (
	CAKey   = "ca.crt"
	CertKey = "tls.crt"
	KeyKey  = "tls.key"
)

// certValidity is how long the CA and the serving certificate are valid.
// To rotate, delete the Secret: EnsureCerts then makes a new one, which
// every replica picks up when it rereads the Secret (see
// docs/settings.md).
const certValidity = 10 * 365 * 24 * time.Hour

// EnsureCerts returns the serving certificate and the CA bundle from the
// Secret ns/name, creating the Secret with a new CA and a serving
// certificate for hosts when it does not exist. An existing Secret is never
// overwritten, so every replica serves the same certificate and publishes
// the same caBundle; a replica that loses the race to create it reads the
// winner's.
func EnsureCerts(ctx context.Context, cs kubernetes.Interface, ns, name string, hosts []string) (tls.Certificate, []byte, error) {
	secrets := cs.CoreV1().Secrets(ns)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		data, gerr := generate(hosts)
		if gerr != nil {
			return tls.Certificate{}, nil, gerr
		}
		s, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{own.ManagedByLabel: own.FieldManager}},
			Type:       corev1.SecretTypeTLS,
			Data:       data,
		}, metav1.CreateOptions{FieldManager: own.FieldManager})
		if apierrors.IsAlreadyExists(err) {
			s, err = secrets.Get(ctx, name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("webhook TLS Secret %s/%s: %w", ns, name, err)
	}
	cert, err := tls.X509KeyPair(s.Data[CertKey], s.Data[KeyKey])
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("webhook TLS Secret %s/%s: %w", ns, name, err)
	}
	if len(s.Data[CAKey]) == 0 {
		return tls.Certificate{}, nil, fmt.Errorf("webhook TLS Secret %s/%s has no %s: the caBundle cannot be published (delete the Secret to have a new one made)", ns, name, CAKey)
	}
	return cert, s.Data[CAKey], nil
}

// generate makes a CA and a serving certificate for hosts (DNS names or IPs).
func generate(hosts []string) (map[string][]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "leasetune-webhook-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certValidity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certValidity),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	ca, _ := x509.ParseCertificate(caDER)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		CAKey:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		CertKey: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyKey:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

// PatchCABundle sets caBundle on every webhook of the
// ValidatingWebhookConfiguration name whose caBundle differs, with a JSON
// patch tested against the bundle read, so two replicas never fight: they
// publish the same CA from the same Secret. A missing configuration is not
// an error (the chart may not install one).
func PatchCABundle(ctx context.Context, cs kubernetes.Interface, name string, caPEM []byte) error {
	vwcs := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	vwc, err := vwcs.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var ops []map[string]interface{}
	for i, w := range vwc.Webhooks {
		if bytes.Equal(w.ClientConfig.CABundle, caPEM) {
			continue
		}
		ops = append(ops,
			map[string]interface{}{"op": "test", "path": fmt.Sprintf("/webhooks/%d/name", i), "value": w.Name},
			map[string]interface{}{"op": "add", "path": fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), "value": caPEM})
	}
	if len(ops) == 0 {
		return nil
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	_, err = vwcs.Patch(ctx, name, types.JSONPatchType, body, metav1.PatchOptions{FieldManager: own.FieldManager})
	return err
}
