package audit

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"runtime"
	"sort"
	"time"

	"leasetune.io/leasetune/pkg/locks"
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
// logs in any order: intervals are never taken across two files). Read
// itself uses every CPU GOMAXPROCS allows (see readBlocks).
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

	// workers is the number of goroutines that parse lines: 0 for
	// GOMAXPROCS, 1 for the sequential reader (tests set it).
	workers int

	key      []byte
	sc, evSc scanner // the sequential reader's, and evict's
	rec      rec
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

// maxLineBytes is MaxLineBytes; tests make it smaller.
var maxLineBytes = MaxLineBytes

// errTooLong is the error of a line longer than maxLineBytes.
func errTooLong() error { return fmt.Errorf("line longer than %d MiB", maxLineBytes>>20) }

// Read reads one log, plain or gzip (detected by its first bytes, so a
// rotated "audit.log.1" that is compressed is read too). name is used in
// messages. A line that is not an audit event is counted, never fatal;
// a read error or a truncated gzip stream is returned, naming the file.
// With more than one CPU (GOMAXPROCS) the lines are parsed in parallel
// and counted in their order (readBlocks); the report is the same.
func (a *Analyzer) Read(name string, r io.Reader) error {
	a.files = append(a.files, name)
	a.file = len(a.files)
	// A small buffer for the peek: the parallel reader's reads of whole
	// blocks then bypass it (bufio reads a large p directly).
	br := bufio.NewReaderSize(r, 64<<10)
	var src io.Reader = br
	if head, _ := br.Peek(2); len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer func() { _ = zr.Close() }() // a reader: nothing to flush
		src = zr
	}
	workers := a.workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if workers > 1 {
		return a.readBlocks(name, src, workers)
	}
	br = bufio.NewReaderSize(src, 1<<20)
	lineNo := 0
	var long []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if !tooLong {
				if len(long)+len(chunk) > maxLineBytes {
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
			if tooLong || len(line)-btoi(bytes.HasSuffix(line, []byte("\n"))) > maxLineBytes {
				a.lines++
				a.badLine(name, lineNo, errTooLong())
			} else {
				a.line(name, lineNo, line)
			}
			long, tooLong = nil, false
		}
		if err != nil {
			return readError(name, lineNo, err)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// readError is Read's error for err after line n of name: nil at the
// end of the log.
func readError(name string, n int, err error) error {
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s: truncated gzip stream after line %d: %w", name, n, err)
	}
	return fmt.Errorf("%s: after line %d: %w", name, n, err)
}

func (a *Analyzer) badLine(name string, n int, err error) {
	a.bad++
	if len(a.badLines) < maxBadSamples {
		a.badLines = append(a.badLines, BadLine{File: name, Line: n, Error: err.Error()})
	}
}

// trimEOL trims the newlines and carriage returns at the end of line
// (bytes.TrimRight(line, "\r\n") without building its set each time).
func trimEOL(line []byte) []byte {
	for n := len(line); n > 0 && (line[n-1] == '\n' || line[n-1] == '\r'); n-- {
		line = line[:n-1]
	}
	return line
}

// blank reports whether a line (its newline and carriage returns
// trimmed) has nothing to read.
func blank(line []byte) bool { return len(bytes.TrimSpace(line)) == 0 }

// line reads and counts line n (the sequential reader).
func (a *Analyzer) line(name string, n int, line []byte) {
	line = trimEOL(line)
	if blank(line) {
		return
	}
	a.sc.arena = a.sc.arena[:0]
	a.sc.parseRec(a.seed, line, &a.rec)
	a.apply(name, n, &a.rec)
}

// rec is one line that is not blank, parsed (on any goroutine) ahead of
// apply, which counts it in the log's order.
type rec struct {
	n     int   // the line number (from the start of its block in readBlocks)
	err   error // not an audit event
	early bool  // a stage before the final one: raw is the line
	hash  uint64
	raw   []byte
	req   req
}

// req is what request counts of one request. Its byte slices point into
// the line (or a scanner's arena) and are valid while the line is.
type req struct {
	uri, user, ua, ip, ns, name []byte
	reqObject, respObject       []byte
	ts, at                      int64
	tsOK, atOK                  bool
	kind                        string // lockKind's
	verb                        verbClass
}

type verbClass uint8

const (
	verbOther verbClass = iota
	verbRead
	verbWrite
)

func verbClassOf(verb []byte) verbClass {
	switch string(verb) {
	case "get":
		return verbRead
	case "update", "patch", "create":
		return verbWrite
	}
	return verbOther
}

// parseRec reads line into rc: early (a stage before the final one,
// read only as far as its auditID and stage), a request, or an error.
// seed hashes the auditID.
func (s *scanner) parseRec(seed maphash.Seed, line []byte, rc *rec) {
	var ev event
	err := s.parse(line, &ev, false)
	s.setRec(seed, line, &ev, err, rc)
}

// setRec sets rc from the event line was read into and the error of
// reading it (errEarly for a line read only as far as its stage).
func (s *scanner) setRec(seed maphash.Seed, line []byte, ev *event, err error, rc *rec) {
	*rc = rec{n: rc.n}
	switch {
	case errors.Is(err, errEarly) || (err == nil && !finalStage(ev.stage)):
		rc.early, rc.hash, rc.raw = true, maphash.Bytes(seed, ev.auditID), line
	case err != nil:
		rc.err = err
	default:
		rc.hash = maphash.Bytes(seed, ev.auditID)
		s.setReq(&rc.req, ev)
	}
}

// setReq fills q from ev.
func (s *scanner) setReq(q *req, ev *event) {
	*q = req{uri: ev.requestURI, user: ev.username, ua: ev.userAgent, ip: ev.sourceIP, ns: ev.namespace, name: ev.name,
		reqObject: ev.requestObject, respObject: ev.responseObject, verb: verbClassOf(ev.verb)}
	// ts is when the request arrived (requestReceivedTimestamp, which is
	// what a client's cadence shows), else stageTimestamp; at is when the
	// event was written (stageTimestamp), else requestReceivedTimestamp:
	// a log covers the time its events were written in (a watch received
	// half an hour before a rotated file begins completes inside it with
	// its old requestReceivedTimestamp; kube-apiserver ends watches after
	// --min-request-timeout, 1800s by default, to twice that).
	received, rok := s.times.parse(ev.received)
	stageAt, sok := s.times.parse(ev.stageAt)
	q.ts, q.tsOK, q.at, q.atOK = received, rok, stageAt, sok
	if !rok {
		q.ts, q.tsOK = stageAt, sok
	}
	if !sok {
		q.at, q.atOK = received, rok
	}
	if ev.hasObjectRef && len(ev.name) > 0 && len(ev.subresource) == 0 {
		q.kind = lockKind(ev)
	}
}

// apply counts line n, parsed into rc.
func (a *Analyzer) apply(name string, n int, rc *rec) {
	a.lines++
	if rc.err != nil {
		a.badLine(name, n, rc.err)
		return
	}
	a.events++
	if rc.early {
		a.remember(rc.hash, n, rc.raw)
		return
	}
	if len(a.pending) > 0 {
		if i, ok := a.pending[rc.hash]; ok {
			a.slots[i].live = false
			delete(a.pending, rc.hash)
		}
	}
	if len(a.counted) > 0 {
		if _, ok := a.counted[rc.hash]; ok {
			delete(a.counted, rc.hash)
			return
		}
	}
	a.request(&rc.req, a.file)
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
	a.evSc.arena = a.evSc.arena[:0]
	var ev event
	if err := a.evSc.parse(s.raw, &ev, true); err != nil {
		a.events--
		a.badLine(a.files[s.file-1], s.line, err)
		return
	}
	var q req
	a.evSc.setReq(&q, &ev)
	a.request(&q, s.file)
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
func (a *Analyzer) request(q *req, file int) {
	a.requests++
	ts, ok := q.ts, q.tsOK
	if at := q.at; q.atOK {
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
	a.top.add(q.uri)
	kind := q.kind
	if kind == "" {
		return
	}
	a.key = append(append(append(append(append(a.key[:0], kind...), 0), q.ns...), 0), q.name...)
	obj := a.objects[string(a.key)]
	if obj == nil {
		annotated := kind != "leases" && leaderAnnotated(q.respObject, q.reqObject)
		if kind != "leases" && !annotated {
			if a.others >= maxObjects {
				a.untraced++
				return
			}
			a.others++
		}
		obj = &lockObject{resource: kind, namespace: string(q.ns), name: string(q.name), candidates: map[string]*candidate{}}
		a.objects[string(a.key)] = obj
	}
	obj.requests++
	if kind != "leases" && !obj.annotated && (len(q.respObject) > 0 || len(q.reqObject) > 0) {
		obj.objectsSeen = true
		obj.annotated = leaderAnnotated(q.respObject, q.reqObject)
	}
	a.key = append(append(append(append(append(a.key[:0], q.user...), 0), q.ua...), 0), q.ip...)
	c := obj.candidates[string(a.key)]
	if c == nil {
		if len(obj.candidates) >= maxCandidates {
			a.key = append(a.key[:0], "\x00others\x00"...)
			c = obj.candidates[string(a.key)]
		}
		if c == nil {
			c = &candidate{User: string(q.user), UserAgent: string(q.ua), SourceIP: string(q.ip)}
			obj.candidates[string(a.key)] = c
		}
	}
	c.requests++
	switch q.verb {
	case verbRead:
		c.reads++
		if ok && c.lastRead != 0 && c.file == file && ts > c.lastRead {
			c.readIntervals.add(ts - c.lastRead)
		}
		if ok {
			c.lastRead = ts
		}
	case verbWrite:
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
		if k, ok := locks.Lookup(l.Resource, l.Namespace, l.Name); ok {
			l.Managed, l.Component = k.Governed, k.Component
		}
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
	r.LeftAlone = leftAlone(r.Locks)
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
