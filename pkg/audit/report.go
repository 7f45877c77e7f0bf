package audit

import (
	"time"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/locks"
	"leasetune.io/leasetune/pkg/settings"
)

// Report is what Analyzer found. Its JSON form is what `leasetune audit
// --output json` prints.
type Report struct {
	// Files are the logs read, in order.
	Files []string `json:"files"`
	// Lines are the non-empty lines read; Events those that are audit
	// events (of any stage); Requests the requests counted (one per
	// auditID: its ResponseComplete or Panic event, else its last stage).
	Lines    int `json:"lines"`
	Events   int `json:"events"`
	Requests int `json:"requests"`
	// From and To are when the first and the last request were logged
	// (stageTimestamp: a long watch that ends in the log began before it,
	// and its requestReceivedTimestamp is not the log's); SpanSeconds the
	// time between, over which the per-hour figures are counted.
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	SpanSeconds float64   `json:"spanSeconds"`
	// BadLines counts the lines that are not audit events;
	// BadLineSamples are the first few, with their line numbers.
	BadLines       int       `json:"badLines"`
	BadLineSamples []BadLine `json:"badLineSamples"`
	// NoTimestamp counts requests without a readable timestamp.
	NoTimestamp int `json:"noTimestamp,omitempty"`
	// Top are the most requested URIs, most first, with the query string
	// as logged. TopApproximate is true when the logs had too many
	// distinct URIs to count them all exactly (each count is then at most
	// its MaxOvercount too high).
	Top            []URICount `json:"top"`
	TopApproximate bool       `json:"topApproximate,omitempty"`
	// Locks are the leader-election locks found, most requested first.
	Locks []Lock `json:"locks"`
	// LockRequests are the requests to all locks; LockShare their share
	// of all requests.
	LockRequests int     `json:"lockRequests"`
	LockShare    float64 `json:"lockShare"`
	// UntrackedObjects counts ConfigMaps and Endpoints not examined as
	// possible locks because too many were seen.
	UntrackedObjects int `json:"untrackedObjects,omitempty"`
	// Managed is the projection of the locks leasetune manages; set by
	// Project.
	Managed *Projection `json:"managed,omitempty"`
	// LeftAlone are the locks of components leasetune's settings do not
	// govern that pkg/locks knows (rancher-turtles, Cluster API,
	// cluster-autoscaler ...), with their defaults and how to change them.
	LeftAlone []LeftAloneLock `json:"leftAlone,omitempty"`
}

// BadLine is a line that is not an audit event.
type BadLine struct {
	File  string `json:"file"`
	Line  int    `json:"line"`
	Error string `json:"error"`
}

// URICount is one request URI and its number of requests.
type URICount struct {
	RequestURI   string `json:"requestURI"`
	Count        int    `json:"count"`
	MaxOvercount int    `json:"maxOvercount,omitempty"`
}

// Evidence says why an object counts as a lock.
type Evidence string

const (
	// EvidenceLease: a coordination.k8s.io Lease.
	EvidenceLease Evidence = "lease"
	// EvidenceAnnotation: its request or response object carries
	// LeaderAnnotation.
	EvidenceAnnotation Evidence = "annotation"
	// EvidenceCadence: inferred at Metadata level from one client's steady
	// reads and writes (see InferMinWrites, InferMaxSpread,
	// InferMinReadsPerWrite).
	EvidenceCadence Evidence = "cadence"
)

// Lock is one leader-election lock found in the logs.
type Lock struct {
	Resource  string `json:"resource"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Requests, PerHour and Share are its requests, per hour over the
	// logs' span, and as a share (0..1) of all requests.
	Requests int     `json:"requests"`
	PerHour  float64 `json:"perHour"`
	Share    float64 `json:"share"`
	// Holders are the clients that wrote the lock (held it), most writes
	// first; Readers those that only read it (followers).
	Holders []Holder `json:"holders"`
	Readers []Holder `json:"readers"`
	// Evidence and Inferred say why it is a lock.
	Evidence Evidence `json:"evidence"`
	Inferred bool     `json:"inferred"`
	// RetryPeriod is the retry period the cadence implies (0: too few
	// requests); RetryFrom says from what.
	RetryPeriod        time.Duration `json:"-"`
	RetryPeriodSeconds float64       `json:"retryPeriodSeconds"`
	RetryFrom          string        `json:"retryFrom,omitempty"`
	// LeaderReadsPerWrite is the first holder's reads per write: about 1
	// for client-go before v0.30 (it gets, then updates), about 0 after.
	LeaderReadsPerWrite float64 `json:"leaderReadsPerWrite"`
	// Managed is the component whose settings govern the lock, or "".
	Managed settings.Component `json:"managed,omitempty"`
	// Component is the component that holds it, when pkg/locks knows
	// the lock (governed or not), else "".
	Component string `json:"component,omitempty"`
}

// Holder is one client of a lock: user, user agent and source IP (the
// replicas of one Deployment share the first two).
type Holder struct {
	User      string `json:"user"`
	UserAgent string `json:"userAgent"`
	SourceIP  string `json:"sourceIP"`
	Requests  int    `json:"requests"`
	Reads     int    `json:"reads"`
	Writes    int    `json:"writes"`
	// WriteIntervalSeconds is the median time between its writes.
	WriteIntervalSeconds float64 `json:"writeIntervalSeconds,omitempty"`
}

// Behaviour returns the client-go behaviour the lock's leader shows: it
// reads before it writes (LeaderGetsAndUpdates) unless it reads less than
// once every two writes.
func (l Lock) Behaviour() election.ClientGoBehaviour {
	if len(l.Holders) > 0 && l.LeaderReadsPerWrite < 0.5 {
		return election.LeaderOnlyUpdates
	}
	return election.LeaderGetsAndUpdates
}

// Followers estimates how many candidates besides the leader the lock had
// on average: the readers' reads per hour over what one follower reads
// per hour at the implied retry period (1h / (1.6 × retryPeriod)); without
// a retry period, the number of readers.
func (l Lock) Followers() int {
	reads := 0
	for _, r := range l.Readers {
		reads += r.Reads
	}
	if l.RetryPeriod <= 0 || l.PerHour <= 0 || l.Requests == 0 {
		return len(l.Readers)
	}
	readsPerHour := float64(reads) * l.PerHour / float64(l.Requests)
	perFollower := float64(time.Hour) / (election.MeanFollowerWaitFactor * float64(l.RetryPeriod))
	return int(readsPerHour/perFollower + 0.5)
}

// RancherLockName is the Rancher server's lock, in kube-system.
var RancherLockName = "cattle-controllers"

// ManagedComponent returns the component whose settings govern the lock
// resource namespace/name, or "" when leasetune does not manage it: the
// catalogue's Governed (pkg/locks, where each lock's source is cited).
// Only Leases match; a ConfigMap of one of these names is wrangler v1's
// ConfigMapsLeases multilock (v1.1.1 pkg/leader/leader.go line 34), that
// is Fleet v0.9.0, which reads no election env (docs/design.md, "How the timings reach each process"):
// shown as a lock and not projected. In a downstream cluster's log the
// Lease kube-system/cattle-controllers is cattle-cluster-agent's, which
// reads the env of the cluster's agentEnvVars (see docs/rancher.md).
func ManagedComponent(resource, namespace, name string) settings.Component {
	l, _ := locks.Lookup(resource, namespace, name)
	return l.Governed
}

// LeftAloneLock is a lock of a component leasetune's settings do not
// govern (pkg/locks), as the log shows it.
type LeftAloneLock struct {
	Namespace string  `json:"namespace"`
	Name      string  `json:"name"`
	Component string  `json:"component"`
	PerHour   float64 `json:"perHour"`
	Share     float64 `json:"share"`
	// Defaults is the triple the component runs unless someone changed
	// it, Change how to change it.
	Defaults string `json:"defaults"`
	Change   string `json:"change"`
}

// leftAlone returns the locks among ls that the catalogue knows and
// leasetune's settings do not govern, in ls's order.
func leftAlone(ls []Lock) []LeftAloneLock {
	var out []LeftAloneLock
	for _, l := range ls {
		k, ok := locks.Lookup(l.Resource, l.Namespace, l.Name)
		if !ok || k.Governed != "" {
			continue
		}
		out = append(out, LeftAloneLock{Namespace: l.Namespace, Name: l.Name, Component: k.Component, PerHour: l.PerHour, Share: l.Share,
			Defaults: k.Defaults.String(), Change: k.Change})
	}
	return out
}

// Projection is what the managed locks cost now and would cost with the
// given triples.
type Projection struct {
	// Triples are the triples projected, per component, and Source says
	// where they come from ("defaults", "flags", "settings").
	Triples map[settings.Component]string `json:"triples"`
	Source  string                        `json:"source"`
	// Locks are the managed locks.
	Locks []ProjectedLock `json:"locks"`
	// PerHour and Share are the managed locks' requests per hour and share
	// of all requests now; Projected* the same with the triples (the share
	// of a total in which only these locks changed).
	PerHour          float64 `json:"perHour"`
	Share            float64 `json:"share"`
	ProjectedPerHour float64 `json:"projectedPerHour"`
	ProjectedShare   float64 `json:"projectedShare"`
}

// ProjectedLock is one managed lock now and with its component's triple.
type ProjectedLock struct {
	Namespace string             `json:"namespace"`
	Name      string             `json:"name"`
	Component settings.Component `json:"component"`
	PerHour   float64            `json:"perHour"`
	Share     float64            `json:"share"`
	// Followers and Behaviour are what the model is given, from the log.
	Followers        int     `json:"followers"`
	Behaviour        string  `json:"clientGo"`
	ProjectedPerHour float64 `json:"projectedPerHour"`
	ProjectedShare   float64 `json:"projectedShare"`
}

// Project computes r.Managed for the triples (one per component; each
// must be valid) with pkg/election's cost model: a managed lock with its
// observed followers and client-go behaviour would make
// election.CostOf(triple, followers, behaviour) requests an hour. The
// projected shares are of a total in which the other requests stay as
// they were.
func (r *Report) Project(triples map[settings.Component]election.Timings, source string) *Projection {
	p := &Projection{Triples: map[settings.Component]string{}, Source: source, Locks: []ProjectedLock{}}
	for c, t := range triples {
		p.Triples[c] = t.String()
	}
	hours := r.SpanSeconds / 3600
	for _, l := range r.Locks {
		t, ok := triples[l.Managed]
		if l.Managed == "" || !ok {
			continue
		}
		pl := ProjectedLock{Namespace: l.Namespace, Name: l.Name, Component: l.Managed, PerHour: l.PerHour, Share: l.Share,
			Followers: l.Followers(), Behaviour: l.Behaviour().String()}
		pl.ProjectedPerHour = election.CostOf(t, pl.Followers, l.Behaviour()).TotalRequestsPerHour()
		p.PerHour += pl.PerHour
		p.ProjectedPerHour += pl.ProjectedPerHour
		p.Locks = append(p.Locks, pl)
	}
	if r.Requests > 0 && hours > 0 {
		now := float64(r.Requests) / hours
		after := now - p.PerHour + p.ProjectedPerHour
		p.Share = p.PerHour / now
		if after > 0 {
			p.ProjectedShare = p.ProjectedPerHour / after
			for i := range p.Locks {
				p.Locks[i].ProjectedShare = p.Locks[i].ProjectedPerHour / after
			}
		}
	}
	r.Managed = p
	return p
}
