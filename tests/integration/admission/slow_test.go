package admission_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/admission"
	"leasetune.io/leasetune/pkg/manager"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
)

// slowProxy forwards to the real kube-apiserver; while slow is set, reads
// of Setting objects by name wait 8s (or until the caller gives up).
type slowProxy struct {
	slow  atomic.Bool
	proxy *httputil.ReverseProxy
}

func (p *slowProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.slow.Load() && r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/apis/management.cattle.io/v3/settings/") {
		select {
		case <-time.After(8 * time.Second):
		case <-r.Context().Done():
			return
		}
	}
	p.proxy.ServeHTTP(w, r)
}

// TestAdmissionWhileTheAPIServerIsSlow: the webhook reads the Settings it
// judges live, within a deadline (5s) below the apiserver's 10s webhook
// timeout. With reads stalled, a review of one of our settings is refused
// with a clear message (failurePolicy Fail: the write waits for a good
// answer) in about the deadline, and no goroutine is left behind.
func TestAdmissionWhileTheAPIServerIsSlow(t *testing.T) {
	cp.ResetSettings(t)
	target, err := url.Parse(cp.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rest.TransportFor(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	sp := &slowProxy{proxy: httputil.NewSingleHostReverseProxy(target)}
	sp.proxy.Transport = tr
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: sp}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	ns := cp.Namespace(t)
	addr := framework.FreeAddr(t)
	via := &rest.Config{Host: "http://" + ln.Addr().String(), QPS: 100, Burst: 200}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- manager.Run(ctx, via, manager.Config{
			Namespace: ns, FleetNamespace: cp.Namespace(t), RancherNamespace: cp.Namespace(t), QPS: 100, Burst: 200, Workers: 1,
			WebhookAddr: addr, WebhookService: "leasetune-webhook", WebhookHosts: []string{"127.0.0.1"},
			ServiceAccount: "system:serviceaccount:" + ns + ":leasetune",
		}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager.Run after cancel: %v", err)
		}
	})
	framework.Eventually(t, "settings created", func() bool {
		l, err := dyn().Resource(framework.SettingsGVR).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(l.Items) >= len(settings.Registry)
	})

	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	review := func() (*admissionv1.AdmissionResponse, time.Duration) {
		obj := []byte(`{"apiVersion":"management.cattle.io/v3","kind":"Setting","metadata":{"name":"` + retry + `"},"value":"5s"}`)
		old := []byte(`{"apiVersion":"management.cattle.io/v3","kind":"Setting","metadata":{"name":"` + retry + `"},"value":""}`)
		ar := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "1", Operation: admissionv1.Update, Name: retry,
				Kind:     metav1.GroupVersionKind{Group: "management.cattle.io", Version: "v3", Kind: "Setting"},
				Resource: metav1.GroupVersionResource(framework.SettingsGVR)}}
		ar.Request.Object.Raw, ar.Request.OldObject.Raw = obj, old
		ar.Request.UserInfo.Username = "someone"
		body, _ := json.Marshal(ar)
		began := time.Now()
		resp, err := client.Post("https://"+addr+admission.SettingsPath, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("review: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(b, &out); err != nil || out.Response == nil {
			t.Fatalf("answer %s: %v", b, err)
		}
		return out.Response, time.Since(began)
	}
	framework.Eventually(t, "webhook answers", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if r, _ := review(); !r.Allowed {
		t.Fatalf("a valid value refused with the apiserver fast: %v", r.Result)
	}
	time.Sleep(2 * time.Second)
	baseline := runtime.NumGoroutine()

	sp.slow.Store(true)
	for i := 0; i < 3; i++ {
		r, took := review()
		if r.Allowed {
			t.Errorf("allowed while the reads were stalled: the webhook judged without the current values")
		} else if msg := r.Result.Message; !strings.Contains(msg, "read current settings") || !strings.Contains(msg, "deadline") {
			t.Errorf("refusal does not say why: %q", msg)
		}
		if took < 4*time.Second || took > 7*time.Second {
			t.Errorf("answered after %s, want about the 5s deadline", took)
		}
	}
	sp.slow.Store(false)
	time.Sleep(3 * time.Second)
	if n := runtime.NumGoroutine(); n > baseline+5 {
		t.Errorf("%d goroutines after the slow reviews, %d before: some were left behind", n, baseline)
	}
	if r, _ := review(); !r.Allowed {
		t.Errorf("refused once the apiserver is fast again: %v", r.Result)
	}
}
