package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rancher/remotedialer"
	"github.com/sirupsen/logrus"
)

// ClusterTunnel is a double of the tunnel a downstream cluster's
// cattle-cluster-agent keeps open to Rancher, from rancher/rancher v2.15.0:
//   - cmd/agent/main.go:121-139: the headers X-API-Tunnel-Token (the
//     cluster registration token, /cattle-credentials/token) and
//     X-API-Tunnel-Params (base64 of the JSON pkg/agent/cluster/cluster.go
//     Params builds: cluster.address KUBERNETES_SERVICE_HOST:PORT,
//     cluster.token the downstream ServiceAccount cattle's token,
//     cluster.caCert the base64 of the downstream's CA);
//   - main.go:283-306: remotedialer.ClientConnect to
//     wss://<server>/v3/connect/register until the first connection, then
//     /v3/connect, again after each end (5 s; 10 s after an error, which
//     ClientConnect waits 5 s more on); local dials allowed for tcp.
//
// Rancher's side (pkg/tunnelserver/mcmauthorizer/tunnel.go
// authorizeCluster) then records the address and CA in the management
// Cluster's status, the token in a Secret the status names, and dials the downstream kube-apiserver
// through the tunnel (pkg/dialer/factory.go clusterDialer).
//
// It keeps the second session the agent's steve keeps too (the steve
// aggregation: pkg/agent/rancher/rancher.go setupSteveAggregation, url
// <server>/v3/connect and the token "stv-cluster-"+token; rancher/steve
// v0.9.18 pkg/aggregation/server.go: the header Authorization: Bearer
// <token>, and every dial from Rancher served by an HTTP handler), through
// which Rancher's clusterconnected check asks GET /ping and marks the
// cluster Connected on a 200 (pkg/controllers/management/clusterconnected
// hasSession). Its handler answers /ping and nothing else: steve's API of
// the downstream is not served.
//
// The double dials only the downstream's address. What the real agent runs
// besides (its controllers) it does not.
// remotedialer v0.4.1 (Go 1.20; Rancher v2.15.0's agent has v0.6.1, which
// needs a Go newer than this module's): the wire protocol Rancher's server
// accepts from agents of older releases.
type ClusterTunnel struct {
	cancel      context.CancelFunc
	done        chan struct{}
	steveDone   chan struct{}
	pings       atomic.Int32
	connections atomic.Int32
	mu          sync.Mutex
	up          bool
}

// TunnelParams is what the agent tells Rancher of its cluster.
type TunnelParams struct {
	// Address is the downstream kube-apiserver's host:port.
	Address string
	// Token is the downstream ServiceAccount's token Rancher acts with.
	Token string
	// CA is the PEM of the downstream kube-apiserver's CA.
	CA []byte
}

// StartClusterTunnel connects to Rancher at serverURL (https), trusting
// serverCA (Rancher's cacerts Setting: the agent's CATTLE_CA_CHECKSUM
// pins it), with the registration token.
func StartClusterTunnel(serverURL string, serverCA []byte, token string, p TunnelParams) (*ClusterTunnel, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, err
	}
	// remotedialer logs each closed connection as a warning through
	// logrus; only its errors are worth the test output.
	logrus.SetLevel(logrus.ErrorLevel)
	params, err := json.Marshal(map[string]interface{}{"cluster": map[string]interface{}{
		"address": p.Address, "token": p.Token, "caCert": base64.StdEncoding.EncodeToString(p.CA),
	}})
	if err != nil {
		return nil, err
	}
	headers := http.Header{
		"X-API-Tunnel-Token":  {token},
		"X-API-Tunnel-Params": {base64.StdEncoding.EncodeToString(params)},
	}
	pool := x509.NewCertPool()
	if len(serverCA) > 0 && !pool.AppendCertsFromPEM(serverCA) {
		return nil, fmt.Errorf("cluster tunnel: Rancher's CA is no PEM certificate")
	}
	dialer := &websocket.Dialer{HandshakeTimeout: 10 * time.Second, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	allow := func(proto, address string) bool { return proto == "tcp" && address == p.Address }
	ctx, cancel := context.WithCancel(context.Background())
	ct := &ClusterTunnel{cancel: cancel, done: make(chan struct{}), steveDone: make(chan struct{})}
	go ct.steve(ctx, "wss://"+u.Host+"/v3/connect", http.Header{"Authorization": {"Bearer stv-cluster-" + token}}, dialer)
	go func() {
		defer close(ct.done)
		for ctx.Err() == nil {
			path := "/v3/connect/register"
			if ct.Connections() > 0 {
				path = "/v3/connect"
			}
			_ = remotedialer.ConnectToProxy(ctx, "wss://"+u.Host+path, headers, allow, dialer, func(context.Context, *remotedialer.Session) error {
				ct.connections.Add(1)
				ct.setUp(true)
				return nil
			})
			ct.setUp(false)
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}()
	return ct, nil
}

func (ct *ClusterTunnel) setUp(v bool) {
	ct.mu.Lock()
	ct.up = v
	ct.mu.Unlock()
}

// Up reports whether the tunnel is connected now.
func (ct *ClusterTunnel) Up() bool {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.up
}

// steve keeps the steve aggregation session: each dial from Rancher is a
// connection to an HTTP handler that answers GET /ping with pong.
func (ct *ClusterTunnel) steve(ctx context.Context, wsURL string, headers http.Header, dialer *websocket.Dialer) {
	defer close(ct.steveDone)
	l := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/ping", func(w http.ResponseWriter, _ *http.Request) {
		ct.pings.Add(1)
		_, _ = w.Write([]byte("pong"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer func() { _ = srv.Close() }()
	all := func(string, string) bool { return true }
	for ctx.Err() == nil {
		_ = remotedialer.ConnectToProxyWithDialer(ctx, wsURL, headers, all, dialer, l.dial, nil)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
	}
}

// Pings counts Rancher's GET /ping through the steve session.
func (ct *ClusterTunnel) Pings() int { return int(ct.pings.Load()) }

// pipeListener hands the server end of in-memory connections to an
// http.Server.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "steve" }

// Connections counts the connections Rancher accepted.
func (ct *ClusterTunnel) Connections() int { return int(ct.connections.Load()) }

// Stop closes the tunnel and waits for its loop to end.
func (ct *ClusterTunnel) Stop() {
	ct.cancel()
	<-ct.done
	<-ct.steveDone
}

// HostPort is the host:port of an https URL.
func HostPort(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		return "", fmt.Errorf("%s: %w", rawURL, err)
	}
	return u.Host, nil
}
