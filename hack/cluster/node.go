package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The node's network. Every address is in 198.18.0.0/15 (RFC 2544: for
// network tests) and lives in the network namespace netnsName, but for the
// host end of one veth pair, the way in for kubectl and helm. The
// namespace's default route leads to a bridge with no port, so nothing a
// pod or component sends leaves the namespace, except to the host end.
const (
	netnsName   = "leasetune-node"
	nodeName    = "leasetune-node"
	clusterName = "leasetune-cluster"

	nodeBridge = "lt0"           // no port: the default route's dead end
	nodeIP     = "198.18.0.1"    // the node's address (kubelet, advertised by the apiserver)
	deadEnd    = "198.18.0.2"    // the default route's gateway: nothing answers
	hostLink   = "lt-host"       // the veth end in the host's namespace
	nodeLink   = "lt-node"       // its peer in the node's namespace
	hostIP     = "198.18.255.1"  // /30 with nodeLinkIP
	nodeLinkIP = "198.18.255.2"  // where the host reaches the apiserver
	podCIDR    = "198.18.1.0/24" // the CNI bridge cni0
	podGateway = "198.18.1.1"    // cni0's address
	svcCIDR    = "198.19.0.0/24" // Service cluster IPs
	svcAPI     = "198.19.0.1"    // the kubernetes Service
	apiPort    = "6443"
)

// run runs a command, returning its combined output in the error.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func netnsExists() bool {
	_, err := os.Stat(filepath.Join("/run/netns", netnsName))
	return err == nil
}

// network makes the node's namespace, its dead-end bridge with the node's
// address and default route, and the veth pair to the host.
func network() error {
	steps := [][]string{
		{"ip", "netns", "add", netnsName},
		{"ip", "-n", netnsName, "link", "set", "lo", "up"},
		{"ip", "-n", netnsName, "link", "add", nodeBridge, "type", "bridge"},
		{"ip", "-n", netnsName, "addr", "add", nodeIP + "/24", "dev", nodeBridge},
		{"ip", "-n", netnsName, "link", "set", nodeBridge, "up"},
		{"ip", "-n", netnsName, "route", "add", "default", "via", deadEnd, "dev", nodeBridge},
		{"ip", "link", "add", hostLink, "type", "veth", "peer", "name", nodeLink, "netns", netnsName},
		{"ip", "addr", "add", hostIP + "/30", "dev", hostLink},
		{"ip", "link", "set", hostLink, "up"},
		{"ip", "-n", netnsName, "addr", "add", nodeLinkIP + "/30", "dev", nodeLink},
		{"ip", "-n", netnsName, "link", "set", nodeLink, "up"},
		// Pods reach Services and each other through the node: routing, not
		// only bridging (kube-proxy masquerades all Service traffic, so no
		// br_netfilter is needed).
		{"ip", "netns", "exec", netnsName, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{"ip", "netns", "exec", netnsName, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// proc is one of the node's processes, started detached (its own session)
// in the node's namespace, logging to <state>/logs/<name>.log, its pid in
// <state>/pids/<name>.
type proc struct {
	name string
	args []string
}

func (c *cluster) start(p proc) error {
	logf, err := os.OpenFile(filepath.Join(c.state, "logs", p.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	// nsenter, not ip netns exec: that one remounts /sys for the
	// namespace, which hides the cgroup mounts the kubelet needs.
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + netnsName, "--"}, p.args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = c.state
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	pid := cmd.Process.Pid
	if err := os.WriteFile(filepath.Join(c.state, "pids", p.name), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select { // a process that cannot start usually says so at once
	case err := <-exited:
		return fmt.Errorf("%s exited at start (%w): see %s", p.name, err, logf.Name())
	case <-time.After(time.Second):
	}
	return cmd.Process.Release()
}

// alive reports whether the process named is running.
func (c *cluster) alive(name string) bool {
	pid, ok := c.pid(name)
	return ok && syscall.Kill(pid, 0) == nil
}

func (c *cluster) pid(name string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(c.state, "pids", name))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil
}

// waitFor polls cond every half second until it holds or d passes; the
// processes named must stay alive meanwhile.
func (c *cluster) waitFor(ctx context.Context, what string, d time.Duration, cond func() error, procs ...string) error {
	deadline := time.Now().Add(d)
	var last error
	for {
		if last = cond(); last == nil {
			return nil
		}
		for _, p := range procs {
			if !c.alive(p) {
				return fmt.Errorf("%s: %s exited: see %s", what, p, filepath.Join(c.state, "logs", p+".log"))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s: %w", what, d, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ips parses addresses.
func ips(s ...string) []net.IP {
	out := make([]net.IP, 0, len(s))
	for _, a := range s {
		out = append(out, net.ParseIP(a))
	}
	return out
}

var errNotRoot = errors.New("the node needs root (containerd, runc, network namespaces)")

// kubeletSysctls are the kernel settings the kubelet sets at start when
// they differ (kubernetes v1.36.3 pkg/kubelet/cm/container_manager_linux.go
// setupKernelTunables; protectKernelDefaults is false): machine-wide, so up
// records them and down puts them back.
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic",
	"kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

func (c *cluster) saveSysctls() error {
	if _, err := os.Stat(c.p("sysctl-before")); err == nil {
		return nil // a second up must not record the kubelet's values as the machine's
	}
	var b strings.Builder
	for _, k := range kubeletSysctls {
		v, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s=%s\n", k, strings.TrimSpace(string(v)))
	}
	return os.WriteFile(c.p("sysctl-before"), []byte(b.String()), 0o644)
}

func (c *cluster) restoreSysctls() error {
	b, err := os.ReadFile(c.p("sysctl-before"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, ok := strings.Cut(l, "=")
		if !ok || !slices.Contains(kubeletSysctls, k) {
			return fmt.Errorf("%s: line %q", c.p("sysctl-before"), l)
		}
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
			return fmt.Errorf("restore %s=%s: %w", k, v, err)
		}
	}
	return nil
}

// cgroupName is the kubelet's cgroupRoot: the node's cgroups live below
// /sys/fs/cgroup/<hierarchy>/leasetune-cluster, apart from any other
// kubelet's kubepods on the machine.
const cgroupName = "leasetune-cluster"

// cgroupRoots are the node's cgroup roots that exist, one per hierarchy.
func cgroupRoots() []string {
	m, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroupName)
	if _, err := os.Stat("/sys/fs/cgroup/" + cgroupName); err == nil {
		m = append(m, "/sys/fs/cgroup/"+cgroupName)
	}
	return m
}

// makeCgroupRoots makes the cgroupRoot in every hierarchy mounted (the
// kubelet checks that it exists); a cpuset cgroup needs its parent's cpus
// and mems before anything can join it.
func makeCgroupRoots() error {
	f, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(f), "\n") {
		pre, post, ok := strings.Cut(l, " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 1 || (tail[0] != "cgroup" && tail[0] != "cgroup2") {
			continue
		}
		dir := filepath.Join(fields[4], cgroupName)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		for _, k := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(fields[4], k)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, k), v, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", filepath.Join(dir, k), err)
				}
			}
		}
	}
	return nil
}
