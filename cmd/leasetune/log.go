package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

// newLogger returns the controller's structured logger on stderr, in
// format (json or text) at level, and routes the logs of the libraries
// into it (routeLibraryLogs), so the process writes one format only.
func newLogger(format, level string) (*slog.Logger, error) {
	return newLoggerTo(os.Stderr, format, level)
}

// newLoggerTo is newLogger writing to w.
func newLoggerTo(w io.Writer, format, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, &usageError{fmt.Errorf("--log-level %q: %w", level, err)}
	}
	opts := &slog.HandlerOptions{Level: l}
	var h slog.Handler
	switch format {
	case "json":
		h = slog.NewJSONHandler(w, opts)
	case "text":
		h = slog.NewTextHandler(w, opts)
	default:
		return nil, &usageError{fmt.Errorf("--log-format %q: want json or text", format)}
	}
	log := slog.New(h)
	routeLibraryLogs(log, l)
	return log, nil
}

// routeLibraryLogs makes every logger in the process write through log:
//   - klog (client-go: leader election, reflectors, HandleError), with
//     klog.SetLogger and a logr.LogSink over slog (slogSink): klog v2.100.1
//     has no SetSlogLogger, and logr v1.2.4, the one client-go v0.28 is
//     built with (go.mod), no FromSlogHandler;
//   - logrus (wrangler and lasso use its standard logger), with a hook that
//     re-emits each entry with its level, and no output of its own;
//   - the standard library's log package (net/http's server errors), with
//     slog.SetDefault.
//
// level is log's level: logrus is set to it too, so that wrangler's debug
// lines are not even formatted at info. Process-wide; call it once, before
// any of those libraries logs.
func routeLibraryLogs(log *slog.Logger, level slog.Level) {
	h := log.Handler()
	klog.SetLogger(logr.New(slogSink{h: h}))
	std := logrus.StandardLogger()
	std.SetOutput(io.Discard)
	std.SetFormatter(discardFormatter{})
	std.ReplaceHooks(logrus.LevelHooks{})
	std.AddHook(logrusHook{h: h})
	std.SetLevel(logrusLevelFor(level))
	slog.SetDefault(log)
}

// libraryAttr names the library a routed line comes from.
const libraryAttr = "logger"

// slogSink is a logr.LogSink that writes through a slog.Handler: V-level 0
// is Info, higher V-levels Debug (klog checks its own -v before calling),
// Error is Error.
//
// logr v1.4's FromSlogHandler was tried in its place (issue 24, with logr
// v1.4.2 through a go.mod bump past the pinned stack): alone, it changes
// this process's format in the ways log_test.go checks, with klog v2.100.1:
// no logger=klog (klog names no logger, and a name given with WithName
// would prefix every named logger's, "klog/<name>"), the error under "err"
// rather than "error", klog's Infof messages keep their trailing newline,
// and klog.ObjectRef prints as lock=<ns>/<name> in text rather than
// lock.name=... lock.namespace=... (klog v2.100.1's ObjectRef is a
// logr.Marshaler, which FromSlogHandler does not apply, not a
// slog.LogValuer); V-levels above 0 become slog levels -1, -2, ...
// ("DEBUG+3") rather than Debug, and V(5) and above are dropped at
// --log-level debug. A slog.Handler in front of it that repairs the
// first four (tried: the log tests pass with one) and the levels is about
// as long as this sink and needs the logr bump besides, so the sink stays.
type slogSink struct {
	h    slog.Handler
	name string
}

var _ logr.LogSink = slogSink{}

func (s slogSink) Init(logr.RuntimeInfo) {}

func (s slogSink) Enabled(v int) bool { return s.h.Enabled(context.Background(), vLevel(v)) }

func (s slogSink) Info(v int, msg string, kv ...interface{}) { s.emit(vLevel(v), nil, msg, kv) }

func (s slogSink) Error(err error, msg string, kv ...interface{}) {
	s.emit(slog.LevelError, err, msg, kv)
}

func (s slogSink) WithValues(kv ...interface{}) logr.LogSink {
	r := slog.NewRecord(time.Time{}, 0, "", 0)
	r.Add(marshalValues(kv)...)
	var attrs []slog.Attr
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
	return slogSink{h: s.h.WithAttrs(attrs), name: s.name}
}

func (s slogSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	return slogSink{h: s.h, name: name}
}

func (s slogSink) emit(level slog.Level, err error, msg string, kv []interface{}) {
	ctx := context.Background()
	if !s.h.Enabled(ctx, level) {
		return
	}
	// klog's unstructured calls (Infof, Errorf) end their message with a newline.
	r := slog.NewRecord(time.Now(), level, strings.TrimSuffix(msg, "\n"), 0)
	name := s.name
	if name == "" {
		name = "klog"
	}
	r.AddAttrs(slog.String(libraryAttr, name))
	if err != nil {
		r.AddAttrs(slog.String("error", err.Error()))
	}
	r.Add(marshalValues(kv)...)
	_ = s.h.Handle(ctx, r)
}

// vLevel maps a logr V-level to a slog level.
func vLevel(v int) slog.Level {
	if v > 0 {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// marshalValues returns a copy of the key/value list with klog's object
// references (klog.KObj, klog.KRef) as a group of name and namespace, each
// other logr.Marshaler replaced by what it marshals to, and errors by their
// message.
func marshalValues(kv []interface{}) []interface{} {
	out := make([]interface{}, len(kv))
	copy(out, kv)
	for i := 1; i < len(out); i += 2 {
		switch v := out[i].(type) {
		case klog.ObjectRef:
			attrs := []slog.Attr{slog.String("name", v.Name)}
			if v.Namespace != "" {
				attrs = append(attrs, slog.String("namespace", v.Namespace))
			}
			out[i] = slog.GroupValue(attrs...)
		case logr.Marshaler:
			out[i] = v.MarshalLog()
		case error:
			out[i] = v.Error()
		}
	}
	return out
}

// logrusHook re-emits logrus entries through a slog.Handler.
type logrusHook struct{ h slog.Handler }

func (logrusHook) Levels() []logrus.Level { return logrus.AllLevels }

func (k logrusHook) Fire(e *logrus.Entry) error {
	ctx := context.Background()
	level := slogLevelFor(e.Level)
	if !k.h.Enabled(ctx, level) {
		return nil
	}
	r := slog.NewRecord(e.Time, level, strings.TrimSuffix(e.Message, "\n"), 0)
	r.AddAttrs(slog.String(libraryAttr, "logrus"))
	keys := make([]string, 0, len(e.Data))
	for key := range e.Data {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		v := e.Data[key]
		if err, ok := v.(error); ok {
			v = err.Error()
		}
		r.AddAttrs(slog.Any(key, v))
	}
	return k.h.Handle(ctx, r)
}

// slogLevelFor maps a logrus level to a slog level.
func slogLevelFor(l logrus.Level) slog.Level {
	switch l {
	case logrus.PanicLevel, logrus.FatalLevel, logrus.ErrorLevel:
		return slog.LevelError
	case logrus.WarnLevel:
		return slog.LevelWarn
	case logrus.InfoLevel:
		return slog.LevelInfo
	case logrus.DebugLevel:
		return slog.LevelDebug
	}
	return slog.LevelDebug - 4 // trace
}

// logrusLevelFor is the logrus level that lets through what a slog
// handler at level l writes.
func logrusLevelFor(l slog.Level) logrus.Level {
	switch {
	case l <= slog.LevelDebug-4:
		return logrus.TraceLevel
	case l <= slog.LevelDebug:
		return logrus.DebugLevel
	case l <= slog.LevelInfo:
		return logrus.InfoLevel
	case l <= slog.LevelWarn:
		return logrus.WarnLevel
	}
	return logrus.ErrorLevel
}

// discardFormatter formats nothing: logrus's own output is discarded, the
// hook writes the entry.
type discardFormatter struct{}

func (discardFormatter) Format(*logrus.Entry) ([]byte, error) { return nil, nil }
