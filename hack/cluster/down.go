package main

import (
	"bufio"
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
	// The kubelet first, so that nothing restarts what goes next.
	if pid, ok := c.pid("kubelet"); ok {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
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
	if err := os.RemoveAll(c.state); err != nil {
		return err
	}
	if left := c.leftOver(); len(left) > 0 {
		return fmt.Errorf("down: left behind: %s", strings.Join(left, "; "))
	}
	logf("down: no process, mount, namespace, interface or file of the node is left")
	return nil
}

// leftOver lists what down should have removed and is still there.
func (c *cluster) leftOver() []string {
	var left []string
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
	if _, err := os.Stat("/sys/fs/cgroup/memory/kubepods"); err == nil {
		left = append(left, "cgroup kubepods")
	}
	return left
}

// podNetns are the pod namespaces containerd's CNI made for this node:
// /run/netns/cni-* with an address in the pods' range.
func (c *cluster) podNetns() []string {
	entries, _ := os.ReadDir("/run/netns")
	var out []string
	prefix := strings.TrimSuffix(podCIDR, "0/24")
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "cni-") {
			continue
		}
		addrs, err := execOut("ip", "-n", e.Name(), "-4", "addr", "show")
		if err == nil && strings.Contains(addrs, "inet "+prefix) {
			out = append(out, e.Name())
		}
		// A namespace whose pod is gone has no address left: it is ours
		// when containerd's state names it.
		if err == nil && !strings.Contains(addrs, "inet ") && c.stateNames(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// stateNames reports whether a file under the state folder's containerd
// state mentions s (the CRI's sandbox metadata names its netns path).
func (c *cluster) stateNames(s string) bool {
	found := false
	_ = filepath.Walk(c.p("containerd/io.containerd.grpc.v1.cri/sandboxes"), func(path string, info os.FileInfo, err error) error {
		if err != nil || found || info.IsDir() || info.Size() > 1<<20 {
			return nil
		}
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), s) {
			found = true
		}
		return nil
	})
	return found
}

func nsInode(path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("net:[%d]", st.Ino), nil
}

// nodeProcesses are the pids in one of the namespaces, or whose command
// line names the state folder.
func (c *cluster) nodeProcesses(nsInodes map[string]bool) []int {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && nsInodes[link] {
			out = append(out, pid)
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(b), c.state+"/") {
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
