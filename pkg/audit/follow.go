package audit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// Event is one audit.k8s.io/v1 Event as ParseEvent reads it: the fields
// that tell who made which request, on what, when, and how it ended.
type Event struct {
	AuditID    string
	Stage      string // RequestReceived, ResponseStarted, ResponseComplete or Panic
	Verb       string // get, list, watch, create, update, patch, delete, ...
	RequestURI string
	User       string // user.username
	UserAgent  string
	SourceIP   string // the first of sourceIPs
	// HasObjectRef is false for a request of a non-resource URL (no
	// objectRef); then the five fields below are empty.
	HasObjectRef                                     bool
	Resource, Namespace, Name, APIGroup, Subresource string
	// Code is responseStatus.code, the HTTP status of the answer; 0 when
	// the event has none (a stage before the answer).
	Code int
	// Received is requestReceivedTimestamp, StageAt stageTimestamp; zero
	// when absent or not RFC 3339.
	Received, StageAt time.Time
}

// Final reports whether e is the last stage of its request
// (ResponseComplete or Panic).
func (e Event) Final() bool { return e.Stage == "ResponseComplete" || e.Stage == "Panic" }

// ParseEvent reads one line of an audit log (one JSON object, with or
// without its newline) as the Analyzer does (parseLine: a scanner that
// reads only these fields, with encoding/json deciding and naming the
// error of a line it refuses). Errors: the line is not JSON, or not an
// audit.k8s.io/v1 Event with an auditID and a stage.
func ParseEvent(line []byte) (Event, error) {
	var ev event
	if err := parseLine(line, &ev, make([]byte, 0, len(line)), true); err != nil {
		return Event{}, err
	}
	return ev.export(), nil
}

// export copies ev's fields out of the line they point into.
func (ev *event) export() Event {
	e := Event{
		AuditID: string(ev.auditID), Stage: string(ev.stage), Verb: string(ev.verb), RequestURI: string(ev.requestURI),
		User: string(ev.username), UserAgent: string(ev.userAgent), SourceIP: string(ev.sourceIP),
		HasObjectRef: ev.hasObjectRef, Resource: string(ev.resource), Namespace: string(ev.namespace), Name: string(ev.name),
		APIGroup: string(ev.apiGroup), Subresource: string(ev.subresource),
	}
	if len(ev.code) > 0 {
		e.Code, _ = strconv.Atoi(string(ev.code))
	}
	e.Received, _ = time.Parse(time.RFC3339Nano, string(ev.received))
	e.StageAt, _ = time.Parse(time.RFC3339Nano, string(ev.stageAt))
	return e
}

// Follower reads an audit log file while the kube-apiserver appends to it
// (--audit-log-path, not rotated): each Poll reads the lines appended
// since the last one. It is not safe for concurrent use.
type Follower struct {
	path string
	f    *os.File
	r    *bufio.Reader
	part []byte // the start of a line whose newline has not been written yet
	line int    // lines read
}

// NewFollower returns a Follower of the file at path, which need not
// exist yet.
func NewFollower(path string) *Follower { return &Follower{path: path} }

// Poll calls fn with the event of each whole line appended since the last
// call, in order; a last line without its newline is kept for the next
// Poll. A file that does not exist yet has nothing appended. Errors: the
// file cannot be opened or read, a line is not an audit event (naming the
// file and the line), or fn's error; the lines after it are read by the
// next Poll.
func (f *Follower) Poll(fn func(Event) error) error {
	if f.f == nil {
		file, err := os.Open(f.path)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		f.f, f.r = file, bufio.NewReaderSize(file, 1<<20)
	}
	for {
		chunk, err := f.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			f.part = append(f.part, chunk...)
			continue
		}
		if errors.Is(err, io.EOF) {
			f.part = append(f.part, chunk...)
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", f.path, err)
		}
		line := chunk
		if len(f.part) > 0 {
			line = append(f.part, chunk...)
			f.part = f.part[:0]
		}
		f.line++
		ev, err := ParseEvent(line)
		if err != nil {
			return fmt.Errorf("%s line %d: %w", f.path, f.line, err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// Close closes the file.
func (f *Follower) Close() error {
	if f.f == nil {
		return nil
	}
	return f.f.Close()
}
