package proc

import "strings"

// SetEnv returns a copy of env (KEY=VALUE entries, as in os/exec) in which
// key is set to value: every existing entry for key is removed and one entry
// appended. env is not modified.
func SetEnv(env []string, key, value string) []string {
	out := UnsetEnv(env, key)
	return append(out, key+"="+value)
}

// UnsetEnv returns a copy of env without any entry for key.
func UnsetEnv(env []string, key string) []string {
	prefix := key + "="
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	return out
}

// EnvValue returns the value of key in env; like os/exec, the last entry
// wins.
func EnvValue(env []string, key string) (string, bool) {
	prefix := key + "="
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], prefix); ok {
			return v, true
		}
	}
	return "", false
}
