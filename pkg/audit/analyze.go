package audit

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"sort"
	"time"
)

// Limits that keep memory bounded whatever the size of the logs.
const (
	// MaxLineBytes is the longest line read as an event; a longer one is
	// skipped (without holding it) and counted as bad.
	MaxLineBytes = 64 << 20
	// maxURIs is the number of distinct request URIs counted exactly;
	// beyond it the top list is approximate (Space-Saving).
	maxURIs = 1 << 17
	// maxPending is the number of requests remembered at a stage before
	// ResponseComplete (RequestReceived, ResponseStarted): a long watch
	// whose completion comes more than maxPending events later is counted
	// at its last stage seen then.
	maxPending = 1 << 12
	// maxCounted is the number of requests remembered as counted at an
	// earlier stage (on eviction from the ring of maxPending), so that
	// their final stage, when it comes, is not counted again.
	maxCounted = 1 << 16
	// maxObjects is the number of ConfigMaps and Endpoints tracked as
	// possible locks (Leases and annotated objects are always tracked).
	maxObjects = 1 << 16
	// maxCandidates is the number of clients tracked per lock; further
	// ones are counted together.
	maxCandidates = 256
	// maxBadSamples is the number of bad lines reported with their line
	// numbers.
	maxBadSamples = 5
)

// Analyzer reads audit logs and accumulates what Report returns. It is
// not safe for concurrent use; read files one after the other (rotated
// logs in any order: intervals are never taken across two files).
type Analyzer struct {
	files    []string
	file     int
	lines    int
	events   int
	requests int
	from, to int64
	noTime   int
	bad      int
	badLines []BadLine
	top      *topCounter
	objects  map[string]*lockObject
	untraced int
	others   int // ConfigMaps and Endpoints tracked

	// pending are the requests seen at a stage before the final one, by
	// the hash of their auditID, as indexes into slots, a ring whose
	// oldest entry is counted at its stage then when a new one needs its
	// place. counted remembers the last maxPending requests counted so,
	// so that a final stage coming later is not counted again.
	seed        maphash.Seed
	pending     map[uint64]int
	slots       []slot
	next        int
	counted     map[uint64]struct{}
	countedRing []uint64
	countedNext int

	key           []byte
	arena, arena2 []byte
}

// slot is one request at a stage before the final one: its line, kept
// to be read in full if the final stage never comes.
type slot struct {
	hash uint64
	live bool
	file int // index into files, from 1
	line int
	raw  []byte
}

// NewAnalyzer returns an empty Analyzer.
func NewAnalyzer() *Analyzer {
	return &Analyzer{
		top:         newTopCounter(maxURIs),
		objects:     map[string]*lockObject{},
		seed:        maphash.MakeSeed(),
		pending:     map[uint64]int{},
		slots:       make([]slot, maxPending),
		counted:     map[uint64]struct{}{},
		countedRing: make([]uint64, maxCounted),
	}
}

// Read reads one log, plain or gzip (detected by its first bytes, so a
// rotated "audit.log.1" that is compressed is read too). name is used in
// messages. A line that is not an audit event is counted, never fatal;
// a read error or a truncated gzip stream is returned, naming the file.
func (a *Analyzer) Read(name string, r io.Reader) error {
	a.files = append(a.files, name)
	a.file = len(a.files)
	br := bufio.NewReaderSize(r, 1<<20)
	if head, _ := br.Peek(2); len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer func() { _ = zr.Close() }() // a reader: nothing to flush
		br = bufio.NewReaderSize(zr, 1<<20)
	}
	lineNo := 0
	var long []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if !tooLong {
				if len(long)+len(chunk) > MaxLineBytes {
					tooLong, long = true, nil
				} else {
					long = append(long, chunk...)
				}
			}
			continue
		}
		if len(chunk) > 0 || long != nil || tooLong {
			lineNo++
			line := chunk
			if long != nil {
				line = append(long, chunk...)
			}
			if tooLong {
				a.lines++
				a.badLine(name, lineNo, fmt.Errorf("line longer than %d MiB", MaxLineBytes>>20))
			} else {
				a.line(name, lineNo, line)
			}
			long, tooLong = nil, false
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("%s: truncated gzip stream after line %d: %w", name, lineNo, err)
			}
			return fmt.Errorf("%s: after line %d: %w", name, lineNo, err)
		}
	}
}

func (a *Analyzer) badLine(name string, n int, err error) {
	a.bad++
	if len(a.badLines) < maxBadSamples {
		a.badLines = append(a.badLines, BadLine{File: name, Line: n, Error: err.Error()})
	}
}

func (a *Analyzer) line(name string, n int, line []byte) {
	line = bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	a.lines++
	if cap(a.arena) < len(line) {
		a.arena = make([]byte, 0, len(line)+len(line)/2)
	}
	var ev event
	err := parseLine(line, &ev, a.arena, false)
	if errors.Is(err, errEarly) || (err == nil && !finalStage(ev.stage)) {
		a.events++
		a.remember(maphash.Bytes(a.seed, ev.auditID), n, line)
		return
	}
	if err != nil {
		a.badLine(name, n, err)
		return
	}
	a.events++
	h := maphash.Bytes(a.seed, ev.auditID)
	if i, ok := a.pending[h]; ok {
		a.slots[i].live = false
		delete(a.pending, h)
	}
	if _, ok := a.counted[h]; ok {
		delete(a.counted, h)
		return
	}
	a.request(&ev, a.file)
}

// remember keeps the line of a request at a stage before the final one
// (the latest stage seen).
func (a *Analyzer) remember(h uint64, n int, line []byte) {
	i, ok := a.pending[h]
	if !ok {
		i = a.next
		a.next = (a.next + 1) % len(a.slots)
		if a.slots[i].live {
			a.evict(&a.slots[i])
			a.markCounted(a.slots[i].hash)
		}
		a.pending[h] = i
	}
	s := &a.slots[i]
	s.hash, s.live, s.file, s.line = h, true, a.file, n
	s.raw = append(s.raw[:0], line...)
}

// evict counts a remembered request at the stage it was seen at.
func (a *Analyzer) evict(s *slot) {
	s.live = false
	delete(a.pending, s.hash)
	if cap(a.arena2) < len(s.raw) {
		a.arena2 = make([]byte, 0, len(s.raw))
	}
	var ev event
	if err := parseLine(s.raw, &ev, a.arena2, true); err != nil {
		a.events--
		a.badLine(a.files[s.file-1], s.line, err)
		return
	}
	a.request(&ev, s.file)
}

func (a *Analyzer) markCounted(h uint64) {
	if old := a.countedRing[a.countedNext]; old != 0 {
		delete(a.counted, old)
	}
	a.countedRing[a.countedNext] = h
	a.countedNext = (a.countedNext + 1) % len(a.countedRing)
	a.counted[h] = struct{}{}
}

// finish counts the requests whose final stage never came, in the order
// they came, so intervals stay in time order.
func (a *Analyzer) finish() {
	for k := 0; k < len(a.slots) && len(a.pending) > 0; k++ {
		if s := &a.slots[(a.next+k)%len(a.slots)]; s.live {
			a.evict(s)
		}
	}
}

// request counts one request.
func (a *Analyzer) request(ev *event, file int) {
	a.requests++
	ts, ok := ev.timestamp()
	if at, logged := ev.loggedAt(); logged {
		if a.from == 0 || at < a.from {
			a.from = at
		}
		if at > a.to {
			a.to = at
		}
	}
	if !ok {
		a.noTime++
	}
	a.top.add(ev.requestURI)
	if !ev.hasObjectRef || len(ev.name) == 0 || len(ev.subresource) > 0 {
		return
	}
	kind := lockKind(ev)
	if kind == "" {
		return
	}
	a.key = append(append(append(append(append(a.key[:0], kind...), 0), ev.namespace...), 0), ev.name...)
	obj := a.objects[string(a.key)]
	if obj == nil {
		annotated := kind != "leases" && ev.leaderAnnotated()
		if kind != "leases" && !annotated {
			if a.others >= maxObjects {
				a.untraced++
				return
			}
			a.others++
		}
		obj = &lockObject{resource: kind, namespace: string(ev.namespace), name: string(ev.name), candidates: map[string]*candidate{}}
		a.objects[string(a.key)] = obj
	}
	obj.requests++
	if kind != "leases" && !obj.annotated && (len(ev.responseObject) > 0 || len(ev.requestObject) > 0) {
		obj.objectsSeen = true
		obj.annotated = ev.leaderAnnotated()
	}
	a.key = append(append(append(append(append(a.key[:0], ev.username...), 0), ev.userAgent...), 0), ev.sourceIP...)
	c := obj.candidates[string(a.key)]
	if c == nil {
		if len(obj.candidates) >= maxCandidates {
			a.key = append(a.key[:0], "\x00others\x00"...)
			c = obj.candidates[string(a.key)]
		}
		if c == nil {
			c = &candidate{User: string(ev.username), UserAgent: string(ev.userAgent), SourceIP: string(ev.sourceIP)}
			obj.candidates[string(a.key)] = c
		}
	}
	c.requests++
	switch string(ev.verb) {
	case "get":
		c.reads++
		if ok && c.lastRead != 0 && c.file == file && ts > c.lastRead {
			c.readIntervals.add(ts - c.lastRead)
		}
		if ok {
			c.lastRead = ts
		}
	case "update", "patch", "create":
		c.writes++
		if ok && c.lastWrite != 0 && c.file == file && ts > c.lastWrite {
			c.writeIntervals.add(ts - c.lastWrite)
		}
		if ok {
			c.lastWrite = ts
		}
	}
	c.file = file
}

// lockKind returns "leases", "configmaps" or "endpoints" for an object
// that may be a lock, else "".
func lockKind(ev *event) string {
	switch string(ev.resource) {
	case "leases":
		if string(ev.apiGroup) == "coordination.k8s.io" && string(ev.namespace) != "kube-node-lease" {
			return "leases"
		}
	case "configmaps":
		if len(ev.apiGroup) == 0 {
			return "configmaps"
		}
	case "endpoints":
		if len(ev.apiGroup) == 0 {
			return "endpoints"
		}
	}
	return ""
}

type lockObject struct {
	resource, namespace, name string
	requests                  int
	annotated                 bool // the leader annotation was seen
	objectsSeen               bool // request or response objects were logged
	candidates                map[string]*candidate
}

type candidate struct {
	User, UserAgent, SourceIP     string
	requests, reads, writes       int
	lastRead, lastWrite           int64
	file                          int
	readIntervals, writeIntervals sampler
}

// Report returns what the logs read so far show. The requests whose final
// stage never came are counted at their last stage seen.
func (a *Analyzer) Report(top int) *Report {
	a.finish()
	r := &Report{
		Files: append([]string{}, a.files...), Lines: a.lines, Events: a.events, Requests: a.requests,
		BadLines: a.bad, BadLineSamples: append([]BadLine{}, a.badLines...), NoTimestamp: a.noTime,
		Top: a.top.top(top), TopApproximate: a.top.approx, UntrackedObjects: a.untraced,
	}
	if r.BadLineSamples == nil {
		r.BadLineSamples = []BadLine{}
	}
	if a.requests > 0 && a.from != 0 {
		r.From, r.To = time.Unix(0, a.from).UTC(), time.Unix(0, a.to).UTC()
	}
	hours := r.To.Sub(r.From).Hours()
	r.SpanSeconds = r.To.Sub(r.From).Seconds()
	r.Locks = []Lock{}
	for _, o := range a.objects {
		l, ok := o.lock()
		if !ok {
			continue
		}
		if hours > 0 {
			l.PerHour = float64(l.Requests) / hours
		}
		if a.requests > 0 {
			l.Share = float64(l.Requests) / float64(a.requests)
		}
		l.Managed = ManagedComponent(l.Resource, l.Namespace, l.Name)
		r.LockRequests += l.Requests
		r.Locks = append(r.Locks, l)
	}
	sort.Slice(r.Locks, func(i, j int) bool {
		x, y := r.Locks[i], r.Locks[j]
		if x.Requests != y.Requests {
			return x.Requests > y.Requests
		}
		return x.Resource+"/"+x.Namespace+"/"+x.Name < y.Resource+"/"+y.Namespace+"/"+y.Name
	})
	if a.requests > 0 {
		r.LockShare = float64(r.LockRequests) / float64(a.requests)
	}
	return r
}

// Inference thresholds for ConfigMaps and Endpoints at Metadata level.
const (
	// InferMinWrites is the least number of writes by one client.
	InferMinWrites = 10
	// InferMaxSpread is the largest interquartile range of its write
	// intervals, relative to their median: a leader renews every
	// retryPeriod, so its writes are evenly spaced.
	InferMaxSpread = 0.25
	// InferMinReadsPerWrite is the least number of reads per write by the
	// same client: client-go's ConfigMap and Endpoints locks read the
	// object before every update.
	InferMinReadsPerWrite = 0.5
)

// lock decides whether o is a lock and describes it.
func (o *lockObject) lock() (Lock, bool) {
	cands := make([]*candidate, 0, len(o.candidates))
	for _, c := range o.candidates {
		cands = append(cands, c)
	}
	sort.Slice(cands, func(i, j int) bool {
		x, y := cands[i], cands[j]
		if x.writes != y.writes {
			return x.writes > y.writes
		}
		if x.requests != y.requests {
			return x.requests > y.requests
		}
		return x.User+x.UserAgent+x.SourceIP < y.User+y.UserAgent+y.SourceIP
	})
	l := Lock{Resource: o.resource, Namespace: o.namespace, Name: o.name, Requests: o.requests,
		Holders: []Holder{}, Readers: []Holder{}}
	switch {
	case o.resource == "leases":
		l.Evidence = EvidenceLease
	case o.annotated:
		l.Evidence = EvidenceAnnotation
	case o.objectsSeen:
		// The objects were logged and none carried the annotation.
		return Lock{}, false
	default:
		if len(cands) == 0 || !steadyWriter(cands[0]) {
			return Lock{}, false
		}
		l.Evidence, l.Inferred = EvidenceCadence, true
	}
	for _, c := range cands {
		h := Holder{User: c.User, UserAgent: c.UserAgent, SourceIP: c.SourceIP, Requests: c.requests, Reads: c.reads, Writes: c.writes}
		if q := c.writeIntervals.quantiles(0.5); q != nil && c.writeIntervals.n >= 2 {
			h.WriteIntervalSeconds = round2(time.Duration(q[0]).Seconds())
		}
		if c.writes > 0 {
			l.Holders = append(l.Holders, h)
		} else {
			l.Readers = append(l.Readers, h)
		}
	}
	// The retry period: the holder's median interval between writes (it
	// renews once per retry period), else the readers' median interval
	// between reads divided by 1.6 (a follower waits 1× to 2.2× the retry
	// period, uniformly: median 1.6×).
	var retry time.Duration
	if len(cands) > 0 && cands[0].writes > 0 && cands[0].writeIntervals.n >= 3 {
		retry = time.Duration(cands[0].writeIntervals.quantiles(0.5)[0])
		l.RetryFrom = "holder writes"
	} else {
		var s sampler
		for _, c := range cands {
			if c.writes == 0 {
				for _, v := range c.readIntervals.vals {
					s.add(v)
				}
			}
		}
		if s.n >= 3 {
			retry = time.Duration(float64(s.quantiles(0.5)[0]) / 1.6)
			l.RetryFrom = "reader reads / 1.6"
		}
	}
	l.RetryPeriod = retry.Round(100 * time.Millisecond)
	l.RetryPeriodSeconds = round2(l.RetryPeriod.Seconds())
	if len(cands) > 0 && cands[0].writes > 0 {
		l.LeaderReadsPerWrite = round2(float64(cands[0].reads) / float64(cands[0].writes))
	}
	return l, true
}

// steadyWriter reports whether c reads and writes an object the way a
// leader renews a lock: at least InferMinWrites writes, evenly spaced
// (InferMaxSpread), with a read before most of them
// (InferMinReadsPerWrite).
func steadyWriter(c *candidate) bool {
	if c.writes < InferMinWrites || float64(c.reads) < InferMinReadsPerWrite*float64(c.writes) {
		return false
	}
	q := c.writeIntervals.quantiles(0.25, 0.5, 0.75)
	if q == nil || q[1] <= 0 {
		return false
	}
	return float64(q[2]-q[0]) <= InferMaxSpread*float64(q[1])
}

func round2(f float64) float64 {
	return float64(int64(f*100+0.5)) / 100
}
