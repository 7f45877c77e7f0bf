package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	jsoniter "github.com/json-iterator/go"

	"leasetune.io/leasetune/hack/auditgen"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/settings"
)

// benchSize is the size of the generated logs: LEASETUNE_AUDIT_BENCH_MB
// MiB, default 300 (428 is the 449 MB of issue #27).
func benchSize() int64 {
	mb := int64(300)
	if v, err := strconv.ParseInt(os.Getenv("LEASETUNE_AUDIT_BENCH_MB"), 10, 64); err == nil && v > 0 {
		mb = v
	}
	return mb << 20
}

// analyzeFile is `leasetune audit FILE` without the printing: read with
// workers goroutines parsing (0: GOMAXPROCS), or with read (a reader of
// another JSON decoder), the report and the projection.
func analyzeFile(path string, workers int, read func(*Analyzer, string, io.Reader) error) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a := NewAnalyzer()
	a.workers = workers
	if read == nil {
		read = (*Analyzer).Read
	}
	if err := read(a, path, f); err != nil {
		return nil, err
	}
	r := a.Report(10)
	r.Project(map[settings.Component]election.Timings{settings.FleetController: election.FleetDefaults, settings.FleetAgent: election.FleetDefaults}, "defaults")
	return r, nil
}

// decoderReader returns a reader that does what Read does (one goroutine)
// with unmarshal in place of the scanner: each line decoded into
// jsonEvent, the struct of only the fields the analysis reads, then
// counted by the same code (checkEvent, setRec, apply).
func decoderReader(unmarshal func([]byte, any) error) func(*Analyzer, string, io.Reader) error {
	return func(a *Analyzer, name string, r io.Reader) error {
		a.files = append(a.files, name)
		a.file = len(a.files)
		br := bufio.NewReaderSize(r, 1<<20)
		var s scanner
		var long []byte
		for n := 1; ; n++ {
			line, err := br.ReadSlice('\n')
			for errors.Is(err, bufio.ErrBufferFull) {
				long = append(long, line...)
				line, err = br.ReadSlice('\n')
			}
			if long != nil {
				line, long = append(long, line...), nil
			}
			if line = trimEOL(line); !blank(line) {
				var j jsonEvent
				var ev event
				perr := unmarshal(line, &j)
				if perr == nil {
					j.event(&ev)
					perr = checkEvent(&ev)
				}
				a.rec.n = n
				s.setRec(a.seed, line, &ev, perr, &a.rec)
				a.apply(name, n, &a.rec)
			}
			if err != nil {
				return readError(name, n, err)
			}
		}
	}
}

// benchLog returns a generated log of benchSize, the SURE-3805 mix of
// auditgen at Metadata level, with both stages of every request or only
// the final one; kept in LEASETUNE_AUDIT_BENCH_DIR when it is set, so
// that later runs read the same file.
func benchLog(b *testing.B, stages bool) (string, auditgen.Stats) {
	o := auditgen.SURE3805(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	o.RequestReceived = stages
	o = auditgen.ForSize(o, benchSize())
	dir := os.Getenv("LEASETUNE_AUDIT_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("audit-%dMiB-stages-%v.log", benchSize()>>20, stages))
	st, err := auditgen.Write(io.Discard, o) // the counts, without writing
	if err != nil {
		b.Fatal(err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		return path, st
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err = auditgen.Write(f, o); err == nil {
		err = f.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
	return path, st
}

// benchResult is one reader's time on one log.
type benchResult struct {
	reader   string
	perOp    time.Duration
	cpuPerOp time.Duration // user + system CPU, of its children for jq
}

// BenchmarkAudit measures, on the same generated logs (one with only the
// final stage of each request, as the report's log and issue #27's 449
// MB; one with both stages, RequestReceived too), what `leasetune audit`
// does with them (with the parallel reader, GOMAXPROCS goroutines, and
// the sequential one), the same analysis with json-iterator and with
// encoding/json decoding each line into a struct of the fields it needs,
// and the report's pipeline `jq .requestURI | sort | uniq -c | sort -nr |
// head -10` (only when jq is installed). It logs a table of each
// reader's time, MB/s, CPU time and ratio to jq, and fails when
// leasetune's sequential reader does not take at least 3× less CPU time
// than the json-iterator reader (measured 4–7× on a loaded machine).
// Issue #27's targets (20× jq, 1 GB/s), the ratio to jq and the parallel
// reader's gain are logged, not asserted: they are elapsed times, which
// on a shared machine hold or not with the load (the parallel reader
// needs a second core that is free; jq's pipeline runs three processes).
func BenchmarkAudit(b *testing.B) {
	_, haveJQ := exec.LookPath("jq")
	if haveJQ != nil {
		b.Logf("jq is not installed: skipping the comparison with the report's pipeline (apt-get install -y jq)")
	}
	for _, shape := range []struct {
		name   string
		stages bool
	}{{"final-only", false}, {"both-stages", true}} {
		b.Run(shape.name, func(b *testing.B) {
			path, st := benchLog(b, shape.stages)
			fi, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%s: %d bytes, %d lines, %d requests", path, fi.Size(), st.Lines, st.Requests)
			var results []benchResult
			run := func(name string, op func() error) {
				b.Run(name, func(b *testing.B) {
					b.SetBytes(fi.Size())
					b.ReportAllocs()
					start, cpu := time.Now(), cpuTime(name == "jq")
					for i := 0; i < b.N; i++ {
						if err := op(); err != nil {
							b.Fatal(err)
						}
					}
					res := benchResult{reader: name, perOp: time.Since(start) / time.Duration(b.N),
						cpuPerOp: (cpuTime(name == "jq") - cpu) / time.Duration(b.N)}
					b.ReportMetric(res.cpuPerOp.Seconds(), "cpu-s/op")
					if len(results) > 0 && results[len(results)-1].reader == name {
						results[len(results)-1] = res // the framework's longer run
					} else {
						results = append(results, res)
					}
				})
			}
			ours := func(workers int, read func(*Analyzer, string, io.Reader) error) func() error {
				return func() error {
					r, err := analyzeFile(path, workers, read)
					if err == nil && (r.Requests != st.Requests || r.BadLines != 0) {
						err = fmt.Errorf("%d requests and %d bad lines, the generator wrote %d requests", r.Requests, r.BadLines, st.Requests)
					}
					return err
				}
			}
			run("leasetune-parallel", ours(0, nil))
			run("leasetune-sequential", ours(1, nil))
			run("json-iterator", ours(1, decoderReader(jsoniter.ConfigCompatibleWithStandardLibrary.Unmarshal)))
			run("encoding-json", ours(1, decoderReader(json.Unmarshal)))
			if haveJQ == nil {
				run("jq", func() error {
					cmd := exec.Command("sh", "-c", `jq .requestURI "$1" | sort | uniq -c | sort -nr | head -10`, "sh", path)
					if out, err := cmd.CombinedOutput(); err != nil {
						return fmt.Errorf("%w: %s", err, out)
					}
					return nil
				})
			}
			logTable(b, fi.Size(), results)
		})
	}
}

// logTable logs the results and checks what is asserted (see
// BenchmarkAudit).
func logTable(b *testing.B, size int64, results []benchResult) {
	byName := map[string]benchResult{}
	for _, r := range results {
		byName[r.reader] = r
	}
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "reader\ts/op\tMB/s\tCPU s/op\t× jq\t\n")
	jq, haveJQ := byName["jq"]
	for _, r := range results {
		ratio := "-"
		if haveJQ {
			ratio = fmt.Sprintf("%.1f", jq.perOp.Seconds()/r.perOp.Seconds())
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.0f\t%.3f\t%s\t\n", r.reader, r.perOp.Seconds(), float64(size)/r.perOp.Seconds()/1e6, r.cpuPerOp.Seconds(), ratio)
	}
	_ = tw.Flush()
	b.Logf("GOMAXPROCS %d, load average %s\n%s", runtime.GOMAXPROCS(0), loadAverage(), sb.String())

	par, seq := byName["leasetune-parallel"], byName["leasetune-sequential"]
	if par.perOp == 0 || seq.perOp == 0 {
		return // a run of part of the benchmark (-bench with a filter)
	}
	mbps := float64(size) / par.perOp.Seconds() / 1e6
	b.Logf("issue #27: %.0f MB/s (target 1,000: %s)", mbps, met(mbps >= 1000))
	b.Logf("parallel reader: %.2f× the sequential one", seq.perOp.Seconds()/par.perOp.Seconds())
	if haveJQ {
		ratio := jq.perOp.Seconds() / par.perOp.Seconds()
		b.Logf("issue #27: %.1f× jq (target 20×: %s)", ratio, met(ratio >= 20))
	}
	// CPU time, not elapsed: it moves less with the machine's load.
	if ji := byName["json-iterator"]; ji.cpuPerOp > 0 && seq.cpuPerOp > 0 {
		if ratio := ji.cpuPerOp.Seconds() / seq.cpuPerOp.Seconds(); ratio < 3 {
			b.Errorf("leasetune's sequential reader takes %.2f CPU s, json-iterator's %.2f: only %.1f× less, want at least 3×",
				seq.cpuPerOp.Seconds(), ji.cpuPerOp.Seconds(), ratio)
		}
	}
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// loadAverage is /proc/loadavg's first three fields, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// TestMemoryBounded: what the Analyzer keeps does not grow with the log,
// with either reader. Two logs, 4× apart in size, streamed from the
// generator (never held whole), leave about the same live heap.
func TestMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	live := func(size int64, workers int) uint64 {
		pr, pw := io.Pipe()
		o := auditgen.SURE3805(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
		o.RequestReceived = true
		o = auditgen.ForSize(o, size)
		go func() {
			w := bufio.NewWriter(pw)
			_, err := auditgen.Write(w, o)
			if err == nil {
				err = w.Flush()
			}
			pw.CloseWithError(err)
		}()
		a := NewAnalyzer()
		a.workers = workers
		if err := a.Read("gen", pr); err != nil {
			t.Fatal(err)
		}
		a.finish()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		runtime.KeepAlive(a)
		return ms.HeapAlloc
	}
	for _, workers := range []int{1, 4} {
		small, large := live(16<<20, workers), live(64<<20, workers)
		t.Logf("%d workers: live heap after 16 MiB: %d KiB, after 64 MiB: %d KiB", workers, small>>10, large>>10)
		if large > small+8<<20 {
			t.Errorf("%d workers: live heap grew from %d KiB to %d KiB with a 4× larger log", workers, small>>10, large>>10)
		}
	}
}

// TestDecoderReader: the benchmark's readers of other decoders make the
// report the scanner makes.
func TestDecoderReader(t *testing.T) {
	log := parallelLog(t, 2, 3)
	want, _ := readReport(t, 1, func(r io.Reader) io.Reader { return r }, map[string][]byte{"a": log}, "a")
	for name, read := range map[string]func(*Analyzer, string, io.Reader) error{
		"json-iterator": decoderReader(jsoniter.ConfigCompatibleWithStandardLibrary.Unmarshal),
		"encoding/json": decoderReader(json.Unmarshal),
	} {
		a := NewAnalyzer()
		if err := read(a, "a", bytes.NewReader(log)); err != nil {
			t.Fatal(err)
		}
		r := a.Report(20)
		js, _ := json.MarshalIndent(r, "", " ")
		// The bad lines' errors are each decoder's own.
		var got, exp Report
		_ = json.Unmarshal(js, &got)
		_ = json.Unmarshal([]byte(want), &exp)
		got.BadLineSamples, exp.BadLineSamples = nil, nil
		g, _ := json.MarshalIndent(got, "", " ")
		e, _ := json.MarshalIndent(exp, "", " ")
		if string(g) != string(e) {
			t.Errorf("%s: the report differs:\n%s", name, firstDiff(string(e), string(g)))
		}
	}
}
