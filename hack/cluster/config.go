package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Files the node's processes read, written at `up` into the state folder.

// containerdConfig: containerd 1.6 (Debian bookworm) with its CRI plugin,
// every path under the state folder that containerd lets one choose (runc's
// root and the pods' network namespaces among them); down.go removes the
// files it does not (shim sockets, CNI results). restrict_oom_score_adj: processes
// here cannot lower their OOM score, and without it every sandbox fails
// with runc's "can't get final child's PID from pipe".
func (c *cluster) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[8]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
`, c.p("containerd"), c.p("run/containerd"), c.socket(), c.p("opt"), pauseImage, cniBinDir, c.p("cni/net.d"), c.p("run/runc"))
}

// cniConfig: one bridge, cni0, the node routing for it.
func (c *cluster) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "leasetune",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, podCIDR, podGateway, c.p("cni/ipam"))
}

// kubeletConfig: cgroupfs (containerd 1.6 does not tell the kubelet its
// driver) below a cgroupRoot of the node's own, cgroup v1 allowed (this
// machine's), the pods' logs in the state folder, no image garbage
// collection (the images are imported, never pulled), eviction only at
// the very end of memory and disk: the node shares the machine's disk,
// where the kubelet's default of 10% (or any share) of a large, mostly
// full disk can be gigabytes, and pods were evicted with a few GiB free.
func (c *cluster) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[2]q}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: /%[4]s
failCgroupV1: false
podLogsDir: %[5]q
failSwapOn: false
containerRuntimeEndpoint: unix://%[3]s
resolvConf: ""
oomScoreAdj: 0
imageGCHighThresholdPercent: 100
evictionHard:
  memory.available: 100Mi
  nodefs.available: %[6]s
  imagefs.available: %[6]s
  nodefs.inodesFree: 1%%
serializeImagePulls: false
`, nodeIP, c.p("pki/ca.crt"), c.socket(), cgroupName, c.p("pod-logs"), evictionDiskFree)
}

// kubeProxyConfig: iptables, masquerading all Service traffic so that
// replies from a pod on the same bridge come back through the node.
func (c *cluster) kubeProxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
oomScoreAdj: 0
iptables:
  masqueradeAll: true
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, c.p("kube-proxy.kubeconfig"), podCIDR, nodeName, nodeIP)
}

func (c *cluster) writeConfigs() error {
	files := map[string]string{
		"containerd.toml":                 c.containerdConfig(),
		"cni/net.d/10-leasetune.conflist": c.cniConfig(),
		"kubelet.yaml":                    c.kubeletConfig(),
		"kube-proxy.yaml":                 c.kubeProxyConfig(),
	}
	for name, body := range files {
		path := c.p(name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// processes are the node's, in the order they start.
func (c *cluster) processes() []proc {
	bin := func(n string) string { return filepath.Join(c.assets, n) }
	pki := func(n string) string { return c.p("pki/" + n) }
	return []proc{
		{"containerd", []string{"containerd", "--config", c.p("containerd.toml")}},
		{"etcd", []string{bin("etcd"), "--data-dir", c.p("etcd"), "--name", nodeName,
			"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
			"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
			"--initial-cluster", nodeName + "=http://127.0.0.1:2380", "--unsafe-no-fsync"}},
		{"kube-apiserver", []string{bin("kube-apiserver"),
			"--etcd-servers", "http://127.0.0.1:2379",
			"--advertise-address", nodeIP, "--bind-address", "0.0.0.0", "--secure-port", apiPort,
			"--service-cluster-ip-range", svcCIDR,
			"--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction",
			"--client-ca-file", pki("ca.crt"),
			"--tls-cert-file", pki("apiserver.crt"), "--tls-private-key-file", pki("apiserver.key"),
			"--kubelet-client-certificate", pki("apiserver-kubelet-client.crt"),
			"--kubelet-client-key", pki("apiserver-kubelet-client.key"),
			// The node's address, never its name: a name would be looked
			// up with the host's resolver, off the machine.
			"--kubelet-preferred-address-types", "InternalIP",
			"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file", pki("sa.pub"), "--service-account-signing-key-file", pki("sa.key"),
			"--allow-privileged=true"}},
		{"kube-controller-manager", []string{bin("kube-controller-manager"),
			"--kubeconfig", c.p("kube-controller-manager.kubeconfig"),
			"--authentication-kubeconfig", c.p("kube-controller-manager.kubeconfig"),
			"--authorization-kubeconfig", c.p("kube-controller-manager.kubeconfig"),
			"--bind-address", "127.0.0.1", "--leader-elect=false", "--use-service-account-credentials",
			"--service-account-private-key-file", pki("sa.key"), "--root-ca-file", pki("ca.crt"),
			"--cluster-signing-cert-file", pki("ca.crt"), "--cluster-signing-key-file", pki("ca.key")}},
		{"kube-scheduler", []string{bin("kube-scheduler"),
			"--kubeconfig", c.p("kube-scheduler.kubeconfig"),
			"--authentication-kubeconfig", c.p("kube-scheduler.kubeconfig"),
			"--authorization-kubeconfig", c.p("kube-scheduler.kubeconfig"),
			"--bind-address", "127.0.0.1", "--leader-elect=false"}},
		{"kubelet", []string{bin("kubelet"), "--config", c.p("kubelet.yaml"),
			"--kubeconfig", c.p("kubelet.kubeconfig"), "--hostname-override", nodeName, "--node-ip", nodeIP,
			"--root-dir", c.p("kubelet"), "--cert-dir", c.p("kubelet/pki")}},
		{"kube-proxy", []string{bin("kube-proxy"), "--config", c.p("kube-proxy.yaml")}},
	}
}

// pkiFiles issues every certificate and kubeconfig of the node.
func (c *cluster) pkiFiles() error {
	p, err := newPKI(c.p("pki"))
	if err != nil {
		return err
	}
	internal := "https://" + nodeIP + ":" + apiPort
	certs := []struct {
		name, cn string
		orgs     []string
	}{
		{"admin", "leasetune-cluster-admin", []string{"system:masters"}},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}},
		{"kube-controller-manager", "system:kube-controller-manager", nil},
		{"kube-scheduler", "system:kube-scheduler", nil},
		{"kubelet", "system:node:" + nodeName, []string{"system:nodes"}},
		{"kube-proxy", "system:kube-proxy", nil},
	}
	for _, ct := range certs {
		if err := p.issue(ct.name, ct.cn, ct.orgs, nil, nil); err != nil {
			return err
		}
		if ct.name == "apiserver-kubelet-client" {
			continue
		}
		server := internal
		if ct.name == "admin" {
			server = "https://" + nodeLinkIP + ":" + apiPort
		}
		if err := p.kubeconfig(c.p(ct.name+".kubeconfig"), ct.name, server); err != nil {
			return err
		}
	}
	return p.issue("apiserver", "kube-apiserver", nil, ips(nodeIP, nodeLinkIP, svcAPI, "127.0.0.1"),
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"})
}

func (c *cluster) p(rel string) string { return filepath.Join(c.state, rel) }

func (c *cluster) socket() string { return c.p("run/containerd/containerd.sock") }

// ctr runs Debian's ctr against the node's containerd, in the CRI's
// namespace.
func (c *cluster) ctr(args ...string) (string, error) {
	out, err := execOut("ctr", append([]string{"--address", c.socket(), "--namespace", "k8s.io"}, args...)...)
	return strings.TrimSpace(out), err
}

// evictionDiskFree is the free disk below which the kubelet evicts pods;
// minDiskFree, which up requires on the state folder's filesystem, leaves
// the node's images, logs and etcd room above it.
const (
	evictionDiskFree = "256Mi"
	minDiskFree      = 1 << 30
)
