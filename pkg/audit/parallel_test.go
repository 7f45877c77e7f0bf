package audit

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"leasetune.io/leasetune/hack/auditgen"
)

// parallelLog is a log with what the parallel reader must keep in order:
// both stages of generated requests, requests whose final stage never
// comes (more than the pending ring holds, so some are evicted while
// the log is read, one of them a line that is bad when read in full),
// bad lines (more than maxBadSamples in a row), blank lines, CRLF,
// escaped strings, a
// line longer than the blocks (and than the sequential reader's 1 MiB
// buffer) and no newline at the end.
func parallelLog(t *testing.T, minutes int, seed int64) []byte {
	t.Helper()
	o := auditgen.SURE3805(t0)
	o.Duration = time.Duration(minutes) * time.Minute
	o.RequestReceived, o.Seed = true, seed
	var gen bytes.Buffer
	if _, err := auditgen.Write(&gen, o); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(gen.String(), "\n")
	var b bytes.Buffer
	for i, l := range lines {
		if i%5 == 0 { // escapes, unescaped into the scanners' arenas
			l = strings.Replace(l, `?timeout=10s"`, `?timeout=10s\u0026x=\u00e9"`, 1)
		}
		b.WriteString(l)
		switch i {
		case 150:
			for k := 0; k < 12; k++ {
				fmt.Fprintf(&b, "garbage %d\n", k)
			}
		case 50:
			b.WriteString("\n  \n\r\n")
		case 5:
			// Read only as far as its stage until it is evicted.
			b.WriteString(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"cut","stage":"RequestReceived","verb":` + "\n")
		case 100:
			for k := 0; k < maxPending+100; k++ {
				b.WriteString(line{id: fmt.Sprint("lost", k), stage: "RequestReceived", verb: "get", uri: "/lost", at: t0.Add(time.Duration(k) * time.Millisecond)}.String())
			}
		case 200:
			b.WriteString(strings.TrimSuffix(l, "\n") + "\r\n")
		case 300:
			l := line{id: "big", verb: "update", resource: "configmaps", ns: "kube-system", name: "big", uri: "/big", at: t0.Add(time.Minute), respAnnotation: true}.String()
			b.WriteString(strings.Replace(l, `"kind":"ConfigMap"`, `"kind":"ConfigMap","pad":"`+strings.Repeat("x", 3<<20/2)+`"`, 1))
		case 400:
			b.WriteString(`{"kind":"Status"}` + "\n")
		}
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// readReport reads files with workers parsing goroutines (1: the
// sequential reader) and returns the report as JSON, and the errors.
func readReport(t *testing.T, workers int, wrap func(io.Reader) io.Reader, files map[string][]byte, names ...string) (string, string) {
	t.Helper()
	a := NewAnalyzer()
	a.workers = workers
	var errs []string
	for _, name := range names {
		if err := a.Read(name, wrap(bytes.NewReader(files[name]))); err != nil {
			errs = append(errs, err.Error())
		}
	}
	js, err := json.MarshalIndent(a.Report(20), "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(js), strings.Join(errs, "\n")
}

// TestParallelReportIsSequential: the parallel reader's report is the
// sequential reader's, byte for byte (JSON), for plain and gzip logs,
// several files, long lines, bad lines and read errors, whatever the
// block size, the number of workers and the sizes of the reads.
func TestParallelReportIsSequential(t *testing.T) {
	defer func(b, m int) { blockSize, maxLineBytes = b, m }(blockSize, maxLineBytes)
	first, second := parallelLog(t, 3, 1), parallelLog(t, 2, 2)
	gz := gzipped(t, second)
	files := map[string][]byte{
		"audit.log": first, "audit.log.1.gz": gz, "truncated.gz": gz[:len(gz)*2/3], "empty": nil,
		"rotated": []byte(line{id: "w", verb: "watch", uri: "/watch", at: t0.Add(time.Hour)}.String()),
	}
	readers := map[string]func(io.Reader) io.Reader{
		"whole reads":    func(r io.Reader) io.Reader { return r },
		"one byte reads": iotest.OneByteReader,
		"half reads":     iotest.HalfReader,
	}
	sets := [][]string{{"audit.log"}, {"audit.log.1.gz"}, {"audit.log", "audit.log.1.gz", "empty", "rotated"}, {"truncated.gz"}}
	for _, c := range []struct {
		block, maxLine int
		reader         string
	}{
		{256 << 10, MaxLineBytes, "whole reads"},
		{4 << 10, MaxLineBytes, "whole reads"},
		{1000, MaxLineBytes, "half reads"},
		{4 << 10, 1 << 20, "whole reads"}, // the long line is too long
		{2 << 20, 1 << 20, "whole reads"}, // ... and shorter than a block
		{64 << 10, MaxLineBytes, "one byte reads"},
	} {
		blockSize, maxLineBytes = c.block, c.maxLine
		sets := sets
		if c.maxLine < MaxLineBytes {
			files["boundary"] = boundaryLines(c.maxLine)
			sets = append(sets, []string{"boundary"})
		}
		for _, set := range sets {
			if c.reader == "one byte reads" && len(set) > 1 {
				continue // slow
			}
			want, wantErr := readReport(t, 1, readers[c.reader], files, set...)
			for _, workers := range []int{2, 3} {
				got, gotErr := readReport(t, workers, readers[c.reader], files, set...)
				name := fmt.Sprintf("blocks of %d, lines up to %d, %s, %d workers, %v", c.block, c.maxLine, c.reader, workers, set)
				if got != want {
					t.Errorf("%s: the parallel report differs:\n%s", name, firstDiff(want, got))
				}
				if gotErr != wantErr {
					t.Errorf("%s: errors %q, sequential %q", name, gotErr, wantErr)
				}
			}
			if set[0] == "truncated.gz" && !strings.Contains(wantErr, "truncated gzip stream after line") {
				t.Errorf("truncated gzip: %q", wantErr)
			}
		}
	}
}

// TestParallelLog: the test log has what the comparison needs.
func TestParallelLog(t *testing.T) {
	a := NewAnalyzer()
	a.workers = 1
	if err := a.Read("audit.log", bytes.NewReader(parallelLog(t, 3, 1))); err != nil {
		t.Fatal(err)
	}
	r := a.Report(20)
	// The early line cut short is bad when evicted, before the garbage.
	if s := r.BadLineSamples; r.BadLines != 14 || len(s) != maxBadSamples || s[0].Line != 7 || s[1].Line != 4352 {
		t.Errorf("bad lines %d, samples %+v", r.BadLines, r.BadLineSamples)
	}
	escaped := false
	for _, u := range r.Top {
		escaped = escaped || strings.HasSuffix(u.RequestURI, "?timeout=10s&x=é")
	}
	if !escaped {
		t.Errorf("no unescaped URI in the top ones: %+v", r.Top)
	}
	if _, ok := lockNamed(r, "configmaps", "big"); !ok {
		t.Errorf("the long line was not read: %+v", r.Locks)
	}
}

// boundaryLines are events of maxLine-1, maxLine and maxLine+1 bytes
// before their newline (with a carriage return in the last), and a last
// line of maxLine+1 without one.
func boundaryLines(maxLine int) []byte {
	var b bytes.Buffer
	for i, n := range []int{maxLine - 1, maxLine, maxLine + 1, maxLine, maxLine + 1} {
		l := strings.TrimSuffix(line{id: fmt.Sprint("b", i), verb: "get", uri: fmt.Sprint("/b", i), at: t0}.String(), "\n")
		cr := ""
		if i == 3 {
			cr = "\r"
		}
		pad := n - len(l) - len(cr) - len(`,"pad":""`)
		b.WriteString(strings.TrimSuffix(l, "}") + `,"pad":"` + strings.Repeat("x", pad) + `"}` + cr)
		if i < 4 {
			b.WriteString("\n")
		}
	}
	return b.Bytes()
}

// firstDiff shows where two texts begin to differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range al {
		if i >= len(bl) || al[i] != bl[i] {
			lo := max(0, i-3)
			return fmt.Sprintf("sequential, from line %d:\n%s\nparallel:\n%s", lo+1,
				strings.Join(al[lo:min(len(al), i+4)], "\n"), strings.Join(bl[lo:min(len(bl), i+4)], "\n"))
		}
	}
	return "the parallel report is longer"
}

func TestBoundaryLines(t *testing.T) {
	defer func(m int) { maxLineBytes = m }(maxLineBytes)
	maxLineBytes = 100 << 10
	for _, workers := range []int{1, 2} {
		a := NewAnalyzer()
		a.workers = workers
		if err := a.Read("b", bytes.NewReader(boundaryLines(maxLineBytes))); err != nil {
			t.Fatal(err)
		}
		r := a.Report(10)
		if r.Requests != 3 || r.BadLines != 2 || r.BadLineSamples[0].Line != 3 || r.BadLineSamples[1].Line != 5 ||
			r.BadLineSamples[0].Error != "line longer than 0 MiB" {
			t.Errorf("%d workers: requests %d, bad lines %+v", workers, r.Requests, r.BadLineSamples)
		}
	}
}
