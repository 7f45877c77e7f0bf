package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"leasetune.io/leasetune/pkg/election"
)

// todayFleet is the Fleet release of the "today" configuration: the
// newest of the line Rancher v2.15 ships (../shared/fixtures/fleet).
const todayFleet = "v0.16.1"

var electionStatusGVR = schema.GroupVersionResource{Group: "leasetune.io", Version: "v1alpha1", Resource: "electionstatuses"}

// todayResults are what the "today" configuration measures: on Fleet
// v0.13+ (channel agentmanagement) a global agent change is one write to
// fleet-agentmanagement's container, whatever the number of clusters.
type todayResults struct {
	n                              int
	apiserver, load, settle        string
	create, list                   time.Duration
	listPages                      int
	ready                          time.Duration // process start → the agentenv controller's "caches synced" (every fleet Cluster cached)
	firstStatus                    time.Duration // process start → the ElectionStatus first written with every cluster (its log's "status written" clusters=N)
	startWrites                    []string
	startClusterWrites             int
	restTally                      []string
	restOnlyLease                  bool
	toDeployment, toStatus         time.Duration // the Setting's patch → the Deployment's patch; → the ElectionStatus written after it
	changeClusterWrites            int
	changeTally                    []string
	statusBytes                    int
	hwmKiB, rssKiB                 int64
	cpuStart, cpuRest, cpuChange   time.Duration
	heapPeakMB, heapLiveMB, gcs    int
	valueBefore, valueAfter, agent string
}

// runToday measures leasetune as the chart runs it beside Fleet v0.16.1's
// Deployments and N fleet Clusters: start to caches synced, requests at
// rest, a global agent change from the Setting's patch to
// fleet-agentmanagement's new env and to the ElectionStatus written, the
// ElectionStatus's size, peak RSS.
func runToday(ctx context.Context, o options, c configuration) (res todayResults, err error) {
	b := &bench{o: o, c: c, res: results{config: c, settle: o.values.Settle, n: o.n, memLimit: o.memLimit, load: loadAvg(), rest: o.rest}}
	defer func() { b.close(err) }()
	res = todayResults{n: o.n, load: b.res.load, settle: b.res.settle}
	for _, phase := range []func(context.Context) error{b.startControlPlane, b.createClusters, runBuildPhase} {
		if err := phase(ctx); err != nil {
			return res, err
		}
	}
	res.apiserver, res.create, res.list, res.listPages = b.res.apiserver, b.res.create, b.res.list, b.res.listPages
	if err := b.startLeasetune(ctx, 0); err != nil {
		return res, err
	}
	// Caches synced: the agentenv controller logs "caches synced" once
	// every informer of the cluster kinds has listed; the status
	// controller logs "status written" with the clusters it counted (it
	// may write before its own cache holds them all). The log's time= is
	// RFC 3339 with milliseconds.
	statusWrite := func(r *request) bool {
		return (r.verb == "update" || r.verb == "patch" || r.verb == "create") && strings.HasPrefix(r.resource, "electionstatuses.leasetune.io") && r.code >= 200 && r.code < 300
	}
	var synced, full time.Time
	if err := waitFor(ctx, b.o.convergenceTimeout, b.lt.alive, func() bool {
		if synced.IsZero() {
			synced = logTime(b.logPath, `msg="caches synced"`, "controller=agentenv")
		}
		if full.IsZero() {
			full = logTime(b.logPath, `msg="status written"`, fmt.Sprintf(" clusters=%d", b.o.n))
		}
		return !synced.IsZero() && !full.IsZero()
	}); err != nil {
		return res, fmt.Errorf("caches synced and the ElectionStatus of every cluster: %w", err)
	}
	res.ready, res.firstStatus = synced.Sub(b.t0), full.Sub(b.t0)
	quiet(ctx, b.audit, b.t0)
	startReqs := b.audit.filter(leasetuneUser, b.t0, time.Now(), nil)
	res.startWrites = tally(filterReqs(startReqs, isWrite))
	res.startClusterWrites = countIf(startReqs, clusterPatch)
	b.afterStart = b.lt.sample()
	res.cpuStart = b.afterStart.cpu
	logf("today: ready in %s, %d cluster writes at start", res.ready.Round(time.Millisecond), res.startClusterWrites)

	if err := b.atRest(ctx); err != nil {
		return res, err
	}
	res.restTally, res.restOnlyLease, res.cpuRest = b.res.restTally, b.res.restOnlyLease, b.res.cpuRest

	// One global agent change.
	before, err := b.dyn.Resource(settingGVR).Get(ctx, changedSetting, metav1.GetOptions{})
	if err != nil {
		return res, err
	}
	res.valueBefore, _ = before.Object["value"].(string)
	if res.valueBefore == "" {
		res.valueBefore = `"" (the default, 10s)`
	}
	res.valueAfter = "12s"
	want, _ := time.ParseDuration(res.valueAfter)
	tChange := time.Now()
	if _, err := b.dyn.Resource(settingGVR).Patch(ctx, changedSetting, types.MergePatchType,
		[]byte(`{"value":"`+res.valueAfter+`"}`), metav1.PatchOptions{}); err != nil {
		return res, fmt.Errorf("patch setting: %w", err)
	}
	agentPatch := func(r *request) bool {
		return r.verb == "patch" && r.resource == "deployments.apps" && r.name == "fleet-controller" && r.code >= 200 && r.code < 300
	}
	if err := waitFor(ctx, b.o.convergenceTimeout, b.lt.alive, func() bool {
		_ = b.audit.poll()
		p := b.audit.filter(leasetuneUser, tChange, time.Now(), agentPatch)
		return len(p) > 0 && len(b.audit.filter(leasetuneUser, firstReceived(p), time.Now(), statusWrite)) > 0
	}); err != nil {
		return res, fmt.Errorf("global agent change: %w", err)
	}
	quiet(ctx, b.audit, tChange)
	d, err := b.cs.AppsV1().Deployments("cattle-fleet-system").Get(ctx, "fleet-controller", metav1.GetOptions{})
	if err != nil {
		return res, err
	}
	got := ""
	for _, ctr := range d.Spec.Template.Spec.Containers {
		if ctr.Name == "fleet-agentmanagement" {
			for _, e := range ctr.Env {
				if e.Name == election.FleetAgentPrefix.EnvName(election.RetryPeriod) {
					got = e.Value
				}
			}
		}
	}
	if dd, err := time.ParseDuration(got); err != nil || dd != want {
		return res, fmt.Errorf("global agent change: fleet-agentmanagement has %s=%q, want %s", election.FleetAgentPrefix.EnvName(election.RetryPeriod), got, res.valueAfter)
	}
	res.agent = got
	changeReqs := b.audit.filter(leasetuneUser, tChange, time.Now(), nil)
	p := filterReqs(changeReqs, agentPatch)
	res.toDeployment = lastDone(p).Sub(tChange)
	res.toStatus = lastDone(filterReqs(b.audit.filter(leasetuneUser, firstReceived(p), time.Now(), nil), statusWrite)).Sub(tChange)
	res.changeClusterWrites = countIf(changeReqs, clusterPatch)
	res.changeTally = tally(filterReqs(changeReqs, isWrite))
	s := b.lt.sample()
	res.cpuChange = s.cpu - b.beforeChange.cpu
	st, err := b.dyn.Resource(electionStatusGVR).Get(ctx, "leasetune", metav1.GetOptions{})
	if err != nil {
		return res, fmt.Errorf("the ElectionStatus: %w", err)
	}
	raw, _ := json.Marshal(st.Object)
	res.statusBytes = len(raw)
	res.hwmKiB, res.rssKiB = s.hwmKiB, s.rssKiB
	res.heapPeakMB, res.heapLiveMB, _, res.gcs = gcTrace(b.logPath)
	logf("today: Setting patch → Deployment %s, → ElectionStatus %s; %d cluster writes", res.toDeployment.Round(time.Millisecond), res.toStatus.Round(time.Millisecond), res.changeClusterWrites)
	return res, nil
}

// printToday prints the "today" table.
func printToday(w io.Writer, r todayResults) {
	fmt.Fprintf(w, "\nConfiguration today: Fleet %s's Deployments and fleet Cluster CRD, the chart's defaults (channel detected, --settle %s, webhook registered, UI on, ElectionStatus CRD)\n\n", todayFleet, r.settle)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "| %s\t| %s\t|\n", k, v) }
	row("measure", "value")
	row("machine; control plane", fmt.Sprintf("load average %s at the start; kube-apiserver %s, etcd --unsafe-no-fsync, audit log at Metadata", r.load, r.apiserver))
	row("N", fmt.Sprintf("%d fleet Clusters (Fleet %s CRD), created in %s; one paged LIST %s (%d pages)", r.n, todayFleet, r.create.Round(time.Millisecond), r.list.Round(time.Millisecond), r.listPages))
	row("start → caches synced (agentenv's \"caches synced\")", r.ready.Round(time.Millisecond).String())
	row("start → the ElectionStatus written with every cluster", r.firstStatus.Round(time.Millisecond).String())
	row("writes at start", fmt.Sprintf("%d cluster writes; %s", r.startClusterWrites, strings.Join(r.startWrites, "; ")))
	row("requests at rest, per hour", fmt.Sprintf("%s (only its Lease: %v)", strings.Join(r.restTally, "; "), r.restOnlyLease))
	row("global agent change ("+changedSetting+" "+r.valueBefore+" → "+r.valueAfter+")", fmt.Sprintf("Setting patch → fleet-controller Deployment patched (fleet-agentmanagement %s=%s): %s (the settle time %s included); → ElectionStatus written: %s; %d cluster writes; writes: %s",
		election.FleetAgentPrefix.EnvName(election.RetryPeriod), r.agent, r.toDeployment.Round(time.Millisecond), r.settle, r.toStatus.Round(time.Millisecond), r.changeClusterWrites, strings.Join(r.changeTally, "; ")))
	row("ElectionStatus size", fmt.Sprintf("%d bytes (JSON)", r.statusBytes))
	row("peak RSS (VmHWM); RSS after the change", fmt.Sprintf("%s; %s (Go heap peak %d MB, live ≤ %d MB, %d GCs)", mib(r.hwmKiB), mib(r.rssKiB), r.heapPeakMB, r.heapLiveMB, r.gcs))
	row("CPU seconds", fmt.Sprintf("%.1f start, %.1f at rest, %.1f in the change", r.cpuStart.Seconds(), r.cpuRest.Seconds(), r.cpuChange.Seconds()))
	_ = tw.Flush()
}

// logTime returns the time= of the first line of the text log at path
// that contains every one of match, or the zero time.
func logTime(path string, match ...string) time.Time {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		all := strings.HasPrefix(l, "time=")
		for _, m := range match {
			all = all && strings.Contains(l, m)
		}
		if !all {
			continue
		}
		v := strings.TrimPrefix(strings.Fields(l)[0], "time=")
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	return time.Time{}
}
