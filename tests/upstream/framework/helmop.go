package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
)

// HelmOperations is a double of the kubelet and of Rancher's shell image
// for the Pods of Rancher's helm operations (Apps: install, upgrade,
// uninstall), which the Kubelet double does not run (it runs Deployments).
// Written from rancher/rancher v2.15.0, rancher/steve v0.9.18 (the
// version v2.15.0's go.mod requires) and rancher/shell v0.8.1 (v2.15.0's
// pkg/buildconfig/constants.go DefaultShellVersion):
//   - the Pod: pkg/catalogv2/helmop/operation.go createPod: a container
//     "helm" running helm-cmd in WorkingDir /home/shell/helm, where the
//     volume "data" (a Secret: Commands.Render) holds operation000… (the
//     helm arguments, NUL-separated: Command.renderArgs, with absolute
//     paths under /home/shell/helm), the chart .tgz and its values.
//   - who runs helm: steve pkg/podimpersonation/podimpersonation.go
//     augmentPod: helm's kubeconfig points at the "proxy" container's
//     `kubectl proxy`, which holds the admin kubeconfig (ConfigMap volume
//     "admin-kubeconfig": adminKubeConfig, the token file of the
//     impersonation ServiceAccount with Impersonate and ImpersonateGroups
//     of the user who asked) and that ServiceAccount's token Secret at
//     /var/run/secrets/kubernetes.io/serviceaccount. Here helm gets that
//     kubeconfig directly (the proxy hop collapsed): the API server sees the
//     same identity, the ServiceAccount impersonating the user.
//   - what runs: shell package/helm-cmd: `set -e`, then for each file
//     operation* in the shell's glob order `xargs -0 -- helm` of its
//     content. xargs exits 123 when helm exits 1–125, so a failed
//     operation ends the container with 123.
//   - status: pkg/controllers/dashboard/helm/operations.go onOperationChange
//     reads the "helm" container's state (running, then terminated with
//     its exit code); cleanup then execs `pkill -x kubectl` in "proxy",
//     which needs a kubelet. Here "proxy" terminates with "helm" (exit 0,
//     as `kubectl proxy --disable-filter || true` does after the pkill),
//     so cleanup finds nothing to stop: the end state is the one the real
//     pair reaches.
//
// What it does not do: the operation's logs (Rancher reads them through
// the kubelet: operation.go proxyLogRequest) are not served; Run's output
// keeps them for the test. Only paths under /home/shell/helm are mapped:
// the upgrade of an App migrated from Rancher's v1 apps (renderArgs with
// /home/shell/helm-run and kustomize.sh as post-renderer) is not run.
type HelmOperations struct {
	cs     kubernetes.Interface
	cfg    *rest.Config
	helm   string
	dir    string
	cancel context.CancelFunc

	mu      sync.Mutex
	stopped bool
	seen    map[string]bool
	runs    []HelmRun
	errs    []string
	wg      sync.WaitGroup
}

// HelmRun is one helm operation Pod the double ran.
type HelmRun struct {
	Pod string
	// User and Groups are who helm acted as (the admin kubeconfig's
	// impersonation).
	User   string
	Groups []string
	// Args are each operation's helm arguments, paths as Rancher wrote
	// them (under /home/shell/helm).
	Args [][]string
	// Output is what helm-cmd printed; ExitCode the helm container's.
	Output   string
	ExitCode int32
}

// helmDataPath is the helm container's working directory and the data
// volume's mount path (operation.go helmDataPath).
const helmDataPath = "/home/shell/helm"

// StartHelmOperations runs the double for Pods in namespace (Rancher's),
// with the helm CLI at helm; dir holds each operation's files.
func StartHelmOperations(cfg *rest.Config, namespace, helm, dir string) (*HelmOperations, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &HelmOperations{cs: cs, cfg: cfg, helm: helm, dir: dir, cancel: cancel, seen: map[string]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	inf := f.Core().V1().Pods().Informer()
	handle := func(obj interface{}) {
		p, ok := obj.(*corev1.Pod)
		if !ok || !isHelmOperation(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			return
		}
		h.mu.Lock()
		if h.stopped || h.seen[p.Name] {
			h.mu.Unlock()
			return
		}
		h.seen[p.Name] = true
		h.wg.Add(1)
		h.mu.Unlock()
		go func() {
			defer h.wg.Done()
			if err := h.run(ctx, p); err != nil {
				h.mu.Lock()
				h.errs = append(h.errs, fmt.Sprintf("pod %s/%s: %v", p.Namespace, p.Name, err))
				h.mu.Unlock()
			}
		}()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: handle, UpdateFunc: func(_, n interface{}) { handle(n) },
	}); err != nil {
		cancel()
		return nil, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, errors.New("helm operation double: Pod cache did not sync")
	}
	return h, nil
}

// isHelmOperation reports whether p is a helm operation's Pod: a
// container "helm" whose command is helm-cmd (operation.go createPod).
func isHelmOperation(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == "helm" && len(c.Command) == 1 && c.Command[0] == "helm-cmd" {
			return true
		}
	}
	return false
}

// Stop stops the double after the operations under way.
func (h *HelmOperations) Stop() {
	h.mu.Lock()
	h.stopped = true // no operation starts after this
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}

// Runs returns the operations run so far, in the order they ended.
func (h *HelmOperations) Runs() []HelmRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]HelmRun(nil), h.runs...)
}

// Errors returns what the double could not do.
func (h *HelmOperations) Errors() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.errs...)
}

// run runs Pod p's operations and reports its containers' states.
func (h *HelmOperations) run(ctx context.Context, p *corev1.Pod) error {
	started := metav1.Now()
	if err := h.setStatus(ctx, p, func(s *corev1.PodStatus) {
		s.Phase, s.StartTime = corev1.PodRunning, &started
		s.InitContainerStatuses = nil
		for _, c := range p.Spec.InitContainers {
			s.InitContainerStatuses = append(s.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: started}}})
		}
		s.ContainerStatuses = nil
		for _, c := range p.Spec.Containers {
			s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true, Started: ptrTo(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}})
		}
	}); err != nil {
		return err
	}
	run, err := h.operate(ctx, p)
	if err != nil {
		run.ExitCode = 1
		run.Output += "\n" + err.Error()
	}
	h.mu.Lock()
	h.runs = append(h.runs, run)
	h.mu.Unlock()
	finished := metav1.Now()
	phase, reason := corev1.PodSucceeded, "Completed"
	if run.ExitCode != 0 {
		phase, reason = corev1.PodFailed, "Error"
	}
	return h.setStatus(ctx, p, func(s *corev1.PodStatus) {
		s.Phase = phase
		for i := range s.ContainerStatuses {
			cs := &s.ContainerStatuses[i]
			code, why := int32(0), "Completed"
			if cs.Name == "helm" {
				code, why = run.ExitCode, reason
			}
			cs.Ready, cs.Started = false, ptrTo(false)
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: why, StartedAt: started, FinishedAt: finished}}
		}
	})
}

func ptrTo[T any](v T) *T { return &v }

// setStatus applies mutate to p's status, retrying on conflicts.
func (h *HelmOperations) setStatus(ctx context.Context, p *corev1.Pod, mutate func(*corev1.PodStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := h.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(&cur.Status)
		_, err = h.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// operate writes the data volume and the kubeconfig and runs helm-cmd.
func (h *HelmOperations) operate(ctx context.Context, p *corev1.Pod) (HelmRun, error) {
	run := HelmRun{Pod: p.Namespace + "/" + p.Name}
	dir := filepath.Join(h.dir, p.Name)
	data := filepath.Join(dir, "helm")
	home := filepath.Join(dir, "home")
	for _, d := range []string{data, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return run, err
		}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		volumes[v.Name] = v
	}
	// The data volume, mounted at helm's working directory.
	dv, ok := volumes["data"]
	if !ok || dv.Secret == nil {
		return run, errors.New("no Secret volume data")
	}
	secret, err := h.cs.CoreV1().Secrets(p.Namespace).Get(ctx, dv.Secret.SecretName, metav1.GetOptions{})
	if err != nil {
		return run, fmt.Errorf("data Secret: %w", err)
	}
	var ops []string
	for name, b := range secret.Data {
		if err := os.WriteFile(filepath.Join(data, name), b, 0o644); err != nil {
			return run, err
		}
		if strings.HasPrefix(name, "operation") {
			ops = append(ops, name)
		}
	}
	sort.Strings(ops) // the shell's glob order, for these ASCII names
	// The proxy's identity: the admin kubeconfig and the ServiceAccount
	// token Secret mounted beside it.
	av, ok := volumes["admin-kubeconfig"]
	if !ok || av.ConfigMap == nil {
		return run, errors.New("no ConfigMap volume admin-kubeconfig")
	}
	cm, err := h.cs.CoreV1().ConfigMaps(p.Namespace).Get(ctx, av.ConfigMap.Name, metav1.GetOptions{})
	if err != nil {
		return run, fmt.Errorf("admin kubeconfig: %w", err)
	}
	admin, err := clientcmd.Load([]byte(cm.Data["config"]))
	if err != nil {
		return run, fmt.Errorf("admin kubeconfig: %w", err)
	}
	ctxName := admin.CurrentContext
	if admin.Contexts[ctxName] == nil || admin.AuthInfos[admin.Contexts[ctxName].AuthInfo] == nil {
		return run, fmt.Errorf("admin kubeconfig: no user in context %q", ctxName)
	}
	who := admin.AuthInfos[admin.Contexts[ctxName].AuthInfo]
	run.User, run.Groups = who.Impersonate, who.ImpersonateGroups
	tokenSecret := ""
	for _, c := range p.Spec.Containers {
		if c.Name != "proxy" {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount" && volumes[m.Name].Secret != nil {
				tokenSecret = volumes[m.Name].Secret.SecretName
			}
		}
	}
	if tokenSecret == "" {
		return run, errors.New("the proxy container mounts no ServiceAccount token")
	}
	ts, err := h.cs.CoreV1().Secrets(p.Namespace).Get(ctx, tokenSecret, metav1.GetOptions{})
	if err != nil {
		return run, fmt.Errorf("ServiceAccount token Secret %s: %w", tokenSecret, err)
	}
	if len(ts.Data[corev1.ServiceAccountTokenKey]) == 0 {
		return run, fmt.Errorf("ServiceAccount token Secret %s has no token", tokenSecret)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: h.cfg.Host, CertificateAuthorityData: ts.Data["ca.crt"]}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: string(ts.Data[corev1.ServiceAccountTokenKey]),
		Impersonate: who.Impersonate, ImpersonateGroups: who.ImpersonateGroups, ImpersonateUserExtra: who.ImpersonateUserExtra}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	kc.CurrentContext = "default"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return run, err
	}
	// helm-cmd: each operation in turn; set -e stops at the first failure.
	var out bytes.Buffer
	for _, op := range ops {
		b, err := os.ReadFile(filepath.Join(data, op))
		if err != nil {
			return run, err
		}
		args := strings.Split(string(b), "\x00")
		run.Args = append(run.Args, args)
		local := make([]string, len(args))
		for i, a := range args {
			local[i] = strings.ReplaceAll(a, helmDataPath+"/", data+"/")
		}
		fmt.Fprintf(&out, "helm %s\n", strings.Join(args, " "))
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		cmd := exec.CommandContext(cctx, h.helm, local...)
		cmd.Dir = data
		cmd.Env = []string{"KUBECONFIG=" + kubeconfig, "HOME=" + home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + dir}
		cmd.Stdout, cmd.Stderr = &out, &out
		err = cmd.Run()
		cancel()
		if err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				return run, err
			}
			// xargs exits 123 when the command exited 1–125 and 125 when a
			// signal killed it (here: the 5-minute limit).
			run.Output, run.ExitCode = out.String(), 123
			if ee.ExitCode() < 0 {
				run.ExitCode = 125
			}
			return run, nil
		}
		fmt.Fprintf(&out, "\n---------------------------------------------------------------------\nSUCCESS: helm %s\n---------------------------------------------------------------------\n", strings.Join(args, " "))
	}
	run.Output = out.String()
	return run, nil
}
