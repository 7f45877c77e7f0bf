package framework

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// RancherNamespace and RancherDeployment are where Rancher's chart runs
// (its installation docs' namespace; the Deployment is the release name).
const (
	RancherNamespace  = "cattle-system"
	RancherDeployment = "rancher"
	// RancherPassword is the bootstrap password of the admin user.
	RancherPassword = "leasetune-upstream-admin"
)

// RancherServer is where the Rancher the Kubelet double runs answers. Its
// addresses stay the same across the pods of a rollout (the server URL
// is a setting; Rancher binds :6666 whatever the pod, so only one Rancher
// runs on the machine at a time).
type RancherServer struct {
	HTTP, HTTPS, Profile string
}

// URL is Rancher's server URL (https, loopback).
func (r RancherServer) URL() string { return "https://" + r.HTTPS }

// NewRancherServer chooses Rancher's addresses: an HTTPS port whose next
// port is free too (Rancher also listens there).
func NewRancherServer() (RancherServer, error) {
	var s RancherServer
	for i := 0; i < 50; i++ {
		a, err := FreeAddr()
		if err != nil {
			return s, err
		}
		_, port, _ := net.SplitHostPort(a)
		n, _ := strconv.Atoi(port)
		next := "127.0.0.1:" + strconv.Itoa(n+1)
		if l, err := net.Listen("tcp", next); err == nil {
			l.Close()
			s.HTTPS = a
			break
		}
	}
	if s.HTTPS == "" {
		return s, fmt.Errorf("no free pair of ports for Rancher")
	}
	var err error
	if s.HTTP, err = FreeAddr(); err != nil {
		return s, err
	}
	s.Profile, err = FreeAddr()
	return s, err
}

// RancherChart copies Rancher's chart (chart/ of its source tree) into
// dir with the release's version in Chart.yaml, where the tree has the
// %VERSION% and %APP_VERSION% placeholders its release build fills, and
// returns its path.
func RancherChart(b Binaries, dir, version string) (string, error) {
	dst := filepath.Join(dir, "rancher-chart")
	if err := copyTree(filepath.Join(b.RancherTree, "chart"), dst); err != nil {
		return "", err
	}
	p := filepath.Join(dst, "Chart.yaml")
	c, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	s := strings.ReplaceAll(string(c), "%APP_VERSION%", version)
	s = strings.ReplaceAll(s, "%VERSION%", strings.TrimPrefix(version, "v"))
	return dst, os.WriteFile(p, []byte(s), 0o644)
}

// RancherValues are the values the suite installs Rancher's chart with,
// written to dir/rancher-values.yaml: one replica (one Rancher per
// machine), the bootstrap password, the bundled system charts, the image
// tag of the release (leasetune reads Rancher's version from it), the
// chart's default TLS (tls ingress, source rancher: Rancher's own CA, so
// Rancher publishes it in cacerts and Fleet's agents trust it) without the
// ingress itself, and in extraEnv what a Rancher outside a cluster needs:
// CATTLE_DEV_MODE (no driver jail), the server URL, and no Harvester
// feature (docs/upstream.md), and where a dashboard is built
// (scripts/dashboard.sh), that dashboard served from disk
// (ui-offline-preferred true and ui-dashboard-path: rancher/rancher
// v2.12.12 pkg/ui/handler.go, steve v0.6.53 pkg/ui/handler.go; the image's
// own is in /usr/share/rancher/ui-dashboard). The aggregation registration
// timeout is long: the kube-apiserver cannot reach Rancher's extension
// API here, and Rancher exits after the default 5 minutes.
func RancherValues(dir, version string, s RancherServer, dashboard string) (string, error) {
	env := []map[string]string{
		{"name": "CATTLE_DEV_MODE", "value": "yes"},
		{"name": "CATTLE_SERVER_URL", "value": s.URL()},
	}
	if dashboard != "" {
		env = append(env, map[string]string{"name": "CATTLE_UI_OFFLINE_PREFERRED", "value": "true"},
			map[string]string{"name": "CATTLE_UI_DASHBOARD_PATH", "value": dashboard})
	}
	v := map[string]interface{}{
		"replicas":                       1,
		"bootstrapPassword":              RancherPassword,
		"useBundledSystemChart":          true,
		"rancherImageTag":                version,
		"hostname":                       "127.0.0.1",
		"ingress":                        map[string]interface{}{"enabled": false},
		"features":                       "harvester=false",
		"aggregationRegistrationTimeout": "87600h",
		"extraEnv":                       env,
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "rancher-values.yaml")
	return p, os.WriteFile(p, b, 0o600)
}

// RancherRunner runs the rancher container of Rancher's Deployment as the
// Rancher server built from the suite's tag with the chart's args, its ports
// moved to s's loopback addresses (--http-listen-port, --https-listen-port,
// and --profile-listen-address, 127.0.0.1:6060 by default; the chart's
// container ports 80, 443 and 444, its internal listener at the HTTPS
// port + 1, rancher/rancher v2.12.12 pkg/tls/tls.go, map to them), and the pod's
// kubeconfig (Rancher's --kubeconfig reads KUBECONFIG: rancher/rancher
// v2.12.12 main.go). Ready when /ping answers pong (the chart's probes ask
// /healthz on the HTTP port; /ping is what docs/upstream.md
// found ready). The process also gets what Rancher's image sets in its
// environment for the server (rancher/rancher v2.12.12 package/Dockerfile:
// ENV CATTLE_SERVER_VERSION=${VERSION}, which the settings provider reads
// as the server-version Setting; without it the Setting is "dev", and
// Rancher takes itself for a development build: pkg/settings/setting.go
// IsRelease, which, for one, turns off the catalog's filtering of chart
// versions by catalog.cattle.io/rancher-version and kube-version,
// pkg/catalogv2/content/content.go filterReleases).
func RancherRunner(b Binaries, version string, s RancherServer) Runner {
	_, httpPort, _ := net.SplitHostPort(s.HTTP)
	_, httpsPort, _ := net.SplitHostPort(s.HTTPS)
	client := insecureClient(2 * time.Second)
	return Runner{
		Exec: func(p *Pod, c *corev1.Container, argv []string) (string, []string, bool, error) {
			if c.Name != "rancher" {
				return "", nil, false, fmt.Errorf("unknown container %s in Rancher's Deployment", c.Name)
			}
			args := setFlag(argv, "--http-listen-port", httpPort)
			args = setFlag(args, "--https-listen-port", httpsPort)
			args = setFlag(args, "--profile-listen-address", s.Profile)
			return b.Rancher, args, true, nil
		},
		Env: func(p *Pod, c *corev1.Container) []string {
			return []string{"CATTLE_SERVER_VERSION=" + version}
		},
		Ready: func(ctx context.Context, p *Pod) bool {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/ping", nil)
			resp, err := client.Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode == http.StatusOK && string(body) == "pong"
		},
		Port: func(p *Pod, port int32) (string, error) {
			_, https, _ := net.SplitHostPort(s.HTTPS)
			n, _ := strconv.Atoi(https)
			switch port {
			case 80:
				return s.HTTP, nil
			case 443:
				return s.HTTPS, nil
			case 444:
				return "127.0.0.1:" + strconv.Itoa(n+1), nil
			case 6666:
				return "127.0.0.1:6666", nil
			}
			return "", fmt.Errorf("rancher has no port %d", port)
		},
		Grace:    30 * time.Second,
		Recreate: true, // :6666 and the server URL's ports are the machine's
	}
}

// setFlag returns args with flag name set to value: an existing
// "--name=v" or "--name v" is replaced, else "--name=value" is appended.
func setFlag(args []string, name, value string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if a == name && i+1 < len(out) {
			out[i+1] = value
			return out
		}
		if strings.HasPrefix(a, name+"=") {
			out[i] = name + "=" + value
			return out
		}
	}
	return append(out, name+"="+value)
}

func insecureClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		// Rancher's own self-signed certificate, on loopback.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
}

// RancherAPI is a client of Rancher's HTTP API (Norman's /v3 and steve's
// /v1) with a login token, as Rancher's UI uses it.
type RancherAPI struct {
	URL, Token string
	client     *http.Client
	// user and password log in again when Rancher answers 401 to the
	// token (seen once beside v2.15.0 with a token 30 s old); Relogins
	// counts it.
	user, password string
	Relogins       int
}

// Login logs user in with Rancher's local auth provider
// (POST /v3-public/localProviders/local?action=login, responseType json)
// and returns a client with the token it answers.
func Login(ctx context.Context, url, user, password string) (*RancherAPI, error) {
	a := &RancherAPI{URL: url, client: insecureClient(30 * time.Second), user: user, password: password}
	code, body, err := a.send(ctx, http.MethodPost, "/v3-public/localProviders/local?action=login",
		map[string]string{"username": user, "password": password, "responseType": "json"})
	if err != nil {
		return nil, err
	}
	if code != http.StatusCreated && code != http.StatusOK {
		return nil, fmt.Errorf("login %s: %d %s", user, code, body)
	}
	var tok struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.Token == "" {
		return nil, fmt.Errorf("login %s: no token in %s", user, body)
	}
	a.Token = tok.Token
	return a, nil
}

// Do sends a request with the token (if any) and a JSON body (if not
// nil) and returns the status code and the body.
func (a *RancherAPI) Do(ctx context.Context, method, path string, body interface{}) (int, []byte, error) {
	code, b, err := a.send(ctx, method, path, body)
	if err != nil || code != http.StatusUnauthorized || a.Token == "" || a.user == "" {
		return code, b, err
	}
	again, lerr := Login(ctx, a.URL, a.user, a.password)
	if lerr != nil {
		return code, b, err
	}
	a.Token = again.Token
	a.Relogins++
	return a.send(ctx, method, path, body)
}

// send sends one request with the token (if any) and a JSON body.
func (a *RancherAPI) send(ctx context.Context, method, path string, body interface{}) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.URL+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.Token != "" {
		req.Header.Set("Authorization", "Bearer "+a.Token)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
