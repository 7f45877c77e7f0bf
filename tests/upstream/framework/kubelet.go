package framework

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
)

// A Runner says how the containers of one Deployment run on this machine.
// The Kubelet double calls it for every container of every pod it starts.
type Runner struct {
	// Exec returns the program and arguments that stand for container c
	// of pod p (argv is the container's command followed by its args, as
	// the container runtime joins them), or ok false for a container that
	// is not run here. It may allocate addresses with p.Addr.
	Exec func(p *Pod, c *corev1.Container, argv []string) (path string, args []string, ok bool, err error)
	// Env, if set, is added after the container's own resolved env (for
	// what a container image or a node provides: HOME, a CA bundle path).
	Env func(p *Pod, c *corev1.Container) []string
	// Ready, if set, reports whether pod p is ready (a readiness probe);
	// without it a pod is ready once its processes run.
	Ready func(ctx context.Context, p *Pod) bool
	// Grace is how long a process has between SIGTERM and SIGKILL; zero
	// is the template's terminationGracePeriodSeconds (30s by default).
	Grace time.Duration
	// Port returns the local address that stands for container port
	// containerPort of pod p (for the ServiceProxy); nil: none.
	Port func(p *Pod, containerPort int32) (string, error)
	// Recreate stops the old pods before it starts new ones whatever the
	// Deployment's strategy says: for programs that bind fixed addresses
	// (Rancher binds :6666; a Service's address here is one port), which
	// two pods cannot share on one machine.
	Recreate bool
}

// Pod is one replica of a Deployment the double runs: a process per
// container, a working folder and the loopback addresses its runner chose.
type Pod struct {
	Namespace, Deployment, Name string
	// Hash is the hash of the pod template it runs (the role of the
	// ReplicaSet's pod-template-hash).
	Hash string
	// Template is the pod template it runs.
	Template corev1.PodTemplateSpec
	// Dir is the pod's own folder: the processes' working directory and
	// HOME, its kubeconfig, and the containers' logs (<container>.log).
	Dir string
	// Kubeconfig is the path of a kubeconfig with a token of the pod's
	// ServiceAccount (the kubelet's projected token, as in-cluster).
	Kubeconfig string
	// Env is each container's env as the container gets it, after the
	// kubelet's resolution (last entry of a name wins).
	Env map[string][]string

	uid     types.UID
	addrs   map[string]string
	procs   []*process
	started time.Time
	mu      sync.Mutex
}

// Addr returns the loopback address (host:port) named name in this pod,
// choosing a free port the first time.
func (p *Pod) Addr(name string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.addrs[name]; ok {
		return a, nil
	}
	a, err := FreeAddr()
	if err != nil {
		return "", err
	}
	p.addrs[name] = a
	return a, nil
}

// SetAddr fixes the address named name (for a runner that keeps one
// address across the pods of a rollout, such as Rancher's server URL).
func (p *Pod) SetAddr(name, addr string) {
	p.mu.Lock()
	p.addrs[name] = addr
	p.mu.Unlock()
}

// Log returns what container c of the pod wrote so far (stdout and
// stderr), or "" when it has no log.
func (p *Pod) Log(c string) string {
	b, _ := os.ReadFile(filepath.Join(p.Dir, c+".log"))
	return string(b)
}

type process struct {
	container string
	path      string
	args      []string
	env       []string
	log       *os.File
	grace     time.Duration
	onCrash   func(exit string)

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	stopping bool
	restarts int
	lastExit string
}

// Kubelet is a double of the kubelet and of the Deployment controller for
// the Deployments it is given: it runs each replica's containers as local
// processes with the env of the Deployment's pod template, replaces them
// when the template changes, restarts a container that exits (a crash
// loop), and reports the rollout in the Deployment's status as the
// Deployment controller does. Pod and ReplicaSet objects are not created.
//
// Written from k8s.io/kubernetes v1.32.13:
//   - env: pkg/kubelet/kubelet_pods.go makeEnvironmentVariables: envFrom
//     first, then env in order; value, or valueFrom fieldRef
//     (metadata.name, metadata.namespace, spec.serviceAccountName,
//     spec.nodeName, status.podIP), configMapKeyRef, secretKeyRef
//     (optional ones skipped when absent); a later entry of a name
//     replaces an earlier one (tmpEnv map). `$(VAR)` references are not
//     expanded here: a value holding one is refused, so no test relies on
//     an unexpanded value.
//   - the ServiceAccount token: the kubelet's projected token
//     (pkg/kubelet/token) through the TokenRequest API, given to the
//     process as a kubeconfig in KUBECONFIG, which client-go, wrangler and
//     controller-runtime read where in-cluster config would be.
//   - status: pkg/controller/deployment/sync.go calculateStatus
//     (observedGeneration, replicas, updatedReplicas, readyReplicas,
//     availableReplicas, unavailableReplicas) and the Available and
//     Progressing conditions of util/deployment_util.go.
//
// A rollout follows the strategy's order: with RollingUpdate and a
// maxSurge above zero (the API's default, 25%, rounds up to one) the new
// pods start first and the old ones stop once the new ones are ready
// (pkg/controller/deployment/rolling.go: scale up the new ReplicaSet, then
// down the old); with Recreate, or maxSurge zero, the old ones stop first.
// A pod without a readiness check is ready 2s after its processes start,
// never at once (a kubelet takes at least that from a new pod to running
// containers; an old pod stopped in the same instant as its replacement
// starts would cut short what it was doing, e.g. the fleet-agent's helm
// upgrade of itself).
//
// What it does differently, on purpose: all replicas of a rollout are
// replaced together (one step, whatever maxSurge and maxUnavailable
// allow), and a runner can ask for the Recreate order (Runner.Recreate)
// for programs with fixed addresses; each replica still restarts exactly
// once per template change. A container that exits is restarted after 1s,
// doubling to 30s (the kubelet's back-off starts at 10s and caps at 5
// minutes).
type Kubelet struct {
	cs      kubernetes.Interface
	cfg     *rest.Config
	dir     string
	runners map[string]Runner // namespace/name

	queue  workqueue.RateLimitingInterface
	lister cache.Indexer
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	pods     map[string][]*Pod // namespace/name → running replicas
	rollouts map[string]int
	starts   map[string]int
	// templates is the UID and pod-template hash last seen per key.
	templates map[string]string
	busy      int
	errs      []string
	crashes   []string
	// serviceEnv is what the kubelet gives every container about the
	// kubernetes Service (pkg/kubelet/kubelet_pods.go getServiceEnvVarMap
	// "always include the kubernetes service"; envvars.FromServices).
	serviceEnv []string
	seq        int
}

// StartKubelet starts the double for the Deployments named in runners
// ("namespace/name" → how its containers run) and returns once its cache
// has synced. dir holds the pods' folders. Stop it with Stop.
func StartKubelet(cfg *rest.Config, dir string, runners map[string]Runner) (*Kubelet, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &Kubelet{
		cs: cs, cfg: cfg, dir: dir, runners: runners,
		queue:  workqueue.NewRateLimitingQueue(workqueue.NewItemExponentialFailureRateLimiter(500*time.Millisecond, 10*time.Second)),
		cancel: cancel, done: make(chan struct{}),
		pods: map[string][]*Pod{}, rollouts: map[string]int{}, starts: map[string]int{}, templates: map[string]string{},
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	inf := f.Apps().V1().Deployments().Informer()
	enqueue := func(obj interface{}) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			if _, ok := runners[key]; ok {
				k.queue.Add(key)
			}
		}
	}
	// observe counts every pod template a Deployment gets after its first
	// (a new object of the same name counts too): each is a new
	// ReplicaSet, so a rollout, for the Deployment controller
	// (pkg/controller/deployment/sync.go getNewReplicaSet), however close
	// two changes come and whatever this double runs in between.
	observe := func(obj interface{}) {
		d, ok := obj.(*appsv1.Deployment)
		if !ok {
			return
		}
		key := d.Namespace + "/" + d.Name
		if _, ok := runners[key]; !ok {
			return
		}
		seen := string(d.UID) + "/" + templateHash(d)
		k.mu.Lock()
		if last, ok := k.templates[key]; ok && last != seen {
			k.rollouts[key]++
		}
		k.templates[key] = seen
		k.mu.Unlock()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o interface{}) { observe(o); enqueue(o) },
		UpdateFunc: func(_, n interface{}) { observe(n); enqueue(n) },
		DeleteFunc: enqueue,
	}); err != nil {
		cancel()
		return nil, err
	}
	k.lister = inf.GetIndexer()
	if svc, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil && len(svc.Spec.Ports) > 0 {
		ip, port := svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port)
		k.serviceEnv = []string{"KUBERNETES_SERVICE_HOST=" + ip, "KUBERNETES_SERVICE_PORT=" + port,
			"KUBERNETES_SERVICE_PORT_HTTPS=" + port, "KUBERNETES_PORT=tcp://" + ip + ":" + port,
			"KUBERNETES_PORT_" + port + "_TCP=tcp://" + ip + ":" + port, "KUBERNETES_PORT_" + port + "_TCP_PROTO=tcp",
			"KUBERNETES_PORT_" + port + "_TCP_PORT=" + port, "KUBERNETES_PORT_" + port + "_TCP_ADDR=" + ip}
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, errors.New("kubelet double: Deployment cache did not sync")
	}
	go func() {
		defer close(k.done)
		for k.next(ctx) {
		}
	}()
	go func() { <-ctx.Done(); k.queue.ShutDown() }()
	return k, nil
}

// Stop stops every pod (SIGTERM, then SIGKILL after the grace period) and
// the double.
func (k *Kubelet) Stop() {
	k.cancel()
	<-k.done
	k.mu.Lock()
	all := k.pods
	k.pods = map[string][]*Pod{}
	k.mu.Unlock()
	var wg sync.WaitGroup
	for _, ps := range all {
		for _, p := range ps {
			wg.Add(1)
			go func(p *Pod) { defer wg.Done(); stopPod(p) }(p)
		}
	}
	wg.Wait()
}

// Pods returns the running replicas of Deployment namespace/name.
func (k *Kubelet) Pods(namespace, name string) []*Pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*Pod(nil), k.pods[namespace+"/"+name]...)
}

// Rollouts returns how many times the pod template of namespace/name
// changed after the double first saw it (each a rollout in a cluster; a
// Deployment deleted and made again with the same name counts too). The
// pods the double runs are replaced once per change it acts on, which
// for two changes in a row may be once.
func (k *Kubelet) Rollouts(namespace, name string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.rollouts[namespace+"/"+name]
}

// AllRollouts returns Rollouts of every Deployment seen, by
// "namespace/name".
func (k *Kubelet) AllRollouts() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]int{}
	for key, n := range k.rollouts {
		out[key] = n
	}
	return out
}

// Crashes returns every exit of a container that was not asked to stop
// (each followed by a restart, as a crash loop), oldest first, as
// "namespace/pod/container: exit status at time".
func (k *Kubelet) Crashes() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.crashes...)
}

// Idle reports whether the double has nothing to do: no Deployment
// waiting in its queue and no sync (a rollout, a readiness wait) running.
func (k *Kubelet) Idle() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.busy == 0 && k.queue.Len() == 0
}

// Errors returns what the double could not do (a pod it could not start,
// a status it could not write), oldest first.
func (k *Kubelet) Errors() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.errs...)
}

// WaitRunning waits until Deployment namespace/name runs its current
// template and reports it done in its status, or ctx ends.
func (k *Kubelet) WaitRunning(ctx context.Context, namespace, name string) error {
	return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d, err := k.cs.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		want := replicas(d)
		ps := k.Pods(namespace, name)
		return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
			d.Status.AvailableReplicas == want && int32(len(ps)) == want && (want == 0 || ps[0].Hash == templateHash(d)), nil
	})
}

func (k *Kubelet) next(ctx context.Context) bool {
	item, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(item)
	key := item.(string)
	k.mu.Lock()
	k.busy++
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.busy--
		k.mu.Unlock()
	}()
	if err := k.sync(ctx, key); err != nil {
		if ctx.Err() != nil {
			return true
		}
		if apierrors.IsNotFound(err) {
			// Deleted while synced (Fleet deletes and remakes the local
			// agent's Deployment while it bootstraps): the informer's
			// delete event syncs the key again and stops its pods.
			k.queue.Forget(key)
			return true
		}
		msg := fmt.Sprintf("%s %s: %v", time.Now().Format(time.TimeOnly), key, err)
		fmt.Fprintln(os.Stderr, "kubelet double: "+msg)
		k.mu.Lock()
		k.errs = append(k.errs, msg)
		k.mu.Unlock()
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// surges reports whether a rollout of d starts new pods before it stops
// old ones: RollingUpdate (the default) with maxSurge above zero, a
// percentage rounded up (pkg/controller/deployment/util ResolveFenceposts).
func surges(d *appsv1.Deployment) bool {
	st := d.Spec.Strategy
	if st.Type == appsv1.RecreateDeploymentStrategyType {
		return false
	}
	if st.RollingUpdate == nil || st.RollingUpdate.MaxSurge == nil {
		return true // 25%
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(st.RollingUpdate.MaxSurge, int(replicas(d)), true)
	return err == nil && n > 0
}

// templateHash hashes the pod template (the Deployment controller's
// pod-template-hash plays this role: any change to the template is a new
// ReplicaSet, so a rollout).
func templateHash(d *appsv1.Deployment) string {
	b, _ := json.Marshal(d.Spec.Template)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])[:10]
}

// sync brings the pods of one Deployment to its current template and
// replica count, then reports its status.
func (k *Kubelet) sync(ctx context.Context, key string) error {
	obj, exists, err := k.lister.GetByKey(key)
	if err != nil {
		return err
	}
	k.mu.Lock()
	cur := k.pods[key]
	k.mu.Unlock()
	if !exists {
		for _, p := range cur {
			stopPod(p)
		}
		k.mu.Lock()
		delete(k.pods, key)
		k.mu.Unlock()
		return nil
	}
	d := obj.(*appsv1.Deployment).DeepCopy()
	want := replicas(d)
	if d.Spec.Paused {
		return nil
	}
	hash := templateHash(d)
	r := k.runners[key]
	var keep, old []*Pod
	for _, p := range cur {
		if p.Hash == hash && p.uid == d.UID {
			keep = append(keep, p)
		} else {
			old = append(old, p)
		}
	}
	if len(old) == 0 && int32(len(keep)) >= want {
		// Up to date, or scaled down: the extra pods stop.
		for _, p := range keep[want:] {
			stopPod(p)
		}
		k.mu.Lock()
		k.pods[key] = keep[:want]
		k.mu.Unlock()
		return k.reportDone(ctx, d, want)
	}
	// A rollout (old pods to replace) or a scale up.
	if err := k.reportProgress(ctx, d, want, int32(len(keep))); err != nil {
		return err
	}
	stopOld := func() {
		for _, p := range old {
			stopPod(p)
		}
		k.mu.Lock()
		k.pods[key] = keep
		k.mu.Unlock()
	}
	surge := !r.Recreate && surges(d)
	if !surge {
		stopOld()
	}
	var started []*Pod
	for i := int32(len(keep)); i < want; i++ {
		p, err := k.startPod(ctx, d, hash)
		if err != nil {
			for _, q := range started {
				stopPod(q)
			}
			return fmt.Errorf("start pod of %s: %w", key, err)
		}
		started = append(started, p)
	}
	for _, p := range started {
		ready := r.Ready
		if ready == nil {
			ready = func(ctx context.Context, p *Pod) bool { return time.Since(p.started) >= 2*time.Second }
		}
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true,
			func(ctx context.Context) (bool, error) { return ready(ctx, p), nil }); err != nil {
			for _, q := range started {
				stopPod(q)
			}
			return fmt.Errorf("pod %s not ready within 5 minutes", p.Name)
		}
	}
	if surge {
		stopOld()
	}
	k.mu.Lock()
	k.pods[key] = append(keep, started...)
	k.starts[key]++
	k.mu.Unlock()
	return k.reportDone(ctx, d, want)
}

// reportProgress writes the status of a rollout in progress: the new
// generation observed, the pods of the current template running so far
// (updated), the rest unavailable.
func (k *Kubelet) reportProgress(ctx context.Context, d *appsv1.Deployment, want, updated int32) error {
	return k.writeStatus(ctx, d, func(s *appsv1.DeploymentStatus) {
		s.ObservedGeneration = d.Generation
		s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas = updated, updated, updated, updated
		s.UnavailableReplicas = want - updated
		setCondition(s, appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")
		setCondition(s, appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated", fmt.Sprintf("ReplicaSet %q is progressing.", d.Name+"-"+templateHash(d)))
	})
}

// reportDone writes the status of a finished rollout, unless it is
// already what the status says (no write when nothing changed).
func (k *Kubelet) reportDone(ctx context.Context, d *appsv1.Deployment, want int32) error {
	s := d.Status
	if s.ObservedGeneration == d.Generation && s.Replicas == want && s.UpdatedReplicas == want &&
		s.ReadyReplicas == want && s.AvailableReplicas == want && s.UnavailableReplicas == 0 &&
		conditionIs(s, appsv1.DeploymentAvailable, corev1.ConditionTrue) {
		return nil
	}
	return k.writeStatus(ctx, d, func(s *appsv1.DeploymentStatus) {
		s.ObservedGeneration = d.Generation
		s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas = want, want, want, want
		s.UnavailableReplicas = 0
		setCondition(s, appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability.")
		setCondition(s, appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable", fmt.Sprintf("ReplicaSet %q has successfully progressed.", d.Name+"-"+templateHash(d)))
	})
}

func (k *Kubelet) writeStatus(ctx context.Context, d *appsv1.Deployment, mutate func(*appsv1.DeploymentStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := k.cs.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.Generation != d.Generation {
			return nil // a newer spec: its own sync reports it
		}
		before := cur.Status.DeepCopy()
		mutate(&cur.Status)
		if sameStatus(*before, cur.Status) {
			return nil // as the Deployment controller, no write when nothing changed
		}
		_, err = k.cs.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{FieldManager: "kubelet-double"})
		return err
	})
}

// sameStatus compares two statuses but for the conditions' times.
func sameStatus(a, b appsv1.DeploymentStatus) bool {
	strip := func(s appsv1.DeploymentStatus) appsv1.DeploymentStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastUpdateTime, s.Conditions[i].LastTransitionTime = metav1.Time{}, metav1.Time{}
		}
		return s
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

func conditionIs(s appsv1.DeploymentStatus, t appsv1.DeploymentConditionType, st corev1.ConditionStatus) bool {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status == st
		}
	}
	return false
}

func setCondition(s *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType, st corev1.ConditionStatus, reason, msg string) {
	now := metav1.Now()
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != st {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message, c.LastUpdateTime = st, reason, msg, now
		return
	}
	s.Conditions = append(s.Conditions, appsv1.DeploymentCondition{Type: t, Status: st, Reason: reason, Message: msg, LastUpdateTime: now, LastTransitionTime: now})
}

// startPod starts one replica of d.
func (k *Kubelet) startPod(ctx context.Context, d *appsv1.Deployment, hash string) (*Pod, error) {
	k.mu.Lock()
	k.seq++
	n := k.seq
	k.mu.Unlock()
	p := &Pod{
		Namespace: d.Namespace, Deployment: d.Name, Name: fmt.Sprintf("%s-%s-%d", d.Name, hash[:8], n),
		Hash: hash, Template: *d.Spec.Template.DeepCopy(), Env: map[string][]string{}, addrs: map[string]string{}, uid: d.UID,
	}
	p.Dir = filepath.Join(k.dir, d.Namespace+"_"+p.Name)
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := k.writeKubeconfig(ctx, p); err != nil {
		return nil, err
	}
	r := k.runners[d.Namespace+"/"+d.Name]
	grace := r.Grace
	if grace == 0 {
		grace = 30 * time.Second
		if s := d.Spec.Template.Spec.TerminationGracePeriodSeconds; s != nil {
			grace = time.Duration(*s) * time.Second
		}
	}
	for i := range p.Template.Spec.Containers {
		c := &p.Template.Spec.Containers[i]
		env, err := k.resolveEnv(ctx, p, c)
		if err != nil {
			stopPod(p)
			return nil, fmt.Errorf("container %s: %w", c.Name, err)
		}
		p.Env[c.Name] = env
		argv := append(append([]string(nil), c.Command...), c.Args...)
		path, args, ok, err := r.Exec(p, c, argv)
		if err != nil {
			stopPod(p)
			return nil, fmt.Errorf("container %s: %w", c.Name, err)
		}
		if !ok {
			continue
		}
		full := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + p.Dir, "KUBECONFIG=" + p.Kubeconfig}, k.serviceEnv...)
		full = append(full, env...)
		if r.Env != nil {
			full = append(full, r.Env(p, c)...)
		}
		log, err := os.OpenFile(filepath.Join(p.Dir, c.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			stopPod(p)
			return nil, err
		}
		name := p.Namespace + "/" + p.Name + "/" + c.Name
		pr := &process{container: c.Name, path: path, args: args, env: full, log: log, grace: grace, onCrash: func(exit string) {
			k.mu.Lock()
			k.crashes = append(k.crashes, name+": "+exit)
			k.mu.Unlock()
		}}
		if err := pr.start(p.Dir); err != nil {
			stopPod(p)
			return nil, fmt.Errorf("container %s: %w", c.Name, err)
		}
		p.procs = append(p.procs, pr)
		go pr.supervise(p.Dir)
	}
	p.started = time.Now()
	return p, nil
}

// writeKubeconfig writes p.Kubeconfig: the API server of cfg with a token
// of the pod's ServiceAccount (valid a day, audience the API server's).
func (k *Kubelet) writeKubeconfig(ctx context.Context, p *Pod) error {
	sa := p.Template.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := k.cs.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: int64ptr(86400)}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token of ServiceAccount %s/%s: %w", p.Namespace, sa, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: k.cfg.Host, CertificateAuthorityData: k.cfg.CAData}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "sa", Namespace: p.Namespace}
	kc.CurrentContext = "default"
	p.Kubeconfig = filepath.Join(p.Dir, "kubeconfig")
	return clientcmd.WriteToFile(*kc, p.Kubeconfig)
}

func int64ptr(v int64) *int64 { return &v }

// resolveEnv returns container c's env as NAME=value in the order the
// kubelet builds it (see Kubelet).
func (k *Kubelet) resolveEnv(ctx context.Context, p *Pod, c *corev1.Container) ([]string, error) {
	vals := map[string]string{}
	var order []string
	set := func(n, v string) {
		if _, ok := vals[n]; !ok {
			order = append(order, n)
		}
		vals[n] = v
	}
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			cm, err := k.cs.CoreV1().ConfigMaps(p.Namespace).Get(ctx, ef.ConfigMapRef.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional {
				continue
			} else if err != nil {
				return nil, err
			}
			for _, n := range sortedKeys(cm.Data) {
				set(ef.Prefix+n, cm.Data[n])
			}
		case ef.SecretRef != nil:
			s, err := k.cs.CoreV1().Secrets(p.Namespace).Get(ctx, ef.SecretRef.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && ef.SecretRef.Optional != nil && *ef.SecretRef.Optional {
				continue
			} else if err != nil {
				return nil, err
			}
			for _, n := range sortedKeys(s.Data) {
				set(ef.Prefix+n, string(s.Data[n]))
			}
		}
	}
	for _, e := range c.Env {
		v := e.Value
		if strings.Contains(v, "$(") {
			return nil, fmt.Errorf("env %s=%q: the kubelet double does not expand $(VAR) references", e.Name, v)
		}
		if v == "" && e.ValueFrom != nil {
			var skip bool
			var err error
			v, skip, err = k.valueFrom(ctx, p, e.ValueFrom)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			if skip {
				continue
			}
		}
		set(e.Name, v)
	}
	out := make([]string, 0, len(order))
	for _, n := range order {
		out = append(out, n+"="+vals[n])
	}
	return out, nil
}

func (k *Kubelet) valueFrom(ctx context.Context, p *Pod, src *corev1.EnvVarSource) (v string, skip bool, err error) {
	switch {
	case src.FieldRef != nil:
		switch src.FieldRef.FieldPath {
		case "metadata.name":
			return p.Name, false, nil
		case "metadata.namespace":
			return p.Namespace, false, nil
		case "spec.serviceAccountName":
			return p.Template.Spec.ServiceAccountName, false, nil
		case "spec.nodeName":
			return "kubelet-double", false, nil
		case "status.podIP", "status.hostIP":
			return "127.0.0.1", false, nil
		}
		return "", false, fmt.Errorf("fieldRef %s: not known to the kubelet double", src.FieldRef.FieldPath)
	case src.ConfigMapKeyRef != nil:
		r := src.ConfigMapKeyRef
		optional := r.Optional != nil && *r.Optional
		cm, err := k.cs.CoreV1().ConfigMaps(p.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && optional {
			return "", true, nil
		} else if err != nil {
			return "", false, err
		}
		v, ok := cm.Data[r.Key]
		if !ok && !optional {
			return "", false, fmt.Errorf("no key %s in ConfigMap %s/%s", r.Key, p.Namespace, r.Name)
		}
		return v, !ok, nil
	case src.SecretKeyRef != nil:
		r := src.SecretKeyRef
		optional := r.Optional != nil && *r.Optional
		s, err := k.cs.CoreV1().Secrets(p.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && optional {
			return "", true, nil
		} else if err != nil {
			return "", false, err
		}
		b, ok := s.Data[r.Key]
		if !ok && !optional {
			return "", false, fmt.Errorf("no key %s in Secret %s/%s", r.Key, p.Namespace, r.Name)
		}
		return string(b), !ok, nil
	}
	return "", false, errors.New("a valueFrom the kubelet double does not resolve (resourceFieldRef)")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (pr *process) start(dir string) error {
	cmd := exec.Command(pr.path, pr.args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, pr.env, pr.log, pr.log
	// Its own process group (stop signals the whole group), and killed if
	// the test process dies first, so that no Rancher outlives a test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(pr.log, "=== kubelet double: start %s %s\n", pr.path, strings.Join(pr.args, " "))
	if err := cmd.Start(); err != nil {
		return err
	}
	pr.mu.Lock()
	pr.cmd, pr.exited = cmd, make(chan struct{})
	pr.mu.Unlock()
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(cmd, pr.exited)
	return nil
}

// supervise restarts the process when it exits while not being stopped.
func (pr *process) supervise(dir string) {
	backoff := time.Second
	for {
		pr.mu.Lock()
		exited := pr.exited
		pr.mu.Unlock()
		<-exited
		pr.mu.Lock()
		if pr.stopping {
			pr.mu.Unlock()
			return
		}
		pr.restarts++
		pr.lastExit = fmt.Sprintf("%s at %s", pr.cmd.ProcessState, time.Now().Format(time.TimeOnly))
		fmt.Fprintf(pr.log, "=== kubelet double: exited (%s); restart in %s\n", pr.cmd.ProcessState, backoff)
		last := pr.lastExit
		pr.mu.Unlock()
		if pr.onCrash != nil {
			pr.onCrash(last)
		}
		time.Sleep(backoff)
		if backoff *= 2; backoff > 30*time.Second {
			backoff = 30 * time.Second
		}
		pr.mu.Lock()
		stopping := pr.stopping
		pr.mu.Unlock()
		if stopping {
			return
		}
		if err := pr.start(dir); err != nil {
			fmt.Fprintf(pr.log, "=== kubelet double: restart failed: %v\n", err)
			return
		}
	}
}

// stop sends SIGTERM to the process group, and SIGKILL after the grace
// period.
func (pr *process) stop() {
	pr.mu.Lock()
	pr.stopping = true
	cmd, exited := pr.cmd, pr.exited
	pr.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(pr.grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	fmt.Fprintf(pr.log, "=== kubelet double: stopped (%s)\n", cmd.ProcessState)
	_ = pr.log.Close()
}

func stopPod(p *Pod) {
	var wg sync.WaitGroup
	for _, pr := range p.procs {
		wg.Add(1)
		go func(pr *process) { defer wg.Done(); pr.stop() }(pr)
	}
	wg.Wait()
}

// runs reports whether the double runs Deployment key (namespace/name).
func (k *Kubelet) runs(key string) bool {
	_, ok := k.runners[key]
	return ok
}
