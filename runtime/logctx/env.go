package logctx

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Environment variables read by this package.
const (
	// EnvLevel sets the log level: debug, info, warn (warning), error,
	// critical, or a number (slog levels: -4 debug, 0 info, 4 warn, 8 error).
	EnvLevel = "WORLDFOUNDRY_LOG_LEVEL"
	// EnvFormat sets the output format: text or json.
	EnvFormat = "WORLDFOUNDRY_LOG_FORMAT"
	// EnvContext carries the parent's correlation fields to a child process
	// as one JSON object. Only structured fields travel: never handlers,
	// writers or captured output.
	EnvContext = "WORLDFOUNDRY_LOG_CONTEXT"
)

// EncodeEnv returns the correlation fields that apply to ctx (process fields
// overlaid with ctx's fields) as the JSON object a child expects in
// EnvContext. It returns "" when there are no fields.
func EncodeEnv(ctx context.Context) string {
	f := FromContext(ctx)
	if len(f) == 0 {
		return ""
	}
	b, err := json.Marshal(map[string]any(f))
	if err != nil {
		// Unreachable: normalised values are all JSON-encodable. Keep the
		// child's environment well-formed anyway.
		return ""
	}
	return string(b)
}

// AppendEnv returns env (a list of KEY=VALUE entries, as in os/exec) with
// EnvContext set to EncodeEnv(ctx), replacing any EnvContext entry already in
// env. With no fields, EnvContext is removed so the child does not inherit
// stale fields. env itself is not modified.
func AppendEnv(env []string, ctx context.Context) []string {
	out := make([]string, 0, len(env)+1)
	prefix := EnvContext + "="
	for _, kv := range env {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	if v := EncodeEnv(ctx); v != "" {
		out = append(out, prefix+v)
	}
	return out
}

// DecodeEnv parses an EnvContext value. An empty (or all-space) value gives
// no fields. Anything but one JSON object is an error naming the variable.
func DecodeEnv(value string) (Fields, error) {
	if strings.TrimSpace(value) == "" {
		return Fields{}, nil
	}
	v, err := decodeJSONValue([]byte(value))
	if err != nil {
		return nil, fmt.Errorf("logctx: %s is not valid JSON (%v); want one object such as {\"run_id\":\"r1\"}", EnvContext, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("logctx: %s must be a JSON object such as {\"run_id\":\"r1\"}, got %s", EnvContext, jsonKind(v))
	}
	out := Fields{}
	for k, x := range m {
		if k == "" {
			return nil, fmt.Errorf("logctx: %s has an empty field name", EnvContext)
		}
		out[k] = x
	}
	return out, nil
}

// RestoreFromEnv reads EnvContext from the process environment and makes its
// fields the process fields, so every record of this (child) process carries
// them. It returns the restored fields. On error the process fields are left
// unchanged. Configure calls it; call it directly only when not using
// Configure.
func RestoreFromEnv() (Fields, error) {
	f, err := DecodeEnv(os.Getenv(EnvContext))
	if err != nil {
		return nil, err
	}
	SetProcessFields(f)
	return ProcessFields(), nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}
