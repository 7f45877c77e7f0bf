// Command cluster is `make cluster` and `make cluster-down`
// (scripts/cluster.sh, docs/cluster.md): a single-node Kubernetes on this
// machine, with real pods, for leasetune as users run it.
//
//	cluster up   -assets DIR -state DIR -repo DIR -helm PATH -fixtures DIR
//	cluster down -state DIR
//
// up starts, in a network namespace of its own (node.go): containerd (its
// CRI plugin, runc, the CNI bridge plugin), etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, the kubelet and kube-proxy of
// the suite's Kubernetes version; imports the images scripts/image.sh
// built; installs the Setting CRD's sibling objects Fleet brings (its
// Cluster CRD and Deployments, from ../shared/fixtures, their containers the
// stand-in image); then installs charts/leasetune with helm as the README
// tells users, and prints the kubeconfig. down stops every process and
// removes every mount, namespace, interface and file up made.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	pauseImage     = "leasetune.test/pause:1"
	standInImage   = "leasetune.test/standin:1"
	cniBinDir      = "/usr/lib/cni" // Debian's containernetworking-plugins
	leasetuneNS    = "leasetune-system"
	fleetNamespace = "cattle-fleet-system"
)

type cluster struct {
	state    string // every file the node writes, but the pod netns mounts
	assets   string // the Kubernetes binaries (scripts/controlplane.sh node)
	repo     string // the clone: charts/leasetune
	helm     string // the helm binary
	fixtures string // ../shared/fixtures
	fleet    string // the Fleet release whose Deployments stand in
	images   []string
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cluster up|down [flags]")
		os.Exit(2)
	}
	var c cluster
	fs := flag.NewFlagSet("cluster "+os.Args[1], flag.ExitOnError)
	fs.StringVar(&c.state, "state", "/var/lib/leasetune-cluster", "the node's state folder")
	fs.StringVar(&c.assets, "assets", "", "folder of etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy")
	fs.StringVar(&c.repo, "repo", ".", "the clone")
	fs.StringVar(&c.helm, "helm", "helm", "the helm binary")
	fs.StringVar(&c.fixtures, "fixtures", "../shared/fixtures", "the shared fixtures folder")
	fs.StringVar(&c.fleet, "fleet", "v0.16.1", "the Fleet release of the fixtures' Deployments")
	images := fs.String("images", "", "comma-separated image archives to import")
	_ = fs.Parse(os.Args[2:])
	if *images != "" {
		c.images = strings.Split(*images, ",")
	}
	ctx := context.Background()
	err := checkState(c.state)
	switch {
	case err != nil:
	case os.Args[1] == "up":
		err = c.up(ctx)
	case os.Args[1] == "down":
		err = c.down()
	default:
		err = fmt.Errorf("unknown command %q: up or down", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

// marker is the file up writes first into the state folder: down removes
// only a folder that has it.
const marker = ".leasetune-cluster"

// ownerEnv names the owner up writes into the marker; down refuses a
// node made for another owner when it is set.
const ownerEnv = "LEASETUNE_CLUSTER_OWNER"

// checkState refuses a state folder down could not safely remove: not
// absolute and clean, fewer than two levels below /, not a folder, or a
// folder that is not empty and has no marker (not one up made).
func checkState(state string) error {
	if !filepath.IsAbs(state) || filepath.Clean(state) != state || strings.Count(state, "/") < 2 {
		return fmt.Errorf("-state %q: want an absolute, clean path at least two levels below / (the default: /var/lib/leasetune-cluster)", state)
	}
	st, err := os.Lstat(state)
	if os.IsNotExist(err) {
		return nil // none yet
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("-state %s: not a folder", state)
	}
	entries, err := os.ReadDir(state)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(state, marker)); err != nil {
		return fmt.Errorf("-state %s: a folder that make cluster did not make (no %s in it); choose another", state, marker)
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "cluster: "+format+"\n", args...)
}

func execOut(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (c *cluster) up(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errNotRoot
	}
	if netnsExists() {
		return fmt.Errorf("network namespace %s exists: a node is up (or was not taken down): make cluster-down first", netnsName)
	}
	if c.assets == "" {
		return errors.New("-assets is required")
	}
	if entries, err := os.ReadDir(c.state); err == nil && (len(entries) > 1 || (len(entries) == 1 && entries[0].Name() != marker)) {
		return fmt.Errorf("%s holds a node's state (an earlier up, or a down that did not finish): make cluster-down first", c.state)
	}
	if err := os.MkdirAll(c.state, 0o755); err != nil {
		return err
	}
	if err := diskFree(c.state, minDiskFree); err != nil {
		return err
	}
	// The marker names the owner (.ci/run's run): down leaves alone a node
	// made for another.
	if err := os.WriteFile(c.p(marker), []byte(os.Getenv(ownerEnv)+"\n"), 0o644); err != nil {
		return err
	}
	for _, d := range []string{"logs", "pids", "run", "etcd"} {
		if err := os.MkdirAll(c.p(d), 0o755); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := network(); err != nil {
		return err
	}
	ino, err := nsInode(filepath.Join("/run/netns", netnsName))
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.p("netns-inode"), []byte(ino+"\n"), 0o644); err != nil {
		return err
	}
	if err := makeCgroupRoots(); err != nil {
		return err
	}
	if err := c.pkiFiles(); err != nil {
		return err
	}
	if err := c.writeConfigs(); err != nil {
		return err
	}
	procs := c.processes()
	byName := map[string]proc{}
	for _, p := range procs {
		byName[p.name] = p
	}
	if err := c.start(byName["containerd"]); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "containerd's socket", time.Minute, func() error {
		_, err := c.ctr("version")
		return err
	}, "containerd"); err != nil {
		return err
	}
	for _, img := range c.images {
		if _, err := c.ctr("images", "import", "--no-unpack=false", img); err != nil {
			return err
		}
		logf("imported %s", img)
	}
	for _, n := range []string{"etcd", "kube-apiserver"} {
		if err := c.start(byName[n]); err != nil {
			return err
		}
	}
	k, err := c.client()
	if err != nil {
		return err
	}

	if err := c.waitFor(ctx, "kube-apiserver's /readyz", 2*time.Minute, func() error {
		return k.ready(ctx)
	}, "etcd", "kube-apiserver"); err != nil {
		return err
	}
	logf("kube-apiserver ready (%s)", time.Since(start).Round(time.Second))
	if err := c.saveSysctls(); err != nil { // the kubelet sets some; down puts them back
		return err
	}
	for _, n := range []string{"kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"} {
		if err := c.start(byName[n]); err != nil {
			return err
		}
	}
	if err := c.waitFor(ctx, "node "+nodeName+" Ready", 3*time.Minute, func() error {
		return k.nodeReady(ctx)
	}, "containerd", "kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler"); err != nil {
		return err
	}
	logf("node %s Ready (%s)", nodeName, time.Since(start).Round(time.Second))
	if err := c.seedFleet(ctx, k); err != nil {
		return err
	}
	if err := c.installChart(ctx, k); err != nil {
		return err
	}
	logf("up in %s", time.Since(start).Round(time.Second))
	fmt.Printf(`The node is up (docs/cluster.md). From this machine:

  export KUBECONFIG=%s
  %s get pods -A          # the kubectl of the node's version
  %[2]s -n %s get lease leasetune
  make test-cluster
  make cluster-down     # stops every process, removes every mount, namespace, interface and file it made

Logs: %s/logs/
`, c.p("admin.kubeconfig"), filepath.Join(c.assets, "kubectl"), leasetuneNS, c.state)
	return nil
}

// diskFree refuses a state folder on a filesystem with less than min bytes
// free to an unprivileged user: below evictionDiskFree the kubelet evicts
// every pod, and the chart's install would wait for pods that never run.
func diskFree(dir string, min uint64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("free disk of %s: %w", dir, err)
	}
	if free := st.Bavail * uint64(st.Bsize); free < min {
		return fmt.Errorf("%s: %d MiB free on its filesystem; the node needs %d MiB (the kubelet evicts pods below %s): free some disk, or choose another -state",
			dir, free>>20, min>>20, evictionDiskFree)
	}
	return nil
}
