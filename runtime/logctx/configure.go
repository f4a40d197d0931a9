package logctx

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Format is a log output format.
type Format string

// The output formats.
const (
	// FormatText is slog's key=value text format.
	FormatText Format = "text"
	// FormatJSON is one JSON object per record.
	FormatJSON Format = "json"
)

// Options configures the logging pipeline. The zero value means: write to
// stderr, format and level from the environment (text and info when unset).
type Options struct {
	// Writer receives the records; nil means os.Stderr.
	Writer io.Writer
	// Format overrides EnvFormat when set.
	Format Format
	// Level overrides EnvLevel when set.
	Level *slog.Level
	// AddSource adds the caller's file:line to records.
	AddSource bool
	// Force reconfigures even when Configure already ran.
	Force bool
	// NoRestore skips RestoreFromEnv: the process fields are left as they are.
	NoRestore bool
}

var (
	configMu   sync.Mutex
	configured *slog.Logger
)

// Configure sets up the process's logging pipeline once: a text or JSON
// slog handler on opts.Writer, wrapped in Handler so records carry the
// correlation fields, installed with slog.SetDefault (which also routes the
// standard log package through it); timestamps are written in UTC. Unless
// opts.NoRestore is set it also restores the fields a parent handed over in
// EnvContext (RestoreFromEnv), so a framework-owned child logs with its
// parent's run id from its first record.
//
// It is idempotent: once it has succeeded, later calls without opts.Force
// change nothing and return false, so every entry point (CLI, worker, test)
// may call it. It returns true when it (re)configured. A bad EnvLevel,
// EnvFormat or EnvContext value is an error naming the variable, and nothing
// is changed.
func Configure(opts Options) (bool, error) {
	configMu.Lock()
	defer configMu.Unlock()
	if configured != nil && !opts.Force {
		return false, nil
	}
	format := opts.Format
	if format == "" {
		f, err := ParseFormat(os.Getenv(EnvFormat))
		if err != nil {
			return false, fmt.Errorf("logctx: %s: %w", EnvFormat, err)
		}
		format = f
	} else if _, err := ParseFormat(string(format)); err != nil {
		return false, fmt.Errorf("logctx: Options.Format: %w", err)
	}
	var level slog.Level
	if opts.Level != nil {
		level = *opts.Level
	} else {
		l, err := ParseLevel(os.Getenv(EnvLevel))
		if err != nil {
			return false, fmt.Errorf("logctx: %s: %w", EnvLevel, err)
		}
		level = l
	}
	var restored Fields
	if !opts.NoRestore {
		f, err := DecodeEnv(os.Getenv(EnvContext))
		if err != nil {
			return false, err
		}
		restored = f
	}
	w := opts.Writer
	if w == nil {
		w = os.Stderr
	}
	hopts := &slog.HandlerOptions{AddSource: opts.AddSource, Level: level, ReplaceAttr: utcTime}
	var inner slog.Handler
	if strings.EqualFold(string(format), string(FormatJSON)) {
		inner = slog.NewJSONHandler(w, hopts)
	} else {
		inner = slog.NewTextHandler(w, hopts)
	}
	if !opts.NoRestore {
		SetProcessFields(restored)
	}
	logger := slog.New(NewHandler(inner))
	slog.SetDefault(logger)
	configured = logger
	return true, nil
}

// Logger returns the logger Configure installed, or slog.Default() when
// Configure has not run.
func Logger() *slog.Logger {
	configMu.Lock()
	defer configMu.Unlock()
	if configured != nil {
		return configured
	}
	return slog.Default()
}

// utcTime writes the record time in UTC.
func utcTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime {
		a.Value = slog.TimeValue(a.Value.Time().UTC())
	}
	return a
}

// ParseFormat parses a format name, case-insensitively; "" means text.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "text":
		return FormatText, nil
	case "json":
		return FormatJSON, nil
	}
	return "", fmt.Errorf("unknown log format %q: want text or json", s)
}

// ParseLevel parses a level name, case-insensitively; "" means info. It
// accepts slog's names and offsets (debug, info, warn, error, "info+2"), the
// Python names warning and critical (error+4), and plain integers.
func ParseLevel(s string) (slog.Level, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "":
		return slog.LevelInfo, nil
	case "warning":
		return slog.LevelWarn, nil
	case "critical", "fatal":
		return slog.LevelError + 4, nil
	}
	if n, err := strconv.Atoi(t); err == nil {
		return slog.Level(n), nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(t)); err != nil {
		return 0, fmt.Errorf("unknown log level %q: want debug, info, warn, error, critical or a number", s)
	}
	return l, nil
}
