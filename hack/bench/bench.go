package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"leasetune.io/leasetune/pkg/crds"
)

// bench is one run of the benchmark: run calls its phases in order, each
// filling in its part of res; close undoes what they started.
type bench struct {
	o       options
	c       configuration
	res     results
	dir     string   // the run's folder, removed at the end
	profile string   // this configuration's profile folder (-profile), else ""
	ports   []string // leasetune's health, metrics, webhook and UI addresses

	env        *envtest.Environment
	cfg        *rest.Config // the admin user's (system:masters, not audited)
	cs         kubernetes.Interface
	dyn        dynamic.Interface
	audit      *auditLog
	stopFollow context.CancelFunc
	floor      dynamic.ResourceInterface // the clusters, as the floor's user
	kubeconfig string                    // leasetune's

	apiProf sync.WaitGroup // the kube-apiserver's CPU profiles (-profile), one at a time

	lt       *child // the leasetune process
	logPath  string // its log
	logFile  *os.File
	pprof    string // its pprof address (-profile), else ""
	profWG   sync.WaitGroup
	profiled chan struct{}            // closed once the initial CPU profile is written (one at a time)
	t0       time.Time                // leasetune's start
	cpStart  map[string]time.Duration // kube-apiserver's and etcd's CPU at t0

	logPaths       []string // every round's log
	profiledBinary string   // the binary built with pprof (-profile)
	beforeChange   procStat // leasetune right before the round's Setting patch
	afterStart     procStat // leasetune after its initial convergence
}

// run measures each configuration in turn, on its own control plane,
// and prints one table of them all.
func run(ctx context.Context, o options) error {
	var all []results
	var today []todayResults
	for _, c := range o.configs {
		logf("configuration %s", c.name)
		if c.today {
			r, err := runToday(ctx, o, c)
			if err != nil {
				return fmt.Errorf("configuration %s: %w", c.name, err)
			}
			today = append(today, r)
			continue
		}
		r, err := runOne(ctx, o, c)
		if err != nil {
			return fmt.Errorf("configuration %s: %w", c.name, err)
		}
		all = append(all, r)
	}
	if len(all) > 0 {
		printTable(os.Stdout, all)
	}
	for _, r := range today {
		printToday(os.Stdout, r)
	}
	return nil
}

// runOne runs the benchmark of one configuration and returns its results.
func runOne(ctx context.Context, o options, c configuration) (res results, err error) {
	settle := "0s"
	if c.chart {
		settle = o.values.Settle
	}
	b := &bench{o: o, c: c, res: results{config: c, settle: settle, n: o.n, memLimit: o.memLimit, load: loadAvg(), rest: o.rest}}
	if o.profile != "" {
		b.profile = filepath.Join(o.profile, c.name)
	}
	defer func() { b.close(err) }()
	phases := []func(context.Context) error{
		b.startControlPlane, // kube-apiserver and etcd, with an audit log
		b.createClusters,    // N fleet Clusters, and one paged LIST of them
		b.measureFloor,      // (1) the raw-PATCH floor, then restore
		runBuildPhase,       //     make build, so the binary measured is the tree's
	}
	for k := 0; k < o.rounds; k++ {
		phases = append(phases, func(ctx context.Context) error { return b.startLeasetune(ctx, k) }) // (2) leasetune as a child process
		if k == 0 {
			phases = append(phases,
				b.initialConvergence, // until it has written every cluster
				b.atRest,             // (3) its requests at rest
			)
		} else {
			phases = append(phases, b.restarted) // until it has read the clusters, writing none
		}
		phases = append(phases,
			func(ctx context.Context) error { return b.globalChange(ctx, k) }, // (4) one global change
			func(ctx context.Context) error { return b.peak(ctx, k) },         // (5) peak RSS and CPU
			func(ctx context.Context) error { return b.floorsAfter(ctx, k) },  // (6) two floors, leasetune stopped
		)
	}
	for _, phase := range phases {
		if err := phase(ctx); err != nil {
			return res, err
		}
	}
	return b.res, nil
}

// close stops what the phases started, the last first: leasetune (with the
// end of its log when err says the run failed), the profiles, the audit
// log's reader, the control plane, and removes the run's folder.
func (b *bench) close(err error) {
	if b.lt != nil {
		b.lt.stop()
		if err != nil {
			tail(b.logPath, 30)
		}
	}
	b.profWG.Wait()
	if b.logFile != nil {
		_ = b.logFile.Close()
	}
	b.apiProf.Wait()
	if b.stopFollow != nil {
		b.stopFollow()
	}
	if b.audit != nil {
		b.audit.close()
	}
	if b.env != nil {
		if e := b.env.Stop(); e != nil {
			logf("stop control plane: %v", e)
		}
	}
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}

// startControlPlane starts kube-apiserver and etcd (envtest) with the
// Setting and Fleet v0.9.9 cluster CRDs and an audit log, follows the log,
// creates the namespaces, Fleet's Deployments and the bench's RBAC, and
// the users of the floor and of leasetune.
func (b *bench) startControlPlane(ctx context.Context) error {
	if b.profile != "" {
		if err := os.MkdirAll(b.profile, 0o755); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "leasetune-bench-")
	if err != nil {
		return err
	}
	b.dir = dir
	policy := filepath.Join(dir, "audit-policy.yaml")
	auditPath := filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	setting, err := crds.Setting()
	if err != nil {
		return err
	}
	crdPaths := []string{filepath.Join(b.o.fixtures, "fleet", "fleet-"+b.c.fleetVersion()+"-clusters-crd.yaml")}
	if b.c.chart {
		crdPaths = append(crdPaths, chartCRDs) // the ElectionStatus CRD, as Helm installs crds/
	}
	if b.ports, err = freePorts(4); err != nil {
		return err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    b.o.assets,
		CRDs:                     []*apiextv1.CustomResourceDefinition{setting},
		CRDDirectoryPaths:        crdPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 3 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{}
	env.ControlPlane.Etcd.Configure().Set("unsafe-no-fsync", "true")
	env.ControlPlane.APIServer = &envtest.APIServer{}
	env.ControlPlane.APIServer.Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", auditPath).
		Set("bind-address", "127.0.0.1")
	if b.profile != "" {
		env.ControlPlane.APIServer.Configure().Set("profiling", "true")
	}
	logf("starting kube-apiserver and etcd (audit log %s)", auditPath)
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return fmt.Errorf("start control plane: %w", err)
	}
	b.env = env
	cfg.QPS, cfg.Burst = qps, burst
	b.cfg, b.cs, b.dyn = cfg, kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg)
	if v, err := b.cs.Discovery().ServerVersion(); err == nil {
		b.res.apiserver = v.GitVersion
	}
	b.audit = newAuditLog(auditPath)
	followCtx, stopFollow := context.WithCancel(ctx)
	b.stopFollow = stopFollow
	go b.audit.follow(followCtx, 500*time.Millisecond)

	if err := setup(ctx, b.cs, b.o, b.c.fleetVersion()); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	if b.c.chart {
		if err := registerWebhook(ctx, b.cs, b.o.helm, b.ports[2]); err != nil {
			return fmt.Errorf("the chart's webhook: %w", err)
		}
	}
	floorCfg, _, err := b.user(floorUser)
	if err != nil {
		return err
	}
	b.floor = dynamic.NewForConfigOrDie(floorCfg).Resource(fleetClusterGVR).Namespace(clusterNamespace)
	_, leasetuneKC, err := b.user(leasetuneUser)
	if err != nil {
		return err
	}
	b.kubeconfig = filepath.Join(dir, "leasetune.kubeconfig")
	return os.WriteFile(b.kubeconfig, leasetuneKC, 0o600)
}

// user adds a user of the bench's group (cluster-admin, audited) and
// returns its REST config (the bench's QPS and burst) and kubeconfig.
func (b *bench) user(name string) (*rest.Config, []byte, error) {
	u, err := b.env.AddUser(envtest.User{Name: name, Groups: []string{benchGroup}}, nil)
	if err != nil {
		return nil, nil, err
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return nil, nil, err
	}
	c := u.Config()
	c.QPS, c.Burst = qps, burst
	return c, kc, nil
}

// createClusters creates the N fleet Clusters with their status.
func (b *bench) createClusters(ctx context.Context) error {
	logf("creating %d fleet Clusters (%d workers)", b.o.n, workers)
	clusters := b.dyn.Resource(fleetClusterGVR).Namespace(clusterNamespace)
	start := time.Now()
	if err := parallel(ctx, b.o.n, workers, func(ctx context.Context, i int) error {
		u, err := clusters.Create(ctx, fleetCluster(i), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		u.Object["status"] = fleetStatus(i)
		_, err = clusters.UpdateStatus(ctx, u, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("create clusters: %w", err)
	}
	b.res.create = time.Since(start)
	logf("created in %s", b.res.create.Round(time.Millisecond))
	start = time.Now()
	pages, err := listClusters(ctx, b.dyn)
	if err != nil {
		return fmt.Errorf("list clusters: %w", err)
	}
	b.res.list, b.res.listPages = time.Since(start), pages
	logf("one paged LIST of the clusters: %s (%d pages)", b.res.list.Round(time.Millisecond), pages)
	return nil
}

// patchFloor sends the floor's N merge patches of spec.agentEnvVars,
// cluster i's list made by list.
func (b *bench) patchFloor(ctx context.Context, list func(i int) []interface{}) error {
	return parallel(ctx, b.o.n, workers, func(ctx context.Context, i int) error {
		body, _ := json.Marshal(map[string]interface{}{"spec": map[string]interface{}{"agentEnvVars": list(i)}})
		_, err := b.floor.Patch(ctx, clusterName(i), types.MergePatchType, body, metav1.PatchOptions{})
		return err
	})
}

// apiserverProfile starts, with -profile, a kube-apiserver CPU profile to
// the file name, after the previous one and then after the delay.
func (b *bench) apiserverProfile(ctx context.Context, name string, after time.Duration) {
	if b.profile == "" {
		return
	}
	b.apiProf.Wait()
	b.apiProf.Add(1)
	go func() {
		defer b.apiProf.Done()
		time.Sleep(after)
		fetchAPIServerProfile(ctx, b.cfg, apiProfSecs, filepath.Join(b.profile, name))
	}()
}

// measureFloor is phase 1: the raw-PATCH floor (the triple added to every
// cluster by the floor's user, unthrottled), counted in the audit log,
// then the clusters restored.
func (b *bench) measureFloor(ctx context.Context) error {
	logf("raw-PATCH floor: %d merge patches of spec.agentEnvVars, %d workers, QPS %d burst %d", b.o.n, workers, qps, burst)
	cp0 := childrenCPU("kube-apiserver", "etcd")
	b.apiserverProfile(ctx, "apiserver-floor.pb.gz", 0)
	floorStart := time.Now()
	if err := b.patchFloor(ctx, func(i int) []interface{} { return append(userEnv(i), electionEnv("30s", "25s", "10s")...) }); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	took := time.Since(floorStart)
	b.res.floors = append(b.res.floors, floorRun{label: "before leasetune's first start", took: took, cp: cpDelta(cp0, childrenCPU("kube-apiserver", "etcd"))})
	start := time.Now()
	if err := b.patchFloor(ctx, userEnv); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	b.res.restore = time.Since(start)
	if err := b.audit.poll(); err != nil {
		return err
	}
	b.res.floorWrites = len(b.audit.filter(floorUser, floorStart, floorStart.Add(took), clusterPatch))
	logf("floor %s (%d patches in the audit log), restore %s", took.Round(time.Millisecond), b.res.floorWrites, b.res.restore.Round(time.Millisecond))
	return nil
}

// startLeasetune is the start of phase 2 of round k: the binary (with
// -profile, one built with net/http/pprof, profiled in the first round
// only) as a child process, as leasetune's user, its log in the run's
// folder.
func (b *bench) startLeasetune(ctx context.Context, k int) error {
	binary, err := filepath.Abs(b.o.binary)
	if err != nil {
		return err
	}
	ports := b.ports
	if b.logFile != nil {
		_ = b.logFile.Close()
	}
	b.logPath = filepath.Join(b.dir, fmt.Sprintf("leasetune-%d.log", k+1))
	b.logPaths = append(b.logPaths, b.logPath)
	if b.logFile, err = os.Create(b.logPath); err != nil {
		return err
	}
	if b.profile != "" {
		if k == 0 {
			if b.profiledBinary, err = buildProfiled(ctx, b.profile); err != nil {
				return err
			}
			p, err := freePorts(1)
			if err != nil {
				return err
			}
			b.pprof = p[0]
		} else {
			b.pprof = "" // the same binary; its profiles are the first round's
		}
		binary = b.profiledBinary
	}
	channel, ui := "cluster-env-v0.9", ""
	if b.c.chart {
		channel, ui = "auto", ports[3]
	}
	cmd := exec.Command(binary, "controller", "--kubeconfig", b.kubeconfig, "--namespace", "leasetune-system",
		"--fleet-agent-channel", channel, "--kube-api-qps", strconv.Itoa(qps), "--kube-api-burst", strconv.Itoa(burst),
		"--workers", strconv.Itoa(workers), "--settle", b.res.settle, "--install-crds", "--identity", "bench",
		"--health-addr", ports[0], "--metrics-addr", ports[1], "--webhook-addr", ports[2], "--webhook-host", "127.0.0.1",
		"--ui-addr", ui, "--log-format", "text")
	cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1", "LEASETUNE_BENCH_PPROF="+b.pprof)
	if b.o.memLimit != "" {
		cmd.Env = append(cmd.Env, "GOMEMLIMIT="+b.o.memLimit)
	}
	cmd.Stdout, cmd.Stderr = b.logFile, b.logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf("round %d: starting %s controller (log %s)", k+1, b.o.binary, b.logPath)
	b.cpStart = childrenCPU("kube-apiserver", "etcd")
	b.t0 = time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	b.lt = startChild(cmd)
	b.profiled = make(chan struct{})
	if b.pprof == "" {
		close(b.profiled)
		return nil
	}
	profSecs := int(2*b.res.floors[0].took.Seconds()) + 5
	b.profWG.Add(1)
	go func() {
		defer b.profWG.Done()
		defer close(b.profiled)
		fetchProfile(b.pprof, "profile?seconds="+strconv.Itoa(profSecs), filepath.Join(b.profile, "cpu-initial.pb.gz"))
	}()
	return nil
}

// initialConvergence is the rest of phase 2: until leasetune has written
// every cluster (audit log) and then written nothing for 5s, and every
// cluster holds a triple; its time, writes, CPU and RSS.
func (b *bench) initialConvergence(ctx context.Context) error {
	logf("waiting until leasetune has written every cluster (audit log)")
	if err := waitFor(ctx, b.o.convergenceTimeout, b.lt.alive, func() bool { return b.audit.patchedClusters(leasetuneUser, b.t0) >= b.o.n }); err != nil {
		return fmt.Errorf("initial convergence: %w (%d of %d clusters written)", err, b.audit.patchedClusters(leasetuneUser, b.t0), b.o.n)
	}
	b.res.cpInitial = cpDelta(b.cpStart, childrenCPU("kube-apiserver", "etcd"))
	quiet(ctx, b.audit, b.t0)
	if got, err := countTriples(ctx, b.dyn, func(t triple) bool { return t.ok }); err != nil || got != b.o.n {
		return fmt.Errorf("initial convergence: %d of %d clusters have a triple (%w)", got, b.o.n, err)
	}
	s := b.lt.sample()
	if b.pprof != "" {
		fetchProfile(b.pprof, "heap", filepath.Join(b.profile, "heap-initial.pb.gz"))
	}
	b.afterStart = s
	b.res.cpuInitial, b.res.rssAfterInitial = s.cpu, s.rssKiB
	initialReqs := b.audit.filter(leasetuneUser, b.t0, time.Now(), nil)
	b.res.initialClusterWrites = countIf(initialReqs, clusterPatch)
	b.res.initial = lastDone(filterReqs(initialReqs, clusterPatch)).Sub(b.t0)
	b.res.initialTally = tally(filterReqs(initialReqs, isWrite))
	logf("initial convergence %s, %d cluster patches; RSS %s", b.res.initial.Round(time.Millisecond), b.res.initialClusterWrites, mib(s.rssKiB))
	return nil
}

// atRest is phase 3: leasetune's requests while nothing changes, per
// hour, and whether they are its Lease's only.
func (b *bench) atRest(ctx context.Context) error {
	logf("at rest for %s", b.o.rest)
	restStart := time.Now()
	if err := sleep(ctx, b.o.rest, b.lt.alive); err != nil {
		return err
	}
	restEnd := time.Now()
	if err := b.audit.poll(); err != nil {
		return err
	}
	restReqs := b.audit.filter(leasetuneUser, restStart, restEnd, nil)
	b.res.restOnlyLease = true
	for _, r := range restReqs {
		if r.resource != "leases.coordination.k8s.io leasetune-system/leasetune" {
			b.res.restOnlyLease = false
		}
	}
	b.res.restTally = perHour(tally(restReqs), b.o.rest)
	b.beforeChange = b.lt.sample()
	b.res.cpuRest = b.beforeChange.cpu - b.afterStart.cpu
	return nil
}

// restarted is phase 2 of a round after the first: until leasetune has
// listed the fleet Clusters (its informer's paged LIST: it is the leader
// and its caches are filled once no page has been asked for 5s) and then
// written nothing for 5s; the cluster writes of its start (none: the
// floors left every cluster as it had written it) are counted.
func (b *bench) restarted(ctx context.Context) error {
	listed := func(r *request) bool {
		return r.verb == "list" && r.resource == "clusters.fleet.cattle.io" && r.code == 200
	}
	if err := waitFor(ctx, b.o.convergenceTimeout, b.lt.alive, func() bool {
		_ = b.audit.poll()
		pages := b.audit.filter(leasetuneUser, b.t0, time.Now(), listed)
		return len(pages) > 0 && time.Since(lastDone(pages)) > 5*time.Second
	}); err != nil {
		return fmt.Errorf("restart: leasetune did not list the clusters: %w", err)
	}
	quiet(ctx, b.audit, b.t0)
	b.beforeChange = b.lt.sample()
	n := len(b.audit.filter(leasetuneUser, b.t0, time.Now(), clusterPatch))
	pages := len(b.audit.filter(leasetuneUser, b.t0, time.Now(), listed))
	b.res.rounds = append(b.res.rounds, round{startWrites: n})
	logf("restarted in %s: %d pages of clusters listed, %d cluster writes", time.Since(b.t0).Round(time.Millisecond), pages, n)
	return nil
}

// globalChange is phase 4 of round k: one change of the agent retry
// period, until leasetune has written every cluster and then nothing for
// 5s, and every cluster holds the new value; its time, writes (exactly N),
// CPU and RSS.
func (b *bench) globalChange(ctx context.Context, k int) error {
	if k == 0 {
		b.res.rounds = append(b.res.rounds, round{startWrites: b.res.initialClusterWrites})
	}
	x := &b.res.rounds[k]
	x.value = changedValue(k)
	logf("round %d: global change: %s = %s", k+1, changedSetting, x.value)
	want, _ := time.ParseDuration(x.value)
	cp0 := childrenCPU("kube-apiserver", "etcd")
	// The profiles of the change start once the settle time has passed.
	settle, err := time.ParseDuration(b.res.settle)
	if err != nil {
		return fmt.Errorf("settle %q: %w", b.res.settle, err)
	}
	if b.pprof != "" {
		b.profWG.Add(1)
		go func() {
			defer b.profWG.Done()
			<-b.profiled
			time.Sleep(settle)
			fetchProfile(b.pprof, "profile?seconds="+strconv.Itoa(apiProfSecs), filepath.Join(b.profile, "cpu-change.pb.gz"))
		}()
	}
	if k == 0 {
		b.apiserverProfile(ctx, "apiserver-change.pb.gz", settle)
	}
	tChange := time.Now()
	if _, err := b.dyn.Resource(settingGVR).Patch(ctx, changedSetting, types.MergePatchType,
		[]byte(`{"value":"`+x.value+`"}`), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch setting: %w", err)
	}
	if err := waitFor(ctx, b.o.convergenceTimeout, b.lt.alive, func() bool { return b.audit.patchedClusters(leasetuneUser, tChange) >= b.o.n }); err != nil {
		return fmt.Errorf("global change: %w (%d of %d clusters written)", err, b.audit.patchedClusters(leasetuneUser, tChange), b.o.n)
	}
	x.cpChange = cpDelta(cp0, childrenCPU("kube-apiserver", "etcd"))
	quiet(ctx, b.audit, tChange)
	if got, err := countTriples(ctx, b.dyn, func(t triple) bool { return t.ok && t.rp == want }); err != nil || got != b.o.n {
		return fmt.Errorf("global change: %d of %d clusters have retry period %s (%w)", got, b.o.n, x.value, err)
	}
	s := b.lt.sample()
	x.cpuChange, x.rssAfterChange = s.cpu-b.beforeChange.cpu, s.rssKiB
	changeReqs := b.audit.filter(leasetuneUser, tChange, time.Now(), nil)
	x.changeWrites = countIf(changeReqs, clusterPatch)
	x.changeEvents = countIf(changeReqs, func(r *request) bool { return r.verb == "create" && r.resource == "events" })
	x.changeOther = countIf(changeReqs, isWrite) - x.changeWrites - x.changeEvents
	writes := filterReqs(changeReqs, clusterPatch)
	x.changeFromPatch = lastDone(writes).Sub(tChange)
	x.change = lastDone(writes).Sub(firstReceived(writes))
	x.changeTally = tally(changeReqs)
	if k > 0 {
		// Round 1 has no floor before it on the same objects: the first
		// floor patched the clusters as created, without leasetune's
		// annotations and field manager (docs/benchmark.md).
		x.before = b.res.rounds[k-1].after
	}
	logf("round %d: global change %s, %d cluster patches", k+1, x.change.Round(time.Millisecond), x.changeWrites)
	return nil
}

// peak is phase 5 of round k: leasetune's peak RSS, CPU, Go heap (its
// gctrace lines); the run's are the largest of its rounds'.
func (b *bench) peak(_ context.Context, k int) error {
	s := b.lt.sample()
	b.res.rounds[k].hwmKiB = s.hwmKiB
	b.res.hwmKiB = max(b.res.hwmKiB, s.hwmKiB)
	peak, live, at, gcs := gcTrace(b.logPath)
	if peak > b.res.heapPeakMB {
		b.res.heapPeakMB, b.res.heapPeakAt = peak, fmt.Sprintf("%s (round %d)", at, k+1)
	}
	b.res.heapLiveMB = max(b.res.heapLiveMB, live)
	b.res.gcs += gcs
	if b.pprof != "" {
		fetchProfile(b.pprof, "heap", filepath.Join(b.profile, "heap-end.pb.gz"))
	}
	return nil
}

// floorsAfter is phase 6 of round k: leasetune stopped (it would put its
// triple back), two floors: the retry period to 14s, then back to what
// leasetune wrote (the same work: N merge patches of a changed value), so
// that the next round's leasetune finds every cluster as it left it.
func (b *bench) floorsAfter(ctx context.Context, k int) error {
	b.profWG.Wait()
	b.lt.stop()
	x := &b.res.rounds[k]
	for _, f := range []struct{ rp, label string }{
		{"14s", fmt.Sprintf("after round %d", k+1)},
		{x.value, fmt.Sprintf("after round %d, back to %s", k+1, x.value)},
	} {
		logf("raw-PATCH floor %s, leasetune stopped", f.label)
		cp0 := childrenCPU("kube-apiserver", "etcd")
		start := time.Now()
		if err := b.patchFloor(ctx, func(i int) []interface{} { return append(userEnv(i), electionEnv("30s", "25s", f.rp)...) }); err != nil {
			return fmt.Errorf("floor %s: %w", f.label, err)
		}
		run := floorRun{label: f.label, took: time.Since(start), cp: cpDelta(cp0, childrenCPU("kube-apiserver", "etcd"))}
		b.res.floors = append(b.res.floors, run)
		x.after = append(x.after, run)
		logf("floor %s: %s", f.label, run.took.Round(time.Millisecond))
	}
	return nil
}

// child is the leasetune process.
type child struct {
	cmd      *exec.Cmd
	pid      int
	exited   chan struct{}
	stopOnce sync.Once

	mu   sync.Mutex
	last procStat // the last sample, for a process that has exited
}

// startChild watches the started cmd: its exit, and a sample of it every
// 500ms.
func startChild(cmd *exec.Cmd) *child {
	c := &child{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.exited) }()
	go func() { // keep the last sample, for a process that exits early
		for {
			select {
			case <-c.exited:
				return
			case <-time.After(500 * time.Millisecond):
			}
			if s, err := readProc(c.pid); err == nil {
				c.mu.Lock()
				c.last = s
				c.mu.Unlock()
			}
		}
	}()
	return c
}

// sample reads the process now, else returns its last sample.
func (c *child) sample() procStat {
	s, err := readProc(c.pid)
	if err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.last
	}
	return s
}

// alive is an error once the process has exited.
func (c *child) alive() error {
	select {
	case <-c.exited:
		return errors.New("leasetune exited")
	default:
		return nil
	}
}

// stop sends SIGTERM and waits for the exit, killing the process after
// 20s; once.
func (c *child) stop() {
	c.stopOnce.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(20 * time.Second):
			logf("leasetune did not stop within 20s of SIGTERM; killing it")
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	})
}
