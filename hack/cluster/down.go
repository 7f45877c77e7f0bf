package main

import (
	"bufio"
	"crypto/sha256"
	"errors"
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
// node's namespace or a pod's, in the node's cgroups, or one of its
// containerd shims; every mount under the state folder (the pods' network
// namespaces among them); the node's namespace (its bridges, veth end and
// iptables rules go with it) and the host's veth end; the node's cgroups;
// the kernel settings the kubelet changed; the files the node's containerd
// and kubelet write outside the state folder; the state folder. Then it
// checks that none is left. Safe to run again.
func (c *cluster) down() error {
	if os.Geteuid() != 0 {
		return errNotRoot
	}
	if err := c.ownsNode(); err != nil {
		return err
	}
	nodeNS := c.nodeNetns()
	// The kubelet first, so that nothing restarts what goes next; by its
	// pid file only if that pid is still a process in the node's namespace.
	if pid, ok := c.pid("kubelet"); ok && nodeNS != "" && procNetns(pid) == nodeNS {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	tasks := c.taskIDs()
	outside := c.outsideFiles(tasks)
	nsInodes := c.podNetnsInodes()
	if nodeNS != "" {
		nsInodes[nodeNS] = true
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
	if err := c.unmountAll(); err != nil {
		return err
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
	for _, f := range outside {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	// Their folders too, when nothing else left files in them (containerd,
	// libcni and the kubelet make them again when they need them).
	for _, d := range outsideDirs {
		_ = os.Remove(d)
	}
	if c.marked() {
		if err := os.RemoveAll(c.state); err != nil {
			return err
		}
	}
	if left := c.leftOver(outside); len(left) > 0 {
		return fmt.Errorf("down: left behind: %s", strings.Join(left, "; "))
	}
	logf("down: no process, mount, namespace, interface, cgroup or file of the node is left")
	return nil
}

// outsideDirs are the folders of outsideFiles, deepest first.
var outsideDirs = []string{"/run/containerd/s", "/run/containerd", "/var/lib/cni/results", "/var/lib/cni",
	"/var/lib/kubelet/device-plugins", "/var/lib/kubelet", "/var/log/containers"}

// marked reports whether the state folder has up's marker.
func (c *cluster) marked() bool {
	_, err := os.Stat(c.p(marker))
	return err == nil
}

// ownsNode refuses to take down a node this state folder did not make:
// one whose containerd runs with another state folder's config, or, with
// LEASETUNE_CLUSTER_OWNER set (.ci/run), one up made for another owner.
func (c *cluster) ownsNode() error {
	if owner := os.Getenv(ownerEnv); owner != "" && c.marked() {
		b, err := os.ReadFile(c.p(marker))
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(string(b)); got != owner {
			return fmt.Errorf("the node of %s was made for %s %q, not %q: left alone", c.state, ownerEnv, got, owner)
		}
	}
	if nodeNS := c.nodeNetns(); nodeNS != "" {
		want := c.p("containerd.toml")
		for _, pid := range pidsIn(map[string]bool{nodeNS: true}) {
			args := cmdline(pid)
			if len(args) == 0 || filepath.Base(args[0]) != "containerd" {
				continue
			}
			for i := 0; i+1 < len(args); i++ {
				if args[i] == "--config" && args[i+1] != want {
					return fmt.Errorf("the node's containerd runs with --config %s: it was made with another -state than %s", args[i+1], c.state)
				}
			}
		}
	}
	return nil
}

// nodeNetns is the node namespace's inode ("net:[N]"): from its name, else
// from what up recorded (the name may have been deleted by hand).
func (c *cluster) nodeNetns() string {
	if ino, err := nsInode(filepath.Join("/run/netns", netnsName)); err == nil {
		return ino
	}
	if b, err := os.ReadFile(c.p("netns-inode")); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
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

// outsideFiles are the files the node writes outside the state folder,
// where no setting moves them:
//   - each shim's socket, /run/containerd/s/<sha256 of <containerd's
//     address>/<namespace>/<id>> (containerd runtime/v2/shim/util_unix.go
//     SocketAddress, v1.7.23 as v1.6), for the tasks given: a killed shim
//     leaves it;
//   - the CNI plugins' results, /var/lib/cni/results/<network>-<id>-<ifname>
//     (libcni's cache), which a pod torn down without CNI DEL leaves: the
//     network "leasetune" (cni0) and containerd's "cni-loopback";
//   - the kubelet's links to its containers' logs, /var/log/containers/*.log
//     (kubernetes v1.36.3 pkg/kubelet/kubelet.go ContainerLogsDir), those
//     that point into the state folder;
//   - the kubelet's device plugin socket and checkpoint in
//     /var/lib/kubelet/device-plugins (pkg/kubelet/apis/deviceplugin).
func (c *cluster) outsideFiles(tasks []string) []string {
	var out []string
	for _, id := range tasks {
		sum := sha256.Sum256([]byte(filepath.Join(c.socket(), "k8s.io", id)))
		out = append(out, fmt.Sprintf("/run/containerd/s/%x", sum),
			"/var/lib/cni/results/leasetune-"+id+"-eth0", "/var/lib/cni/results/cni-loopback-"+id+"-lo")
	}
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, c.state+"/") {
			out = append(out, l)
		}
	}
	if c.marked() {
		out = append(out, "/var/lib/kubelet/device-plugins/kubelet.sock", "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint")
	}
	return out
}

// podNetnsInodes are the inodes of the pods' network namespaces: with
// netns_mounts_under_state_dir, containerd mounts them under the state
// folder (mounts of type nsfs).
func (c *cluster) podNetnsInodes() map[string]bool {
	out := map[string]bool{}
	for _, m := range c.mounts() {
		if m.fstype == "nsfs" {
			if ino, err := nsInode(m.point); err == nil {
				out[ino] = true
			}
		}
	}
	return out
}

type mount struct{ point, fstype string }

// mounts are the mounts under the state folder, from /proc/self/mountinfo.
func (c *cluster) mounts() []mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - fstype source super
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 1 {
			continue
		}
		mp := strings.ReplaceAll(fields[4], `\040`, " ")
		if strings.HasPrefix(mp, c.state+"/") {
			out = append(out, mount{mp, tail[0]})
		}
	}
	return out
}

func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// shims are the pids of the node's containerd shims: containerd-shim-runc-v2
// started with -address of the node's containerd (exactly).
func (c *cluster) shims() map[int]bool {
	out := map[int]bool{}
	for _, pid := range allPids() {
		args := cmdline(pid)
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

func allPids() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// pidsIn are the processes in one of the network namespaces.
func pidsIn(nsInodes map[string]bool) []int {
	var out []int
	for _, pid := range allPids() {
		if nsInodes[procNetns(pid)] {
			out = append(out, pid)
		}
	}
	return out
}

// cgroupPids are the processes in the node's cgroups (cgroupRoot), in any
// hierarchy: a container process that left its pod's namespace is still
// there.
func cgroupPids() []int {
	seen := map[int]bool{}
	for _, root := range cgroupRoots() {
		_ = filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() || info.Name() != "cgroup.procs" {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	return out
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

// nodeProcesses are the pids in one of the namespaces, in the node's
// cgroups, and the node's shims.
func (c *cluster) nodeProcesses(nsInodes map[string]bool) []int {
	self := os.Getpid()
	set := map[int]bool{}
	for _, pid := range pidsIn(nsInodes) {
		set[pid] = true
	}
	for _, pid := range cgroupPids() {
		set[pid] = true
	}
	for pid := range c.shims() {
		set[pid] = true
	}
	delete(set, self)
	out := make([]int, 0, len(set))
	for pid := range set {
		out = append(out, pid)
	}
	sort.Ints(out)
	return out
}

// unmountAll unmounts, deepest first, every mount under the state folder.
func (c *cluster) unmountAll() error {
	var points []string
	for _, m := range c.mounts() {
		points = append(points, m.point)
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, mp := range points {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("unmount %s: %w", mp, err)
		}
	}
	return nil
}

// removeCgroups removes the node's cgroups (cgroupRoot and everything the
// kubelet and runc made below it), deepest first, in every hierarchy.
func removeCgroups() {
	for _, root := range cgroupRoots() {
		var dirs []string
		_ = filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
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

// leftOver lists what down should have removed and is still there.
func (c *cluster) leftOver(outside []string) []string {
	var left []string
	for _, f := range outside {
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
	if m := c.mounts(); len(m) > 0 {
		left = append(left, fmt.Sprintf("%d mounts under %s", len(m), c.state))
	}
	if pids := c.nodeProcesses(map[string]bool{}); len(pids) > 0 {
		left = append(left, fmt.Sprintf("processes %v", pids))
	}
	if c.marked() {
		left = append(left, c.state)
	}
	if r := cgroupRoots(); len(r) > 0 {
		left = append(left, "cgroups "+strings.Join(r, " "))
	}
	return left
}
