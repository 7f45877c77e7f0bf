// Package electionstatus_test runs the whole controller (manager.Run, as
// the chart runs it) beside a Fleet v0.14.10 installation on a real
// kube-apiserver and checks the ElectionStatus object its leader keeps:
// that it is what electionstatus.Compute gives for the installation as
// `leasetune plan` reads it, that it is written once per change and never
// at rest, and who may read it.
package electionstatus_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/agentenv"
	statuscontroller "leasetune.io/leasetune/pkg/controllers/electionstatus"
	"leasetune.io/leasetune/pkg/electionstatus"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/manager"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, &cp, framework.Options{
		RepoCRDs:   []string{framework.SettingCRD, framework.ManagementCRD, framework.StatusCRD},
		SharedCRDs: []string{framework.FleetClusterCRD, framework.ProvisioningCRD},
	}))
}

// installation is one namespace set: leasetune's, Fleet's (v0.14.10's
// Deployments), Rancher's (none here) and the clusters'.
type installation struct {
	ns, fleetNS, rancherNS, clusterNS string
	rec                               *framework.Recorder
}

// start installs Fleet and three clusters (one with a retry-period
// override) and runs leasetune on them until the test ends, once the
// ElectionStatus is published.
func start(t *testing.T) *installation {
	t.Helper()
	in := run(t, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	framework.Eventually(t, "the ElectionStatus published", func() bool { return in.status(t) != nil })
	return in
}

// run is start without waiting for the ElectionStatus, logging to log;
// its Recorder records with opts.
func run(t *testing.T, log *slog.Logger, opts ...framework.RecordOption) *installation {
	t.Helper()
	ctx := context.Background()
	in := &installation{ns: cp.Namespace(t), fleetNS: cp.Namespace(t), rancherNS: cp.Namespace(t), clusterNS: cp.Namespace(t)}
	cp.InstallFleet(t, in.fleetNS, framework.FleetDeployments(t, "v0.14.10"))
	for i, name := range []string{"edge-1", "edge-2", "edge-3"} {
		opts := []kit.ClusterOption{kit.WithEnv(kit.Env("HTTPS_PROXY=http://proxy:3128")...)}
		if i == 2 {
			opts = append(opts, kit.WithAnnotations(map[string]string{agentenv.RetryPeriodAnnotation: "5s"}))
		}
		cp.Create(t, fleet.ClusterGVR, kit.FleetCluster(in.clusterNS, name, opts...))
	}
	cfg := rest.CopyConfig(cp.Config)
	in.rec = framework.Record(cfg, opts...)
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- manager.Run(mctx, cfg, manager.Config{
			Namespace: in.ns, FleetNamespace: in.fleetNS, RancherNamespace: in.rancherNS, QPS: 100, Burst: 200, Workers: 2,
			Settle: time.Second, LeaderElection: true, LeaseName: "leasetune", Identity: "status-test",
			Timings: manager.DefaultTimings, LookupEnv: func(string) (string, bool) { return "", false },
		}, log)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager.Run after cancel: %v", err)
		}
	})
	return in
}

// status reads the ElectionStatus's status (nil when there is none yet).
func (in *installation) status(t *testing.T) *electionstatus.Status {
	t.Helper()
	u, err := cp.Resource(statuscontroller.GVR, "").Get(context.Background(), electionstatus.Name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	raw, ok := u.Object["status"]
	if !ok {
		return nil
	}
	b, _ := json.Marshal(raw)
	var st electionstatus.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("the status does not read as a Status: %v\n%s", err, b)
	}
	return &st
}

// want is electionstatus.Compute over the installation as `leasetune plan`
// reads it (inventory.Read, settings.Snapshot).
func (in *installation) want(t *testing.T) electionstatus.Status {
	t.Helper()
	snap, err := inventory.Read(context.Background(), kubernetes.NewForConfigOrDie(cp.Config), dynamic.NewForConfigOrDie(cp.Config), inventory.Options{
		Namespace: in.ns, FleetNamespace: in.fleetNS, RancherNamespace: in.rancherNS})
	if err != nil {
		t.Fatal(err)
	}
	triples, err := snap.Triples()
	if err != nil {
		t.Fatal(err)
	}
	return electionstatus.Compute(snap, triples, electionstatus.Options{})
}

func same(a, b electionstatus.Status) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func (in *installation) patchSetting(t *testing.T, name, value string) {
	t.Helper()
	res := cp.Resource(framework.SettingsGVR, "")
	if _, err := res.Patch(context.Background(), name, types.MergePatchType, []byte(`{"value":"`+value+`"}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// statusWrites counts leasetune's writes of the ElectionStatus.
func (in *installation) statusWrites() int {
	n := 0
	for _, q := range in.rec.Requests() {
		if q.IsWrite() && strings.Contains(q.Path, "/electionstatuses") {
			n++
		}
	}
	return n
}

// TestStatusIsTheInstallationAsPlanReadsIt: the object the leader keeps
// from its caches is, field for field, what Compute gives for the
// installation read as `leasetune plan` reads it; after a change of the
// agent triple too, once it settled.
func TestStatusIsTheInstallationAsPlanReadsIt(t *testing.T) {
	in := start(t)
	framework.Eventually(t, "the status equals Compute over inventory.Read", func() bool {
		got := in.status(t)
		return got != nil && same(*got, in.want(t))
	})
	got := in.status(t)
	if got.Fleet.Channel != string(fleet.ChannelAgentManagement) || got.Agents.Clusters != 3 || got.Fleet.Processes == 0 {
		t.Errorf("status fleet %+v, agents %+v", got.Fleet, got.Agents)
	}
	if len(got.Clusters) != 1 || got.Clusters[0].Name != in.clusterNS+"/edge-3" || got.Clusters[0].Problem != string(agentenv.ProblemUnsupported) {
		t.Errorf("listed clusters %+v, want edge-3's override reported unsupported on Fleet v0.14", got.Clusters)
	}
	in.patchSetting(t, "fleet-agent-leader-election-retry-period", "12s")
	framework.Eventually(t, "the new agent triple in the status, equal to Compute again", func() bool {
		got := in.status(t)
		return got != nil && got.Components[1].InEffect != nil && got.Components[1].InEffect.RetryPeriod == "12s" && same(*got, in.want(t))
	})
}

// TestStatusWrittenOncePerChangeNeverAtRest: the status is written when
// the installation changes (a setting), once the burst has settled, and
// not at all while nothing changes, however much else (Deployment status
// updates, resyncs) the informers see.
func TestStatusWrittenOncePerChangeNeverAtRest(t *testing.T) {
	in := start(t)
	framework.Eventually(t, "converged", func() bool {
		got := in.status(t)
		return got != nil && same(*got, in.want(t))
	})
	time.Sleep(2 * statuscontroller.Debounce)
	n := in.statusWrites()
	framework.Consistently(t, "no status write at rest", 3*statuscontroller.Debounce, func() bool { return in.statusWrites() == n })
	in.patchSetting(t, "fleet-leader-election-retry-period", "6s")
	framework.Eventually(t, "the Fleet controllers' 6s in the status", func() bool {
		got := in.status(t)
		return got != nil && got.Components[0].InEffect != nil && got.Components[0].InEffect.RetryPeriod == "6s" && same(*got, in.want(t))
	})
	time.Sleep(2 * statuscontroller.Debounce)
	m := in.statusWrites()
	// The change is one pending triple, then (after the settle time) the
	// triple in effect and the Deployments' env: a few writes, each a
	// change of what the status says; never one per event.
	if m-n < 1 || m-n > 4 {
		t.Errorf("%d status writes for one setting change, want 1 to 4 (pending, in effect, the Deployments' env)", m-n)
	}
	framework.Consistently(t, "no status write at rest after the change", 3*statuscontroller.Debounce, func() bool { return in.statusWrites() == m })
}

// TestStatusPutBackAfterAHandEdit: someone else's edit of the status is
// put back (the object is leasetune's), and a deleted object is made again.
func TestStatusPutBackAfterAHandEdit(t *testing.T) {
	in := start(t)
	framework.Eventually(t, "converged", func() bool {
		got := in.status(t)
		return got != nil && same(*got, in.want(t))
	})
	res := cp.Resource(statuscontroller.GVR, "")
	if _, err := res.Patch(context.Background(), electionstatus.Name, types.MergePatchType,
		[]byte(`{"status":{"fleet":{"channel":"none","processes":99}}}`), metav1.PatchOptions{FieldManager: "someone"}, "status"); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the edit put back", func() bool {
		got := in.status(t)
		return got != nil && got.Fleet.Processes != 99 && same(*got, in.want(t))
	})
	if err := res.Delete(context.Background(), electionstatus.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "made again", func() bool {
		got := in.status(t)
		return got != nil && same(*got, in.want(t))
	})
}

// TestStatusFieldsOfAnotherManagerRemoved: a hand edit that adds fields
// leasetune does not write (here clustersNotListed and fleet.judgeProblem,
// which it omits when they are empty) is put back too. Server-side apply
// removes only the fields the applier owned; those the edit set belong to
// its own field manager (k8s.io/apimachinery v0.32
// pkg/util/managedfields/internal/structuredmerge.go Apply prunes only the
// applier's removed fields; sigs.k8s.io/structured-merge-diff v4 merge/update.go
// prune), so an apply alone leaves them for ever.
func TestStatusFieldsOfAnotherManagerRemoved(t *testing.T) {
	in := start(t)
	framework.Eventually(t, "converged", func() bool {
		got := in.status(t)
		return got != nil && same(*got, in.want(t))
	})
	res := cp.Resource(statuscontroller.GVR, "")
	if _, err := res.Patch(context.Background(), electionstatus.Name, types.MergePatchType,
		[]byte(`{"status":{"clustersNotListed":7,"fleet":{"judgeProblem":"bogus"}}}`), metav1.PatchOptions{FieldManager: "someone"}, "status"); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the added fields removed", func() bool {
		got := in.status(t)
		return got != nil && got.ClustersNotListed == 0 && got.Fleet.JudgeProblem == "" && same(*got, in.want(t))
	})
	time.Sleep(2 * statuscontroller.Debounce)
	n := in.statusWrites()
	framework.Consistently(t, "no write loop after the repair", 3*statuscontroller.Debounce, func() bool { return in.statusWrites() == n })
}

// TestStatusCRDInstalledAfterStart: the ElectionStatus CRD is not there
// when the leader starts (an upgrade from a chart without it: Helm
// installs the files of crds/ on install only, never on upgrade), and is
// installed afterwards (`kubectl apply -f`, as the CRD file says). The
// leader keeps the status from then on, without a restart. While the CRD
// is missing the leader watches that CRD by name and asks discovery
// nothing: not once in 25 s (it asked every 10 s before the watch).
func TestStatusCRDInstalledAfterStart(t *testing.T) {
	install := deleteStatusCRD(t)
	logs := &kit.SyncBuffer{}
	in := run(t, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})), framework.WithReads())
	framework.Eventually(t, "the leader saw no ElectionStatus CRD", func() bool {
		return strings.Contains(logs.String(), "electionstatuses.leasetune.io is not installed")
	})
	from := time.Now()
	time.Sleep(25 * time.Second)
	var asked, watched int
	for _, q := range in.rec.Requests() {
		if q.At.Before(from) {
			continue
		}
		if q.Path == "/apis/"+statuscontroller.GVR.GroupVersion().String() {
			asked++
		}
		if q.Path == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions" && q.Query.Get("watch") == "true" &&
			q.Query.Get("fieldSelector") == "metadata.name="+statuscontroller.GVR.GroupResource().String() {
			watched++
		}
	}
	if asked != 0 {
		t.Errorf("discovery asked for %s %d times in 25 s while the CRD was missing, want 0 (the CRD watched by name)", statuscontroller.GVR.GroupVersion(), asked)
	}
	// The watch began before from (right after the first look); it is
	// counted only where it was renewed in these 25 s.
	t.Logf("in 25 s without the CRD: %d discovery requests, %d watches of the CRD begun", asked, watched)
	installed := time.Now()
	install()
	framework.Eventually(t, "the status published once the CRD is there", func() bool {
		got := in.status(t)
		return got != nil && same(*got, in.want(t))
	})
	t.Logf("the status published %s after the CRD was installed", time.Since(installed).Round(100*time.Millisecond))
}

// TestStatusNamesRancherConfigAsPlanDoes: with a rancher-config ConfigMap
// in the Rancher namespace, the leader's status names it as `leasetune
// plan` does ("ConfigMap <namespace>/rancher-config"): the page shows that
// name and its plan lists the ConfigMap's change under it.
func TestStatusNamesRancherConfigAsPlanDoes(t *testing.T) {
	in := start(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: in.rancherNS, Name: fleetenv.RancherConfigName},
		Data: map[string]string{fleetenv.RancherConfigKey: "leaderElection:\n  leaseDuration: 30s\n  renewDeadline: 25s\n  retryPeriod: 10s\n"}}
	if _, err := cp.Client.CoreV1().ConfigMaps(in.rancherNS).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "rancher-config in the status, equal to Compute over inventory.Read", func() bool {
		got := in.status(t)
		return got != nil && got.RancherConfig.Present && same(*got, in.want(t))
	})
	if got, want := in.status(t).RancherConfig.Object, "ConfigMap "+in.rancherNS+"/"+fleetenv.RancherConfigName; got != want {
		t.Errorf("rancherConfig.object %q, want %q", got, want)
	}
}

// TestStatusBackSoonAfterItsCRDIsReinstalled: the CRD is deleted under the
// running leader (with the object) and installed again 90 s later. The
// leader makes the object again within 45 s of the CRD's return: its
// retries while the kind was not served back off to 30 s at most (as
// leasetune's other retries do), not to the 16 minutes of client-go's
// default controller rate limiter (k8s.io/client-go v0.28
// util/workqueue/default_rate_limiters.go DefaultControllerRateLimiter:
// 5 ms doubling to 1000 s). At rest nothing else wakes it: the informer of
// a kind with no object sees no event when the kind returns.
func TestStatusBackSoonAfterItsCRDIsReinstalled(t *testing.T) {
	in := start(t)
	framework.Eventually(t, "converged", func() bool {
		got := in.status(t)
		return got != nil && same(*got, in.want(t))
	})
	install := deleteStatusCRD(t)
	time.Sleep(90 * time.Second)
	install()
	deadline := time.Now().Add(45 * time.Second)
	for in.status(t) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the ElectionStatus not made again within 45s of its CRD's return")
		}
		time.Sleep(time.Second)
	}
}

// deleteStatusCRD deletes the ElectionStatus CRD, waits until it and its
// kind are gone, and returns what installs it again (as it was) and waits
// until its kind is served; that also runs when t ends, since the
// package's other tests need the CRD.
func deleteStatusCRD(t *testing.T) (install func()) {
	t.Helper()
	crds := apiextclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions()
	name := statuscontroller.GVR.GroupResource().String()
	crd, err := crds.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	install = func() {
		again := &apiextv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crd.Name, Labels: crd.Labels}, Spec: crd.Spec}
		if _, err := crds.Create(context.Background(), again, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		framework.Eventually(t, "the ElectionStatus kind served", func() bool {
			_, err := cp.Resource(statuscontroller.GVR, "").List(context.Background(), metav1.ListOptions{})
			return err == nil
		})
	}
	t.Cleanup(install)
	if err := crds.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the ElectionStatus CRD gone", func() bool {
		_, err := crds.Get(context.Background(), name, metav1.GetOptions{})
		_, lerr := cp.Resource(statuscontroller.GVR, "").List(context.Background(), metav1.ListOptions{})
		return apierrors.IsNotFound(err) && lerr != nil
	})
	return install
}
