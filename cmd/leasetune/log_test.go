package main

import (
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"

	"leasetune.io/leasetune/tests/kit"
)

// restoreLoggers undoes routeLibraryLogs after a test.
func restoreLoggers(t *testing.T) {
	t.Helper()
	def := slog.Default()
	std := logrus.StandardLogger()
	level, formatter := std.GetLevel(), std.Formatter
	t.Cleanup(func() {
		klog.ClearLogger()
		std.SetOutput(os.Stderr)
		std.SetFormatter(formatter)
		std.ReplaceHooks(logrus.LevelHooks{})
		std.SetLevel(level)
		slog.SetDefault(def)
		log.SetOutput(os.Stderr)
	})
}

// logEverywhere logs one line through each library the process uses.
func logEverywhere() {
	klog.Infof("klog infof %d", 1)
	klog.ErrorS(errors.New("connection refused"), "Failed to release lock", "lock", klog.KRef("leasetune-system", "leasetune"))
	klog.V(4).Info("klog verbose, dropped")
	logrus.WithField("controller", "settings").Infof("logrus info %d", 2)
	logrus.WithError(errors.New("boom")).Warn("logrus warn")
	logrus.Debug("logrus debug, dropped at info")
	log.Printf("stdlib log %d", 3)
}

// TestLibraryLogsAreJSONLines: with --log-format json, klog, logrus and the
// log package write JSON lines in the controller's own shape, with their
// levels.
func TestLibraryLogsAreJSONLines(t *testing.T) {
	restoreLoggers(t)
	var buf kit.SyncBuffer
	lg, err := newLoggerTo(&buf, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	lg.Info("own line", "k", "v")
	logEverywhere()
	klog.Flush()

	type line struct {
		Time, Level, Msg, Logger, Error string
		Lock                            map[string]string
		Controller                      string
	}
	var got []line
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m line
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q (%v)\nall:\n%s", l, err, buf.String())
		}
		if m.Time == "" || m.Level == "" {
			t.Errorf("line without time or level: %q", l)
		}
		got = append(got, m)
	}
	want := []struct{ level, msg, logger string }{
		{"INFO", "own line", ""},
		{"INFO", "klog infof 1", "klog"},
		{"ERROR", "Failed to release lock", "klog"},
		{"INFO", "logrus info 2", "logrus"},
		{"WARN", "logrus warn", "logrus"},
		{"INFO", "stdlib log 3", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i, w := range want {
		if got[i].Level != w.level || got[i].Msg != w.msg || got[i].Logger != w.logger {
			t.Errorf("line %d: %+v, want level %s msg %q logger %q", i, got[i], w.level, w.msg, w.logger)
		}
	}
	if got[2].Error != "connection refused" || got[2].Lock["name"] != "leasetune" || got[2].Lock["namespace"] != "leasetune-system" {
		t.Errorf("klog's structured fields: %+v", got[2])
	}
	if got[3].Controller != "settings" || got[4].Error != "boom" {
		t.Errorf("logrus fields: %+v %+v", got[3], got[4])
	}
}

// TestLibraryLogsText: with --log-format text every line is slog's text
// format, none klog's (I1201 ...) or logrus's (time="..." level=info).
func TestLibraryLogsText(t *testing.T) {
	restoreLoggers(t)
	var buf kit.SyncBuffer
	if _, err := newLoggerTo(&buf, "text", "debug"); err != nil {
		t.Fatal(err)
	}
	logEverywhere()
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 { // the klog V(4) line stays dropped: klog's own -v is 0
		t.Errorf("%d lines, want 6:\n%s", len(lines), out)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "time=") || !strings.Contains(l, " level=") || strings.Contains(l, `time="`) {
			t.Errorf("not slog's text format: %q", l)
		}
	}
	for _, w := range []string{`level=DEBUG msg="logrus debug, dropped at info" logger=logrus`, `level=ERROR msg="Failed to release lock" logger=klog error="connection refused" lock.name=leasetune lock.namespace=leasetune-system`} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestNewLoggerRefusesBadFlags(t *testing.T) {
	if _, err := newLoggerTo(io.Discard, "yaml", "info"); err == nil {
		t.Error("format yaml accepted")
	}
	if _, err := newLoggerTo(io.Discard, "json", "loud"); err == nil {
		t.Error("level loud accepted")
	}
}
