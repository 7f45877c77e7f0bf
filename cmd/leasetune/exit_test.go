package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kubeconfigFor writes a kubeconfig whose cluster is server (plain HTTP,
// a token) and returns its path.
func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
users:
- name: u
  user:
    token: t
contexts:
- name: c
  context:
    cluster: c
    user: u
current-context: c
`, server)
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// refusedServer returns the URL of an address nothing listens on.
func refusedServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// TestExitCodes: 2 with the usage for flag and argument errors, 1 without
// it for errors of the work (a kube-apiserver that refuses connections).
func TestExitCodes(t *testing.T) {
	kc := kubeconfigFor(t, refusedServer(t))
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr []string // substrings
	}{
		{"plan: refused server", []string{"plan", "--kubeconfig", kc}, 1, []string{"error: ", "connection refused"}},
		{"cleanup: refused server", []string{"cleanup", "--kubeconfig", kc}, 1, []string{"error: ", "connection refused"}},
		{"recommend: refused server", []string{"recommend", "--max-failover", "60s", "--clusters", "10", "--kubeconfig", kc}, 1, []string{"error: ", "connection refused"}},
		{"audit: refused server", []string{"audit", "--kubeconfig", kc, "-"}, 1, []string{"error: ", "connection refused"}},
		{"plan: a bad flag value", []string{"plan", "--kubeconfig", kc, "--output", "yaml"}, 2, []string{`--output "yaml": want text or json`, "Usage:"}},
		{"plan: a bad --set", []string{"plan", "--kubeconfig", kc, "--set", "novalue"}, 2, []string{"--set", "Usage:"}},
		{"plan: an unknown flag", []string{"plan", "--bogus"}, 2, []string{"unknown flag: --bogus", "Usage:"}},
		{"plan: an argument", []string{"plan", "extra"}, 2, []string{`unknown command "extra"`, "Run 'leasetune --help' for usage."}},
		{"an unknown command", []string{"planx"}, 2, []string{`unknown command "planx"`, "Run 'leasetune --help' for usage."}},
		{"controller: a bad log format", []string{"controller", "--log-format", "yaml"}, 2, []string{`--log-format "yaml"`, "Usage:"}},
		// The page's API and its token path are gone (issue 25): so is their flag.
		{"controller: the removed --ui-api-upstream", []string{"controller", "--ui-api-upstream", "http://x", "--log-format", "text"}, 2, []string{"unknown flag: --ui-api-upstream", "Usage:"}},
		{"recommend: no target", []string{"recommend"}, 2, []string{"flag --max-failover is required", "Usage:"}},
		{"recommend: --kubeconfig without --clusters", []string{"recommend", "--max-failover", "60s", "--kubeconfig", kc}, 2, []string{"--kubeconfig: only with --clusters N", "Usage:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			restoreLoggers(t) // controller routes the libraries' logs
			code, out, errs := runCmd(t, "", c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, out, errs)
			}
			for _, s := range c.stderr {
				if !strings.Contains(errs, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errs)
				}
			}
			if c.code == 1 && (strings.Contains(errs, "Usage:") || strings.Contains(errs, "--help")) {
				t.Errorf("a runtime error with a usage hint:\n%s", errs)
			}
		})
	}
}

// TestCancelEndsCommand: the end of the root command's context (SIGINT,
// SIGTERM in main) ends a command waiting on the kube-apiserver, and one
// reading a log.
func TestCancelEndsCommand(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers while the client waits
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	kc := kubeconfigFor(t, srv.URL)

	for _, args := range [][]string{
		{"plan", "--kubeconfig", kc},
		{"cleanup", "--kubeconfig", kc},
		{"recommend", "--max-failover", "60s", "--clusters", "10", "--kubeconfig", kc},
	} {
		t.Run(args[0], func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			var out, errb bytes.Buffer
			done := make(chan int, 1)
			go func() { done <- run(ctx, args, strings.NewReader(""), &out, &errb) }()
			select {
			case code := <-done:
				if code != 1 || !strings.Contains(errb.String(), "context canceled") {
					t.Errorf("exit %d, want 1 with context canceled\nstderr:\n%s", code, &errb)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("still running 20s after its context ended")
			}
		})
	}

	t.Run("audit", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var out, errb bytes.Buffer
		code := run(ctx, []string{"audit", sampleLog(t, false)}, strings.NewReader(""), &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), "context canceled") {
			t.Errorf("exit %d, want 1 with context canceled\nstdout:\n%s\nstderr:\n%s", code, &out, &errb)
		}
	})
}

// TestNoKubeconfig: with no kubeconfig anywhere (and no pod), a command
// that needs one says where to give it, with exit 2.
func TestNoKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	code, _, errs := runCmd(t, "", "plan")
	if code != 2 || !strings.Contains(errs, "no kubeconfig: give --kubeconfig FILE, set KUBECONFIG") {
		t.Errorf("exit %d, stderr:\n%s\nwant 2 and where to give a kubeconfig", code, errs)
	}
}
