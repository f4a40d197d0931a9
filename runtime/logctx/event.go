package logctx

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// EventSchema names the lifecycle event format; it is the "schema" member of
// every line AppendEvent writes. A change that breaks readers gets a new
// version.
const EventSchema = "wfgen.lifecycle/v1"

// utcLayout is ISO-8601 / RFC 3339 in UTC with a fixed six-digit fraction.
const utcLayout = "2006-01-02T15:04:05.000000Z"

// NowUTC returns the current time in UTC as ISO-8601 with microseconds,
// e.g. "2025-01-02T03:04:05.123456Z".
func NowUTC() string { return FormatUTC(time.Now()) }

// FormatUTC formats t like NowUTC.
func FormatUTC(t time.Time) string { return t.UTC().Format(utcLayout) }

// Event is one lifecycle event: one line of a run-owned JSONL file. The
// members, in the order written:
//
//	schema   always EventSchema
//	time     when the event was recorded, UTC ISO-8601 (NowUTC)
//	event    what happened: "started", "exited", ... (see docs/processes.md
//	         for the events runtime/proc writes)
//	pid      the process that wrote the line
//	host     its host name (omitted when unknown)
//	context  the correlation fields in force (FromContext), omitted when none
//	data     event-specific members, omitted when none
type Event struct {
	Schema  string         `json:"schema"`
	Time    string         `json:"time"`
	Event   string         `json:"event"`
	PID     int            `json:"pid"`
	Host    string         `json:"host,omitempty"`
	Context Fields         `json:"context,omitempty"`
	Data    map[string]any `json:"data,omitempty"`
}

// AppendEvent appends one event line to the JSONL file at path, creating the
// file (and its directory) when missing. The event carries the correlation
// fields of ctx and the given data, which must be JSON-encodable (NaN, for
// one, is not): otherwise it is an error and nothing is written.
//
// Lines from concurrent writers — goroutines or separate processes — are
// never interleaved: the file is opened with O_APPEND, so every write lands
// at the current end, and the whole line goes out in one write(2) while an
// exclusive flock(2) is held. The lock is what makes the guarantee hold for
// lines of any length: Linux happens to serialise writes to one regular
// file, but POSIX promises atomicity only for pipe writes up to PIPE_BUF
// (4096 bytes on Linux) and a regular-file write may be short (a full disk,
// a signal), in which case the rest is written before the lock is released.
// Readers that must never see a line mid-write take a shared flock (as
// ReadEvents does). On Windows there is no flock; appends rely on
// FILE_APPEND_DATA alone.
func AppendEvent(ctx context.Context, path, event string, data map[string]any) error {
	if event == "" {
		return errors.New("logctx: AppendEvent: empty event name")
	}
	if path == "" {
		return errors.New("logctx: AppendEvent: empty path")
	}
	host, _ := os.Hostname()
	ev := Event{
		Schema: EventSchema,
		Time:   NowUTC(),
		Event:  event,
		PID:    os.Getpid(),
		Host:   host,
		Data:   data,
	}
	if ctx != nil {
		ev.Context = FromContext(ctx)
	} else {
		ev.Context = ProcessFields()
	}
	line, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("logctx: event %q for %s is not JSON-encodable: %w", event, path, err)
	}
	line = append(line, '\n')
	return appendLine(path, line)
}

func appendLine(path string, line []byte) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("logctx: lifecycle directory: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("logctx: open lifecycle file: %w", err)
	}
	if err := lockFile(f, true); err != nil {
		f.Close()
		return fmt.Errorf("logctx: lock %s: %w", path, err)
	}
	// os.File.Write issues one write(2) and continues after a short write.
	_, werr := f.Write(line)
	uerr := unlockFile(f)
	cerr := f.Close()
	switch {
	case werr != nil:
		return fmt.Errorf("logctx: append to %s: %w", path, werr)
	case uerr != nil:
		return fmt.Errorf("logctx: unlock %s: %w", path, uerr)
	case cerr != nil:
		return fmt.Errorf("logctx: close %s: %w", path, cerr)
	}
	return nil
}

// MaxEventLine bounds one line ReadEvents accepts.
const MaxEventLine = 64 << 20

// ReadEvents reads every event of a JSONL lifecycle file, holding a shared
// lock so no line is read mid-append. A line that is not an event object, or
// a last line without its newline, is an error naming path and line number.
func ReadEvents(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("logctx: %w", err)
	}
	defer f.Close()
	if err := lockFile(f, false); err != nil {
		return nil, fmt.Errorf("logctx: lock %s: %w", path, err)
	}
	defer unlockFile(f)
	return DecodeEvents(f, path)
}

// DecodeEvents decodes JSONL lifecycle events from r; name is used in errors.
// Blank lines are skipped.
func DecodeEvents(r io.Reader, name string) ([]Event, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []Event
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(br)
		if err == io.EOF && len(line) == 0 {
			return out, nil
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("logctx: %s:%d: %w", name, lineNo, err)
		}
		if err == io.EOF {
			return nil, fmt.Errorf("logctx: %s:%d: last line has no newline (torn write?)", name, lineNo)
		}
		line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ev, err := decodeEvent(line)
		if err != nil {
			return nil, fmt.Errorf("logctx: %s:%d: %w", name, lineNo, err)
		}
		out = append(out, ev)
	}
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > MaxEventLine {
			return nil, fmt.Errorf("line longer than %d bytes", MaxEventLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return buf, err
	}
}

func decodeEvent(line []byte) (Event, error) {
	v, err := decodeJSONValue(line)
	if err != nil {
		return Event{}, fmt.Errorf("not JSON: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return Event{}, fmt.Errorf("want a JSON object, got %s", jsonKind(v))
	}
	var ev Event
	var isStr bool
	if ev.Schema, isStr = m["schema"].(string); !isStr {
		return Event{}, errors.New(`missing or non-string "schema"`)
	}
	if ev.Time, isStr = m["time"].(string); !isStr {
		return Event{}, errors.New(`missing or non-string "time"`)
	}
	if ev.Event, isStr = m["event"].(string); !isStr || ev.Event == "" {
		return Event{}, errors.New(`missing or empty "event"`)
	}
	pid, ok := m["pid"].(int64)
	if !ok || pid < 0 || pid > 1<<31 {
		return Event{}, errors.New(`missing or invalid "pid"`)
	}
	ev.PID = int(pid)
	if h, present := m["host"]; present {
		if ev.Host, isStr = h.(string); !isStr {
			return Event{}, errors.New(`non-string "host"`)
		}
	}
	if c, present := m["context"]; present {
		cm, ok := c.(map[string]any)
		if !ok {
			return Event{}, errors.New(`"context" is not an object`)
		}
		ev.Context = Fields(cm)
	}
	if d, present := m["data"]; present {
		dm, ok := d.(map[string]any)
		if !ok {
			return Event{}, errors.New(`"data" is not an object`)
		}
		ev.Data = dm
	}
	return ev, nil
}
