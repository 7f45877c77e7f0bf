// Command bench is `make bench`: the project's benchmark on a real
// kube-apiserver and etcd. It creates N fleet Clusters (Fleet v0.9.9, whose
// agents read the triple from each cluster's spec.agentEnvVars), measures
// the raw-PATCH floor (N concurrent merge patches of spec.agentEnvVars with
// an unthrottled client), then runs bin/leasetune as a child process and
// measures its initial convergence, its API requests at rest, one global
// change of the agent triple (time to the last write, writes counted from
// the apiserver's audit log), and its peak RSS and CPU seconds, measures
// the floor again once leasetune has stopped, and prints one Markdown
// table. Everything it starts listens on loopback and is
// stopped at the end; its folder is removed.
//
// A run is a bench (bench.go) whose methods are its phases, in order; it
// reads the apiserver's audit log as it grows with pkg/audit's Follower
// and folds its events into requests (audit.go).
//
// It is a development tool, not part of the shipped binary.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

const (
	workers = 16
	qps     = 5000
	burst   = 10000

	leasetuneUser = "leasetune"   // leasetune's own identity (a client certificate)
	floorUser     = "bench-floor" // the raw-PATCH floor's identity
	benchGroup    = "leasetune-bench"

	// The global change: the agent retry period, from Fleet's 10s to 12s
	// in the first round, then 11s, 12s, ... (valid with 30s/25s: 25s >
	// 1.2×12s and ≥ 2×12s).
	changedSetting = "fleet-agent-leader-election-retry-period"
)

// changedValue is the retry period round k's change sets.
func changedValue(k int) string { return []string{"12s", "11s"}[k%2] }

type options struct {
	n                  int
	rest               time.Duration
	assets, binary     string
	helm               string
	fixtures           string
	convergenceTimeout time.Duration
	profile            string
	// configs are the configurations measured, in order, each on its own
	// control plane (-configs).
	configs []configuration
	// rounds is how many global changes are measured, each between floors.
	rounds int
	// values are the chart's values the chart configuration runs with.
	values chartValues
	// memLimit is GOMEMLIMIT for the controller: the chart's goMemLimit
	// unless -gomemlimit says otherwise ("off": none).
	memLimit string
}

func main() {
	// envtest logs through controller-runtime's logger; without one set it
	// prints a stack trace saying so. The bench reports on its own.
	ctrllog.SetLogger(logr.Discard())
	var o options
	flag.IntVar(&o.n, "n", 10000, "number of fleet Clusters")
	flag.DurationVar(&o.rest, "rest", 180*time.Second, "how long to measure leasetune at rest")
	flag.StringVar(&o.assets, "assets", "", "folder of kube-apiserver, etcd and kubectl (scripts/controlplane.sh prints it)")
	flag.StringVar(&o.binary, "binary", "bin/leasetune", "the leasetune binary")
	flag.StringVar(&o.helm, "helm", "helm", "the helm binary (make bench passes scripts/helm.sh's)")
	flag.StringVar(&o.fixtures, "fixtures", "../shared/fixtures", "the shared fixtures folder (Fleet CRDs and Deployments)")
	flag.DurationVar(&o.convergenceTimeout, "timeout", 15*time.Minute, "how long each convergence may take before the bench gives up")
	flag.IntVar(&o.rounds, "rounds", 3, "how many global changes to measure, each between the floors just before and after it (leasetune restarted for each; the verdict is the median round's)")
	flag.StringVar(&o.profile, "profile", "", "also build leasetune with net/http/pprof (go build -overlay, hack/bench/pprof_overlay.go.in), run that, and write heap and CPU profiles to this folder (one subfolder per configuration)")
	configs := flag.String("configs", "bench,chart,today", "the configurations to measure, in order, each on its own control plane: bench (channel given, --settle 0s, no webhook registered, no UI, no ElectionStatus) and chart (the chart's defaults), both beside Fleet v0.9.9 (a global agent change writes every cluster); today (the chart's defaults beside Fleet v0.16.1: a global agent change is one write)")
	values, err := readChartValues("charts/leasetune/values.yaml")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	o.values = values
	flag.StringVar(&o.memLimit, "gomemlimit", values.GoMemLimit, "GOMEMLIMIT for the controller (default: the chart's goMemLimit, as the chart runs it; off: none)")
	flag.Parse()
	if o.memLimit == "off" {
		o.memLimit = ""
	}
	for _, name := range strings.Split(*configs, ",") {
		c, ok := configurations[strings.TrimSpace(name)]
		if !ok {
			fmt.Fprintf(os.Stderr, "bench: -configs: unknown configuration %q (bench, chart)\n", name)
			os.Exit(2)
		}
		o.configs = append(o.configs, c)
	}
	if o.assets == "" || o.n <= 0 || o.rounds <= 0 || len(o.configs) == 0 {
		fmt.Fprintln(os.Stderr, "usage: bench -assets DIR [-n N] [-rest 180s] [-binary bin/leasetune] [-configs bench,chart] [-rounds 3]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "bench %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// results is what one configuration's column of the table shows.
type results struct {
	config                 configuration
	settle                 string // the controller's --settle
	n                      int
	memLimit               string
	load                   string
	apiserver              string
	create, list           time.Duration
	restore                time.Duration // the first floor's restore (not a floor: a smaller body)
	listPages              int
	floorWrites            int        // the first floor's PATCHes in the audit log
	floors                 []floorRun // every floor, in order
	rounds                 []round    // every global change, in order
	initial                time.Duration
	initialClusterWrites   int
	initialTally           []string
	rest                   time.Duration
	restTally              []string
	restOnlyLease          bool
	cpuInitial, cpuRest    time.Duration
	hwmKiB                 int64 // the largest VmHWM of the rounds' processes
	rssAfterInitial        int64
	heapPeakMB, heapLiveMB int
	heapPeakAt             string
	cpInitial              string // kube-apiserver and etcd CPU seconds in the first start
	gcs                    int
}

// floorRun is one raw-PATCH floor: N merge patches of spec.agentEnvVars
// by the floor's user, leasetune stopped.
type floorRun struct {
	label string        // when it ran
	took  time.Duration // first PATCH sent → last answered
	cp    string        // kube-apiserver and etcd CPU seconds in it
}

// round is one global change, measured between the floors just before
// it and just after it: this machine's speed drifts within minutes (a
// shared VM), so each change is compared with the floors nearest to it
// in time, and the run's verdict is the median round's. The first round
// has floors after it only: the floor before leasetune's first start
// patches the clusters as created, without the annotations and the
// second field manager leasetune's writes leave on them, which every
// later PATCH (leasetune's and the floors') carries along.
type round struct {
	value string // the agent retry period the change sets
	// startWrites are leasetune's cluster writes from its start to the
	// Setting patch: the first start's N in the first round, and none in
	// the others (the floor left every cluster as leasetune had it).
	startWrites int
	// change is from leasetune's first cluster write after the Setting
	// patch to its last (the settle time not counted); changeFromPatch
	// from the Setting patch to the last write.
	change, changeFromPatch                 time.Duration
	changeWrites, changeEvents, changeOther int
	changeTally                             []string
	cpChange                                string
	cpuChange                               time.Duration // leasetune's CPU in the change
	hwmKiB, rssAfterChange                  int64
	before, after                           []floorRun // the floors around it
}

// fastest is the faster of the floors around r.
func (r round) fastest() time.Duration {
	var f time.Duration
	for _, x := range append(append([]floorRun{}, r.before...), r.after...) {
		if f == 0 || x.took < f {
			f = x.took
		}
	}
	return f
}

// ratio is r's change over its fastest floor.
func (r round) ratio() float64 { return r.change.Seconds() / r.fastest().Seconds() }

// medianRatio is the median of the rounds' ratios, the higher of the two
// middle ones for an even number of rounds (a round's own ratio, never a
// mean that no round had): the run's verdict on the change (1.3× at most).
func (r results) medianRatio() float64 {
	var xs []float64
	for _, x := range r.rounds {
		xs = append(xs, x.ratio())
	}
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	return xs[len(xs)/2]
}

// allWrites is whether every round's change wrote exactly N clusters,
// and every restart after the first wrote none.
func (r results) allWrites() bool {
	for i, x := range r.rounds {
		if x.changeWrites != r.n || (i > 0 && x.startWrites != 0) {
			return false
		}
	}
	return len(r.rounds) > 0
}

// fastest is the fastest floor around the first start: the one before
// it and the first round's after it.
func (r results) fastest() time.Duration {
	var f time.Duration
	if len(r.floors) > 0 {
		f = r.floors[0].took
	}
	if len(r.rounds) > 0 && len(r.rounds[0].after) > 0 {
		if a := r.rounds[0].fastest(); f == 0 || a < f {
			f = a
		}
	}
	return f
}

// initialBound is the first start's target: 1.5× the faster floor plus
// one paged LIST of the clusters.
func (r results) initialBound() time.Duration {
	return time.Duration(1.5*float64(r.fastest())) + r.list
}

// setup creates the namespaces, Fleet v0.9.9's Deployments (as Helm
// does), and a ClusterRoleBinding of cluster-admin for the bench's group.
func setup(ctx context.Context, cs kubernetes.Interface, o options, fleetVersion string) error {
	for _, ns := range []string{"cattle-fleet-system", "leasetune-system", clusterNamespace} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: benchGroup},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: benchGroup}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(o.fixtures, "fleet", "fleet-"+fleetVersion+"-deployments.yaml"))
	if err != nil {
		return err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(f), 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); err != nil {
			if err.Error() == "EOF" {
				return nil
			}
			return err
		}
		if d.Name == "" {
			continue
		}
		if _, err := cs.AppsV1().Deployments("cattle-fleet-system").Create(ctx, &d, metav1.CreateOptions{FieldManager: "helm"}); err != nil {
			return err
		}
	}
}

// runBuildPhase runs `make build`, so the measured binary is the tree's.
func runBuildPhase(ctx context.Context) error {
	logf("make build")
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "build")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// freePorts returns n free loopback addresses.
func freePorts(n int) ([]string, error) {
	var out []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// waitFor polls cond every 100ms until it holds, the timeout passes, ctx
// ends or alive fails.
func waitFor(ctx context.Context, timeout time.Duration, alive func() error, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if err := alive(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration, alive func() error) error {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := alive(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return nil
}

// quiet waits until leasetune has written no cluster for 5s (at most 60s),
// so that a late extra write is counted.
func quiet(ctx context.Context, a *auditLog, since time.Time) {
	end := time.Now().Add(60 * time.Second)
	for time.Now().Before(end) && ctx.Err() == nil {
		_ = a.poll()
		last := lastDone(a.filter(leasetuneUser, since, time.Now(), isWrite))
		if time.Since(last) > 5*time.Second {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func filterReqs(rs []*request, f func(*request) bool) []*request {
	var out []*request
	for _, r := range rs {
		if f(r) {
			out = append(out, r)
		}
	}
	return out
}

func countIf(rs []*request, f func(*request) bool) int { return len(filterReqs(rs, f)) }

// perHour turns tally lines "count rest" measured over d into "rate/h rest".
func perHour(lines []string, d time.Duration) []string {
	var out []string
	for _, l := range lines {
		c, rest, _ := strings.Cut(l, " ")
		n, _ := strconv.Atoi(c)
		out = append(out, fmt.Sprintf("%.0f/h %s (%d in %s)", float64(n)*float64(time.Hour)/float64(d), rest, n, d))
	}
	return out
}

var gcLine = regexp.MustCompile(`^gc \d+ @(\S+) .* (\d+)->(\d+)->(\d+) MB`)

// gcTrace reads the GODEBUG=gctrace=1 lines of the controller's log: the
// largest heap at a GC's start and the largest live heap after one.
func gcTrace(path string) (peak, live int, peakAt string, gcs int) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := gcLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		gcs++
		a, _ := strconv.Atoi(m[2])
		c, _ := strconv.Atoi(m[4])
		if a > peak {
			peak, peakAt = a, m[1]
		}
		live = max(live, c)
	}
	return
}

// tail prints the last n lines of the controller's log (not gctrace).
func tail(path string, n int) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "gc ") && l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	fmt.Fprintln(os.Stderr, "--- last lines of leasetune's log ---")
	fmt.Fprintln(os.Stderr, strings.Join(lines, "\n"))
}

// triple is the CATTLE_ELECTION_* triple in a cluster's spec.agentEnvVars.
type triple struct {
	ok         bool
	ld, rd, rp time.Duration
}

func tripleOf(u *unstructured.Unstructured) triple {
	list, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
	var t triple
	n := 0
	for _, e := range list {
		m, _ := e.(map[string]interface{})
		name, _ := m["name"].(string)
		value, _ := m["value"].(string)
		d, err := time.ParseDuration(value)
		if err != nil {
			continue
		}
		switch name {
		case "CATTLE_ELECTION_LEASE_DURATION":
			t.ld, n = d, n+1
		case "CATTLE_ELECTION_RENEW_DEADLINE":
			t.rd, n = d, n+1
		case "CATTLE_ELECTION_RETRY_PERIOD":
			t.rp, n = d, n+1
		}
	}
	t.ok = n == 3
	return t
}

// eachCluster lists every fleet Cluster in pages of 500 (as the bench's
// admin user, which the audit log leaves out), calls f on each, and
// returns the number of pages.
func eachCluster(ctx context.Context, dyn dynamic.Interface, f func(*unstructured.Unstructured)) (int, error) {
	pages := 0
	opts := metav1.ListOptions{Limit: 500}
	for {
		page, err := dyn.Resource(fleetClusterGVR).Namespace(clusterNamespace).List(ctx, opts)
		if err != nil {
			return pages, err
		}
		pages++
		for i := range page.Items {
			f(&page.Items[i])
		}
		if page.GetContinue() == "" {
			return pages, nil
		}
		opts.Continue = page.GetContinue()
	}
}

// listClusters is one paged LIST of every cluster, decoded: the
// reference the first start is bounded by (leasetune's informers list the
// clusters once before they write).
func listClusters(ctx context.Context, dyn dynamic.Interface) (int, error) {
	return eachCluster(ctx, dyn, func(*unstructured.Unstructured) {})
}

// countTriples counts the fleet Clusters whose triple f accepts (a paged
// LIST). The bench calls it only after a phase's timing has ended: a
// watch of every cluster during a phase would make the apiserver encode
// and send every written object once more, and the bench decode it on the
// same cores, which the raw-PATCH floor does not pay.
func countTriples(ctx context.Context, dyn dynamic.Interface, f func(triple) bool) (int, error) {
	n := 0
	_, err := eachCluster(ctx, dyn, func(u *unstructured.Unstructured) {
		if f(tripleOf(u)) {
			n++
		}
	})
	return n, err
}

// printTable prints the results: a summary, one row per configuration;
// then one Markdown table, a column per configuration; then each
// configuration's request tallies.
func printTable(out io.Writer, rs []results) {
	verdict := func(ok bool) string {
		if ok {
			return "**holds**"
		}
		return "**fails**"
	}
	sec := func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
	p := func(format string, args ...interface{}) { fmt.Fprintf(out, format+"\n", args...) }
	rounds := 0
	for _, r := range rs {
		rounds = max(rounds, len(r.rounds))
	}
	row := func(measure, target string, cell func(r results) string) {
		cells := make([]string, len(rs))
		for i, r := range rs {
			cells[i] = cell(r)
		}
		p("| %s | %s | %s |", measure, strings.Join(cells, " | "), target)
	}
	// The summary: one row per configuration (what the README shows).
	p("")
	p("| configuration | first start: process start → last cluster write (≤ 1.5× the faster floor + one paged LIST) | global change: first → last cluster write, the median of %d rounds, each against the faster floor around it (≤ 1.3×) | writes of each change (exactly N) | peak RSS (≤ 150 MiB) | requests at rest (its Lease only) |", rounds)
	p("|---|---|---|---|---|---|")
	for _, r := range rs {
		b := r.initialBound()
		var each []string
		writes := map[int]bool{}
		for _, x := range r.rounds {
			each = append(each, fmt.Sprintf("%.1f s %.2f×", x.change.Seconds(), x.ratio()))
			writes[x.changeWrites] = true
		}
		var ws []string
		for w := range writes {
			ws = append(ws, strconv.Itoa(w))
		}
		sort.Strings(ws)
		p("| %s | %s: %.2f× the bound %s (floor %s, LIST %s): %s | **%.2f×** (%s): %s | %s: %s | %s: %s | %s |",
			r.config.name, sec(r.initial), r.initial.Seconds()/b.Seconds(), sec(b), sec(r.fastest()), sec(r.list), verdict(r.initial <= b),
			r.medianRatio(), strings.Join(each, "; "), verdict(r.medianRatio() <= 1.3),
			strings.Join(ws, ", "), verdict(r.allWrites()), mib(r.hwmKiB), verdict(r.hwmKiB <= 150*1024),
			verdict(r.restOnlyLease))
	}
	head := []string{"measure"}
	sep := []string{"---"}
	for _, r := range rs {
		head, sep = append(head, "configuration "+r.config.name), append(sep, "---")
	}
	head, sep = append(head, "target"), append(sep, "---")
	p("")
	p("| %s |", strings.Join(head, " | "))
	p("|%s|", strings.Join(sep, "|"))
	row("configuration", "", func(r results) string { return r.config.describe(r.settle) })
	row("machine", "", func(r results) string {
		return fmt.Sprintf("%d cores (nproc), %s; load average %s at the start", runtime.NumCPU(), cpuModel(), r.load)
	})
	row("Go; control plane", "", func(r results) string {
		return fmt.Sprintf("%s; kube-apiserver %s, etcd --unsafe-no-fsync, audit log at Metadata", runtime.Version(), r.apiserver)
	})
	row("controller", "", func(r results) string {
		limit := "none"
		if r.memLimit != "" {
			limit = r.memLimit + " (the chart's goMemLimit)"
		}
		return fmt.Sprintf("--kube-api-qps %d, --kube-api-burst %d, --workers %d, --settle %s; GOMEMLIMIT %s", qps, burst, workers, r.settle, limit)
	})
	row("N", "", func(r results) string {
		return fmt.Sprintf("%d fleet Clusters (Fleet v0.9.9 CRD, 4 env entries, 3 tolerations, resources, affinity, 6 labels, status)", r.n)
	})
	row(fmt.Sprintf("create N clusters + status (%d workers)", workers), "", func(r results) string { return sec(r.create) })
	row("one paged LIST of the clusters (pages of 500, as the admin)", "", func(r results) string {
		return fmt.Sprintf("%s (%d pages)", sec(r.list), r.listPages)
	})
	row(fmt.Sprintf("raw-PATCH floors: N merge patches of spec.agentEnvVars, %d workers, QPS %d/burst %d, leasetune stopped; in order", workers, qps, burst), "", func(r results) string {
		var out []string
		for i, f := range r.floors {
			extra := ""
			if i == 0 {
				extra = fmt.Sprintf("; %d in the audit log", r.floorWrites)
			}
			out = append(out, fmt.Sprintf("%s: %s (%.0f/s%s; %s)", f.label, sec(f.took), float64(r.n)/f.took.Seconds(), extra, f.cp))
		}
		return strings.Join(out, "; ")
	})
	row("first start: process start → last cluster write", "≤ 1.5× the faster floor around it + one paged LIST", func(r results) string {
		b := r.initialBound()
		return fmt.Sprintf("%s (%d cluster writes; %s): %.2f× the bound %s: %s", sec(r.initial), r.initialClusterWrites, r.cpInitial,
			r.initial.Seconds()/b.Seconds(), sec(b), verdict(r.initial <= b))
	})
	for k := 0; k < rounds; k++ {
		row(fmt.Sprintf("global change, round %d: leasetune's first cluster write after the Setting patch → its last", k+1), "≤ 1.3× the faster floor around it (the verdict: the median round)", func(r results) string {
			if k >= len(r.rounds) {
				return ""
			}
			x := r.rounds[k]
			var around []string
			for _, f := range append(append([]floorRun{}, x.before...), x.after...) {
				around = append(around, fmt.Sprintf("%.2f× %s", x.change.Seconds()/f.took.Seconds(), f.label))
			}
			return fmt.Sprintf("retry period → %s: %s (%.0f/s; Setting patch → last write %s; %s; leasetune %.1f CPU s), **%.2f× the faster floor** (%s)",
				x.value, sec(x.change), float64(r.n)/x.change.Seconds(), sec(x.changeFromPatch), x.cpChange, x.cpuChange.Seconds(), x.ratio(), strings.Join(around, ", "))
		})
	}
	row("global change: the median round", "≤ 1.3×", func(r results) string {
		return fmt.Sprintf("**%.2f×**: %s", r.medianRatio(), verdict(r.medianRatio() <= 1.3))
	})
	row("writes of each global change (audit log: accepted PATCHes of clusters by leasetune); at each restart after the first", "exactly N, one per cluster; none at a restart", func(r results) string {
		var out []string
		for k, x := range r.rounds {
			restart := ""
			if k > 0 {
				restart = fmt.Sprintf(", %d at its restart", x.startWrites)
			}
			out = append(out, fmt.Sprintf("round %d: %d cluster writes, %d Event creates, %d other writes%s", k+1, x.changeWrites, x.changeEvents, x.changeOther, restart))
		}
		return strings.Join(out, "; ") + ": " + verdict(r.allWrites())
	})
	row("controller peak RSS (VmHWM, the largest of the rounds' processes)", "≤ 150 MiB at 10,000", func(r results) string {
		var after []string
		for _, x := range r.rounds {
			after = append(after, fmt.Sprintf("%s (RSS %s)", mib(x.hwmKiB), mib(x.rssAfterChange)))
		}
		return fmt.Sprintf("%s (RSS %s after the first start; each round's peak and RSS after its change: %s; gctrace: Go heap peak %d MB at %s after a start, live ≤ %d MB, %d GCs): %s",
			mib(r.hwmKiB), mib(r.rssAfterInitial), strings.Join(after, ", "), r.heapPeakMB, r.heapPeakAt, r.heapLiveMB, r.gcs, verdict(r.hwmKiB <= 150*1024))
	})
	row("controller CPU seconds (utime+stime)", "", func(r results) string {
		var ch []string
		for _, x := range r.rounds {
			ch = append(ch, fmt.Sprintf("%.1f", x.cpuChange.Seconds()))
		}
		return fmt.Sprintf("%.1f start + first start, %.1f at rest, %s in each global change", r.cpuInitial.Seconds(), r.cpuRest.Seconds(), strings.Join(ch, " / "))
	})
	row("leasetune requests at rest (audit log), per hour", "its Lease only", func(r results) string {
		return fmt.Sprintf("%s over %s: %s", strings.Join(r.restTally, "; "), r.rest, verdict(r.restOnlyLease))
	})
	for _, r := range rs {
		p("")
		p("Configuration %s: leasetune's writes from its start to the first start's end: %s", r.config.name, strings.Join(r.initialTally, "; "))
		for k, x := range r.rounds {
			p("")
			p("Configuration %s, round %d: leasetune's requests from the Setting patch to 5 s after its last write: %s", r.config.name, k+1, strings.Join(x.changeTally, "; "))
		}
	}
}

// cpDelta says the CPU seconds kube-apiserver and etcd spent between two samples.
func cpDelta(a, b map[string]time.Duration) string {
	return fmt.Sprintf("kube-apiserver %.1f CPU s, etcd %.1f CPU s", (b["kube-apiserver"] - a["kube-apiserver"]).Seconds(), (b["etcd"] - a["etcd"]).Seconds())
}

// buildProfiled builds cmd/leasetune with hack/bench/pprof_overlay.go.in
// added (go build -overlay), into dir.
func buildProfiled(ctx context.Context, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	src, err := filepath.Abs("hack/bench/pprof_overlay.go.in")
	if err != nil {
		return "", err
	}
	target, err := filepath.Abs("cmd/leasetune/zz_bench_pprof.go")
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(dir, "overlay.json")
	b, _ := json.Marshal(map[string]interface{}{"Replace": map[string]string{target: src}})
	if err := os.WriteFile(overlay, b, 0o644); err != nil {
		return "", err
	}
	out, err := filepath.Abs(filepath.Join(dir, "leasetune-pprof"))
	if err != nil {
		return "", err
	}
	logf("building %s with net/http/pprof (overlay)", out)
	cmd := exec.CommandContext(ctx, "go", "build", "-overlay", overlay, "-o", out, "./cmd/leasetune")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return out, cmd.Run()
}

// apiProfSecs is how long each kube-apiserver CPU profile lasts, from
// the start of the floor and of the global change (both take longer).
const apiProfSecs = 30

// fetchAPIServerProfile saves the kube-apiserver's CPU profile of the next
// secs seconds (its /debug/pprof, as the admin user) to path.
func fetchAPIServerProfile(ctx context.Context, cfg *rest.Config, secs int, path string) {
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		logf("apiserver profile: %v", err)
		return
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(cfg.Host, "/"), secs), nil)
	resp, err := c.Do(req)
	if err != nil {
		logf("apiserver profile: %v", err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		logf("apiserver profile: %s", resp.Status)
		return
	}
	f, err := os.Create(path)
	if err != nil {
		logf("apiserver profile: %v", err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		logf("apiserver profile: %v", err)
		return
	}
	logf("profile %s written", path)
}

// fetchProfile saves /debug/pprof/<what> of addr to path, retrying for
// 10s while the server is not up yet.
func fetchProfile(addr, what, path string) {
	c := http.Client{Timeout: 10 * time.Minute}
	for i := 0; i < 100; i++ {
		resp, err := c.Get("http://" + addr + "/debug/pprof/" + what)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			logf("profile: %v", err)
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
		logf("profile %s written", path)
		return
	}
	logf("profile %s: pprof server not reachable", what)
}
