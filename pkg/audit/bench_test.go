package audit

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"leasetune.io/leasetune/pkg/audit/auditgen"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/settings"
)

// benchSize is the size of the generated log: LEASETUNE_AUDIT_BENCH_MB
// MiB, default 300.
func benchSize() int64 {
	mb := int64(300)
	if v, err := strconv.ParseInt(os.Getenv("LEASETUNE_AUDIT_BENCH_MB"), 10, 64); err == nil && v > 0 {
		mb = v
	}
	return mb << 20
}

func analyzeFile(path string) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a := NewAnalyzer()
	if err := a.Read(path, f); err != nil {
		return nil, err
	}
	r := a.Report(10)
	r.Project(map[settings.Component]election.Timings{settings.FleetController: election.FleetDefaults, settings.FleetAgent: election.FleetDefaults}, "defaults")
	return r, nil
}

// BenchmarkAudit generates a log of benchSize (the SURE-3805 mix of
// auditgen, Metadata level, both stages of every request) and measures
// what `leasetune audit` does with it against the report's pipeline
// `jq .requestURI | sort | uniq -c | sort -nr | head -10` on the same
// file; the pipeline only when jq is installed. It fails when leasetune
// is not at least 10× faster.
func BenchmarkAudit(b *testing.B) {
	path := filepath.Join(b.TempDir(), "audit.log")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	o := auditgen.SURE3805(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	o.RequestReceived = true
	o = auditgen.ForSize(o, benchSize())
	st, err := auditgen.Write(f, o)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(path)
	b.Logf("generated %s: %d MiB, %d lines, %d requests over %s", path, fi.Size()>>20, st.Lines, st.Requests, o.Duration)

	var ours, theirs time.Duration
	b.Run("leasetune", func(b *testing.B) {
		b.SetBytes(fi.Size())
		b.ReportAllocs()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			r, err := analyzeFile(path)
			if err != nil {
				b.Fatal(err)
			}
			if r.Requests != st.Requests {
				b.Fatalf("%d requests, the generator wrote %d", r.Requests, st.Requests)
			}
		}
		ours = time.Since(start) / time.Duration(b.N)
	})
	if _, err := exec.LookPath("jq"); err != nil {
		b.Logf("jq is not installed: skipping the comparison with the report's pipeline (apt-get install -y jq)")
		return
	}
	b.Run("jq-sort-uniq", func(b *testing.B) {
		b.SetBytes(fi.Size())
		start := time.Now()
		for i := 0; i < b.N; i++ {
			cmd := exec.Command("sh", "-c", `jq .requestURI "$1" | sort | uniq -c | sort -nr | head -10`, "sh", path)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
		theirs = time.Since(start) / time.Duration(b.N)
	})
	if ours > 0 && theirs > 0 {
		ratio := float64(theirs) / float64(ours)
		b.Logf("leasetune %s, jq|sort|uniq %s: %.1f× faster", ours.Round(time.Millisecond), theirs.Round(time.Millisecond), ratio)
		if ratio < 10 {
			b.Errorf("leasetune is only %.1f× faster than jq|sort|uniq, want at least 10×", ratio)
		}
	}
}

// TestMemoryBounded: what the Analyzer keeps does not grow with the log.
// Two logs, 4× apart in size, streamed from the generator (never held
// whole), leave about the same live heap.
func TestMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	live := func(size int64) uint64 {
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
	small, large := live(16<<20), live(64<<20)
	t.Logf("live heap after 16 MiB: %d KiB, after 64 MiB: %d KiB", small>>10, large>>10)
	if large > small+8<<20 {
		t.Errorf("live heap grew from %d KiB to %d KiB with a 4× larger log", small>>10, large>>10)
	}
}
