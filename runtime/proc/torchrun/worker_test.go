package torchrun

import (
	"strings"
	"testing"
)

func lookupIn(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func goodEnv() map[string]string {
	return map[string]string{
		"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
		"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "GROUP_RANK": "1",
		"TORCHELASTIC_RESTART_COUNT": "2",
	}
}

func TestWorkerFrom(t *testing.T) {
	t.Parallel()
	w, err := WorkerFrom(lookupIn(goodEnv()))
	if err != nil {
		t.Fatal(err)
	}
	want := Worker{Rank: 3, WorldSize: 4, LocalRank: 1, LocalWorldSize: 2, GroupRank: 1, MasterAddr: "127.0.0.1", MasterPort: 29500, RestartCount: 2}
	if w != want {
		t.Errorf("WorkerFrom = %+v; want %+v", w, want)
	}
	bad := map[string]struct{ key, value, want string }{
		"missing rank":      {"RANK", "", "RANK is not set"},
		"rank past world":   {"RANK", "4", "outside WORLD_SIZE"},
		"negative":          {"LOCAL_RANK", "-1", "non-negative"},
		"text":              {"WORLD_SIZE", "four", "non-negative"},
		"local past local":  {"LOCAL_RANK", "2", "outside LOCAL_WORLD_SIZE"},
		"local world big":   {"LOCAL_WORLD_SIZE", "8", "exceeds"},
		"no master":         {"MASTER_ADDR", "", "MASTER_ADDR"},
		"port out of range": {"MASTER_PORT", "70000", "not a port"},
		"agent store":       {"TORCHELASTIC_USE_AGENT_STORE", "yes", "neither True nor False"},
	}
	for name, c := range bad {
		env := goodEnv()
		if c.value == "" {
			delete(env, c.key)
		} else {
			env[c.key] = c.value
		}
		if _, err := WorkerFrom(lookupIn(env)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v; want one containing %q", name, err, c.want)
		}
	}
	for v, want := range map[string]bool{"True": true, "False": false} {
		env := goodEnv()
		env["TORCHELASTIC_USE_AGENT_STORE"] = v
		if w, err := WorkerFrom(lookupIn(env)); err != nil || w.AgentStore != want {
			t.Errorf("TORCHELASTIC_USE_AGENT_STORE=%s: AgentStore %v, %v", v, w.AgentStore, err)
		}
	}
	if _, err := WorkerFromEnv(); err == nil {
		t.Error("WorkerFromEnv outside torchrun succeeded")
	}
}

func TestLocalDevice(t *testing.T) {
	t.Parallel()
	w := Worker{LocalRank: 1, LocalWorldSize: 2}
	for devices, want := range map[int]string{0: "cpu", 2: "cuda:1", 8: "cuda:1"} {
		if got, err := w.LocalDevice(devices); err != nil || got != want {
			t.Errorf("LocalDevice(%d) = %q, %v; want %q", devices, got, err, want)
		}
	}
	if _, err := w.LocalDevice(1); err == nil {
		t.Error("LOCAL_RANK 1 with one device accepted")
	}
}
