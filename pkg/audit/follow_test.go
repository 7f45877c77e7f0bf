package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseEvent(t *testing.T) {
	got, err := ParseEvent([]byte(metadataLine + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Event{
		AuditID: "a1", Stage: "ResponseComplete", Verb: "list",
		RequestURI: "/api/v1/namespaces/kube-system/pods?limit=500&resourceVersion=0",
		User:       "system:serviceaccount:a:b", UserAgent: `kubectl/v1.32.0 (linux/amd64) kubernetes/"x"`, SourceIP: "10.0.0.1",
		HasObjectRef: true, Resource: "pods", Namespace: "kube-system",
		Code:     200,
		Received: time.Date(2024, 1, 1, 0, 0, 0, 123456000, time.UTC), StageAt: time.Date(2024, 1, 1, 0, 0, 0, 130000000, time.UTC),
	}
	if got != want {
		t.Errorf("ParseEvent:\n got %+v\nwant %+v", got, want)
	}
	if !got.Final() {
		t.Error("ResponseComplete is not final")
	}

	// White space where the scanner reads the code, and the fallback
	// decoder (a line the scanner refuses: nesting deeper than it reads)
	// give the same fields.
	spaced := strings.Replace(metadataLine, `"code":200`, `"code": 200 `, 1)
	deep := strings.Replace(metadataLine, `"annotations":`, `"requestObject":`+strings.Repeat("[", 1100)+strings.Repeat("]", 1100)+`,"annotations":`, 1)
	for name, l := range map[string]string{"white space": spaced, "fallback": deep} {
		if got2, err := ParseEvent([]byte(l)); err != nil || got2 != want {
			t.Errorf("%s: %+v, %v", name, got2, err)
		}
	}
	var s scanner
	s.b = []byte(deep)
	if err := s.event(&event{}); err == nil {
		t.Error("the scanner read the deep line: the fallback case tests nothing")
	}

	// No answer yet, no objectRef.
	early, err := ParseEvent([]byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"b","stage":"ResponseStarted","verb":"watch","requestURI":"/healthz"}`))
	if err != nil || early.Code != 0 || early.HasObjectRef || early.Final() || !early.Received.IsZero() {
		t.Errorf("an early stage: %+v, %v", early, err)
	}
	if _, err := ParseEvent([]byte(`{"kind":"Status"}`)); !errors.Is(err, errNotEvent) {
		t.Errorf("a Status: %v", err)
	}
}

// TestFollower: each Poll reads the whole lines appended since the last;
// a line without its newline waits; a file not there yet is empty; a line
// that is not an event is an error naming the file and the line.
func TestFollower(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	f := NewFollower(path)
	defer func() { _ = f.Close() }()
	var got []string
	collect := func(e Event) error { got = append(got, e.AuditID); return nil }
	if err := f.Poll(collect); err != nil || len(got) != 0 {
		t.Fatalf("no file yet: %v, %v", got, err)
	}
	line := func(id string) string {
		return strings.Replace(metadataLine, `"auditID":"a1"`, `"auditID":"`+id+`"`, 1) + "\n"
	}
	w, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	write := func(s string) {
		t.Helper()
		if _, err := w.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	second := line("a2")
	write(line("a1") + second[:40])
	if err := f.Poll(collect); err != nil || strings.Join(got, ",") != "a1" {
		t.Fatalf("first poll: %v, %v", got, err)
	}
	if err := f.Poll(collect); err != nil || strings.Join(got, ",") != "a1" {
		t.Fatalf("nothing appended: %v, %v", got, err)
	}
	write(second[40:] + strings.Repeat(" ", 2<<20) + strings.TrimSuffix(line("a3"), "\n")) // a line longer than the reader's buffer
	if err := f.Poll(collect); err != nil || strings.Join(got, ",") != "a1,a2" {
		t.Fatalf("the rest of a2, and a3 without its newline yet: %v, %v", got, err)
	}
	write("\n")
	if err := f.Poll(collect); err != nil || strings.Join(got, ",") != "a1,a2,a3" {
		t.Fatalf("a3 complete: %v, %v", got, err)
	}
	write("not json\n" + line("a4"))
	err = f.Poll(collect)
	if err == nil || !strings.Contains(err.Error(), path+" line 4:") {
		t.Fatalf("a bad line: %v", err)
	}
	if err := f.Poll(collect); err != nil || strings.Join(got, ",") != "a1,a2,a3,a4" {
		t.Fatalf("after the bad line: %v, %v", got, err)
	}
}
