package prometheus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// scrapeInterval is how often Prometheus scrapes both targets.
const scrapeInterval = time.Second

// promServer is a Prometheus process on loopback and its HTTP API.
type promServer struct {
	addr string
	cmd  *exec.Cmd
	done chan error
	log  string
}

// target is a scrape target of the test's Prometheus.
type target struct {
	job, addr string
	// tls: scheme https with the control plane's CA and admin client
	// certificate (the kube-apiserver's /metrics needs authentication).
	tls bool
}

// startPrometheus writes a configuration scraping targets every
// scrapeInterval and starts Prometheus on a free loopback port with its
// storage in dir; it returns once the server is ready and every target
// has been scraped up.
func startPrometheus(dir string, targets []target) (*promServer, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\nscrape_configs:\n", scrapeInterval, scrapeInterval)
	for _, tg := range targets {
		fmt.Fprintf(&b, "- job_name: %s\n  static_configs:\n  - targets: [%q]\n", tg.job, tg.addr)
		if tg.tls {
			files, err := clientCertFiles(dir)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "  scheme: https\n  tls_config:\n    ca_file: %s\n    cert_file: %s\n    key_file: %s\n", files[0], files[1], files[2])
		}
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	return runPrometheus(dir, cfg, func(p *promServer) error {
		_, err := p.targetsUp(len(targets))
		return err
	})
}

// runPrometheus starts Prometheus with the configuration file cfg on a free
// loopback port, with its storage and log in dir; it returns once ready
// (nil) holds, and fails, with ready's last error and Prometheus's log,
// when that takes more than a minute or Prometheus exits.
func runPrometheus(dir, cfg string, ready func(*promServer) error) (*promServer, error) {
	l, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &promServer{addr: l, done: make(chan error, 1), log: filepath.Join(dir, "prometheus.log")}
	logf, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(prometheusBin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+p.addr, "--log.level=warn")
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() { p.done <- p.cmd.Wait(); logf.Close() }()
	deadline := time.Now().Add(time.Minute)
	for {
		err := ready(p)
		if err == nil {
			return p, nil
		} else if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("prometheus: not ready within a minute (%w); its log:\n%s", err, p.logTail())
		}
		select {
		case err := <-p.done:
			p.done <- err
			b, _ := os.ReadFile(cfg)
			return nil, fmt.Errorf("prometheus exited: %w; its configuration:\n%s\nits log:\n%s", err, b, p.logTail())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// clientCertFiles writes the control plane's CA and the admin client
// certificate and key (from its rest.Config) into dir and returns their
// paths.
func clientCertFiles(dir string) ([3]string, error) {
	var paths [3]string
	for i, f := range []struct {
		name string
		data []byte
	}{{"ca.crt", cp.Config.CAData}, {"client.crt", cp.Config.CertData}, {"client.key", cp.Config.KeyData}} {
		if len(f.data) == 0 {
			return paths, fmt.Errorf("the control plane's admin config has no %s", f.name)
		}
		paths[i] = filepath.Join(dir, f.name)
		if err := os.WriteFile(paths[i], f.data, 0o600); err != nil {
			return paths, err
		}
	}
	return paths, nil
}

// freePort returns a loopback address with a port free now.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// stop asks Prometheus to end (SIGINT) and kills it after 10 s; how it
// ended does not matter to the tests.
func (p *promServer) stop() {
	if p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	var err error
	select {
	case err = <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		err = <-p.done
	}
	_ = err
}

func (p *promServer) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// errNoParseQuery: this Prometheus has no /api/v1/parse_query (added in
// 3.0: github.com/prometheus/prometheus v0.300.0 web/api/v1/api.go has it,
// v0.55.1 has not; Debian 12's 2.42 lacks it).
var errNoParseQuery = errors.New("this Prometheus has no /api/v1/parse_query")

// apiResponse is the envelope of Prometheus's HTTP API answers.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

// get calls the HTTP API at path (GET) with the form values and decodes data
// into out; an answer other than success is an error with Prometheus's
// message.
func (p *promServer) get(path string, form url.Values, out interface{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+path+"?"+form.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusNotFound && path == "/api/v1/parse_query" {
		return errNoParseQuery
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, body)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.Data, out)
}

// targetsUp reports whether n active targets are there and all were last
// scraped up.
func (p *promServer) targetsUp(n int) (bool, error) {
	var d struct {
		ActiveTargets []struct {
			Health    string `json:"health"`
			LastError string `json:"lastError"`
			ScrapeURL string `json:"scrapeUrl"`
		} `json:"activeTargets"`
	}
	if err := p.get("/api/v1/targets", url.Values{}, &d); err != nil {
		return false, err
	}
	if len(d.ActiveTargets) != n {
		return false, fmt.Errorf("%d active targets, want %d", len(d.ActiveTargets), n)
	}
	for _, tg := range d.ActiveTargets {
		if tg.Health != "up" {
			return false, fmt.Errorf("%s: %s %s", tg.ScrapeURL, tg.Health, tg.LastError)
		}
	}
	return true, nil
}

// sample is one series of an instant vector.
type sample struct {
	Metric map[string]string
	Value  float64
}

// query evaluates expr at time at (zero: now) and returns the instant
// vector, or the scalar as one sample without labels.
func (p *promServer) query(expr string, at time.Time) ([]sample, error) {
	form := url.Values{"query": {expr}}
	if !at.IsZero() {
		form.Set("time", strconv.FormatFloat(float64(at.UnixNano())/1e9, 'f', 3, 64))
	}
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get("/api/v1/query", form, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", expr, err)
	}
	parse := func(v [2]interface{}) (float64, error) {
		s, _ := v[1].(string)
		return strconv.ParseFloat(s, 64)
	}
	switch d.ResultType {
	case "vector":
		var vs []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]interface{}    `json:"value"`
		}
		if err := json.Unmarshal(d.Result, &vs); err != nil {
			return nil, err
		}
		out := make([]sample, 0, len(vs))
		for _, v := range vs {
			f, err := parse(v.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: value %v: %w", expr, v.Value, err)
			}
			out = append(out, sample{Metric: v.Metric, Value: f})
		}
		return out, nil
	case "scalar":
		var v [2]interface{}
		if err := json.Unmarshal(d.Result, &v); err != nil {
			return nil, err
		}
		f, err := parse(v)
		return []sample{{Value: f}}, err
	}
	return nil, fmt.Errorf("%s: result type %s, want vector or scalar", expr, d.ResultType)
}

// byLabel evaluates expr at (zero: now) and returns its series' values by
// the value of label.
func (p *promServer) byLabel(expr, label string, at time.Time) (map[string]float64, error) {
	ss, err := p.query(expr, at)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range ss {
		out[s.Metric[label]] += s.Value
	}
	return out, nil
}

// total evaluates expr at at and returns the sum of its series' values.
func (p *promServer) total(expr string, at time.Time) (float64, error) {
	ss, err := p.query(expr, at)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, s := range ss {
		sum += s.Value
	}
	return sum, nil
}

// selector is a metric selector of a parsed query: its metric name and
// the label names its matchers use.
type selector struct {
	name   string
	labels []string
}

// selectors parses expr with Prometheus's own parser (/api/v1/parse_query,
// the AST as JSON) and returns every vector and matrix selector in it.
func (p *promServer) selectors(expr string) ([]selector, error) {
	var ast interface{}
	if err := p.get("/api/v1/parse_query", url.Values{"query": {expr}}, &ast); err != nil {
		return nil, err
	}
	var out []selector
	var walk func(interface{})
	walk = func(n interface{}) {
		switch n := n.(type) {
		case map[string]interface{}:
			if typ, _ := n["type"].(string); typ == "vectorSelector" || typ == "matrixSelector" {
				s := selector{}
				s.name, _ = n["name"].(string)
				ms, _ := n["matchers"].([]interface{})
				for _, m := range ms {
					mm, _ := m.(map[string]interface{})
					if l, _ := mm["name"].(string); l != "" && l != "__name__" {
						s.labels = append(s.labels, l)
					}
				}
				sort.Strings(s.labels)
				out = append(out, s)
				return
			}
			for _, v := range n {
				walk(v)
			}
		case []interface{}:
			for _, v := range n {
				walk(v)
			}
		}
	}
	walk(ast)
	return out, nil
}

// labelNames returns the label names of the series of metric name that
// Prometheus holds.
func (p *promServer) labelNames(name string) (map[string]bool, error) {
	var names []string
	if err := p.get("/api/v1/labels", url.Values{"match[]": {name}}, &names); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out, nil
}
