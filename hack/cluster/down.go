package main

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// down stops the node and removes what up made: every process in the
// node's namespace or in a pod's, every process whose command line names
// the state folder (containerd's shims), every mount under the state folder
// and of the pods' namespaces, those namespaces, the node's (its bridges,
// veth end and iptables rules go with it), the host's veth end, the
// kubelet's cgroups and the state folder. Safe to run again.
func (c *cluster) down() error {
	if os.Geteuid() != 0 {
		return errNotRoot
	}
	nodeNS, _ := nsInode(filepath.Join("/run/netns", netnsName))
	// The kubelet first, so that nothing restarts what goes next; by its
	// pid file only if that pid is still a process in the node's namespace.
	if pid, ok := c.pid("kubelet"); ok && nodeNS != "" && procNetns(pid) == nodeNS {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	tasks := c.taskIDs()
	podNetns := c.podNetns()
	nsInodes := map[string]bool{}
	for _, n := range append([]string{netnsName}, podNetns...) {
		if ino, err := nsInode(filepath.Join("/run/netns", n)); err == nil {
			nsInodes[ino] = true
		}
	}
	for round := 0; ; round++ {
		pids := c.nodeProcesses(nsInodes)
		if len(pids) == 0 {
			break
		}
		if round == 50 {
			return fmt.Errorf("processes still running after 10s of SIGKILL: %v", pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := c.unmountAll(podNetns); err != nil {
		return err
	}
	for _, n := range podNetns {
		_ = run("ip", "netns", "delete", n)
	}
	if netnsExists() {
		if err := run("ip", "netns", "delete", netnsName); err != nil {
			return err
		}
	}
	if _, err := os.Stat("/sys/class/net/" + hostLink); err == nil {
		_ = run("ip", "link", "delete", hostLink)
	}
	removeCgroups()
	if err := c.restoreSysctls(); err != nil {
		return err
	}
	for _, f := range c.outsideFiles(tasks) {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	// Their folders too, when nothing else left files in them.
	for _, d := range []string{"/run/containerd/s", "/run/containerd", "/var/lib/cni/results", "/var/lib/cni"} {
		_ = os.Remove(d)
	}
	if err := os.RemoveAll(c.state); err != nil {
		return err
	}
	if left := c.leftOver(tasks); len(left) > 0 {
		return fmt.Errorf("down: left behind: %s", strings.Join(left, "; "))
	}
	logf("down: no process, mount, namespace, interface or file of the node is left")
	return nil
}

// leftOver lists what down should have removed and is still there.
func (c *cluster) leftOver(tasks []string) []string {
	var left []string
	for _, f := range c.outsideFiles(tasks) {
		if _, err := os.Lstat(f); err == nil {
			left = append(left, f)
		}
	}
	if netnsExists() {
		left = append(left, "network namespace "+netnsName)
	}
	if _, err := os.Stat("/sys/class/net/" + hostLink); err == nil {
		left = append(left, "interface "+hostLink)
	}
	if ns := c.podNetns(); len(ns) > 0 {
		left = append(left, "pod namespaces "+strings.Join(ns, " "))
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(mi), " "+c.state+"/") {
		left = append(left, "mounts under "+c.state)
	}
	if pids := c.nodeProcesses(map[string]bool{}); len(pids) > 0 {
		left = append(left, fmt.Sprintf("processes %v", pids))
	}
	if _, err := os.Stat(c.state); err == nil {
		left = append(left, c.state)
	}
	if m, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods"); len(m) > 0 {
		left = append(left, "cgroups "+strings.Join(m, " "))
	}
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		left = append(left, "cgroup /sys/fs/cgroup/kubepods")
	}
	return left
}

// taskIDs are the ids of the containerd tasks (pod sandboxes and
// containers) of the node, from its containerd's state.
func (c *cluster) taskIDs() []string {
	entries, _ := os.ReadDir(c.p("run/containerd/io.containerd.runtime.v2.task/k8s.io"))
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// outsideFiles are the files the node's containerd writes outside the
// state folder, where no setting moves them, for the tasks given:
//   - each shim's socket, /run/containerd/s/<sha256 of <containerd's
//     address>/<namespace>/<id>> (containerd runtime/v2/shim/util_unix.go
//     SocketAddress, v1.7.23 as v1.6): a killed shim leaves it;
//   - the CNI plugins' results, /var/lib/cni/results/<network>-<id>-<ifname>
//     (libcni's cache), which a pod torn down without CNI DEL leaves: the
//     network "leasetune" (cni0) and containerd's "cni-loopback".
func (c *cluster) outsideFiles(tasks []string) []string {
	var out []string
	for _, id := range tasks {
		sum := sha256.Sum256([]byte(filepath.Join(c.socket(), "k8s.io", id)))
		out = append(out, fmt.Sprintf("/run/containerd/s/%x", sum),
			"/var/lib/cni/results/leasetune-"+id+"-eth0", "/var/lib/cni/results/cni-loopback-"+id+"-lo")
	}
	return out
}

// podNetns are the pod namespaces containerd's CNI made for this node:
// the /run/netns/cni-* that hold an address in the pods' range, or that a
// process under one of the node's shims is in (a pod whose address is
// gone).
func (c *cluster) podNetns() []string {
	entries, _ := os.ReadDir("/run/netns")
	held := c.shimChildrenNetns()
	var out []string
	prefix := strings.TrimSuffix(podCIDR, "0/24")
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "cni-") {
			continue
		}
		ino, _ := nsInode(filepath.Join("/run/netns", e.Name()))
		addrs, err := execOut("ip", "-n", e.Name(), "-4", "addr", "show")
		if (err == nil && strings.Contains(addrs, "inet "+prefix)) || (ino != "" && held[ino]) {
			out = append(out, e.Name())
		}
	}
	return out
}

// shims are the pids of the node's containerd shims: containerd-shim-runc-v2
// started with -address of the node's containerd (exactly).
func (c *cluster) shims() map[int]bool {
	out := map[int]bool{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "containerd-shim-runc-v2" {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-address" && args[i+1] == c.socket() {
				out[pid] = true
			}
		}
	}
	return out
}

// shimChildrenNetns are the network namespaces of the processes whose
// parent is one of the node's shims (the pods' pause and containers).
func (c *cluster) shimChildrenNetns() map[string]bool {
	shims := c.shims()
	out := map[string]bool{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if shims[ppid(pid)] {
			if ns := procNetns(pid); ns != "" {
				out[ns] = true
			}
		}
	}
	return out
}

func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces, so after the last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

func procNetns(pid int) string {
	l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return ""
	}
	return l
}

func nsInode(path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("net:[%d]", st.Ino), nil
}

// nodeProcesses are the pids in one of the namespaces, and the node's
// shims (which containerd started in the node's namespace, so they are
// among those already; this also finds one that moved).
func (c *cluster) nodeProcesses(nsInodes map[string]bool) []int {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	shims := c.shims()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if nsInodes[procNetns(pid)] || shims[pid] {
			out = append(out, pid)
		}
	}
	return out
}

// unmountAll unmounts, deepest first, every mount under the state folder
// and the pods' namespaces' bind mounts.
func (c *cluster) unmountAll(podNetns []string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := strings.ReplaceAll(fields[4], `\040`, " ")
		if strings.HasPrefix(mp, c.state+"/") {
			points = append(points, mp)
		}
		for _, n := range podNetns {
			if mp == "/run/netns/"+n || mp == "/var/run/netns/"+n {
				points = append(points, mp)
			}
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, mp := range points {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
			return fmt.Errorf("unmount %s: %w", mp, err)
		}
	}
	return nil
}

// removeCgroups removes the kubelet's cgroups (kubepods, and its node
// allocatable parents), deepest first, in every hierarchy.
func removeCgroups() {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, r := range roots {
		var dirs []string
		_ = filepath.Walk(filepath.Join(r, "kubepods"), func(path string, info os.FileInfo, err error) error {
			if err == nil && info.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			_ = syscall.Rmdir(d)
		}
	}
}
