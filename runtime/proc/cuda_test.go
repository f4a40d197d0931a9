package proc

import (
	"strings"
	"testing"
)

func TestCUDAVisibleDevices(t *testing.T) {
	s := func(v string) *string { return &v }
	cases := []struct {
		device    string
		inherited *string
		noMap     bool
		want      string
		wantOK    bool
		wantErr   string
	}{
		{"cpu", nil, false, "", false, ""},
		{"cpu", s("0,1"), false, "", false, ""},
		{"mps", nil, false, "", false, ""},
		{"cuda", s("2,3"), false, "", false, ""},
		{"cuda:0", nil, false, "0", true, ""},
		{"cuda:7", nil, false, "7", true, ""},
		{" cuda:1 ", s("4,5,6"), false, "5", true, ""},
		{"cuda:2", s("4, 5 ,6"), false, "6", true, ""},
		{"cuda:0", s("GPU-8f3e,GPU-11aa"), false, "GPU-8f3e", true, ""},
		{"cuda:3", s("4,5,6"), true, "3", true, ""},
		{"cuda:3", s("4,5,6"), false, "", false, "out of range"},
		{"cuda:0", s(""), false, "", false, "empty"},
		{"cuda:1", s("0,,1"), false, "", false, "empty entry"},
		{"cuda:-1", nil, false, "", false, "non-negative"},
		{"cuda:", nil, false, "", false, "empty device index"},
		{"cuda:1x", nil, false, "", false, "non-negative"},
		{"cuda:99999999999999999999", nil, false, "", false, "out of range"},
		{"gpu:0", nil, false, "", false, "unknown device"},
		{"CUDA:0", nil, false, "", false, "unknown device"},
		{"", nil, false, "", false, "unknown device"},
		{"cpu:x", nil, false, "", false, "non-negative"},
	}
	for _, c := range cases {
		got, ok, err := cudaVisible(c.device, CUDAOptions{Inherited: c.inherited, NoMap: c.noMap})
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q (inherited %v): err = %v; want one containing %q", c.device, deref(c.inherited), err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want || ok != c.wantOK {
			t.Errorf("%q (inherited %v, noMap %v) = %q, %v, %v; want %q, %v", c.device, deref(c.inherited), c.noMap, got, ok, err, c.want, c.wantOK)
		}
	}
}

func deref(p *string) string {
	if p == nil {
		return "<unset>"
	}
	return "=" + *p
}

func TestCUDAVisibleDevicesFromEnvironment(t *testing.T) {
	t.Setenv(EnvCUDAVisibleDevices, "3,1")
	if v, ok, err := CUDAVisibleDevices("cuda:1", CUDAOptions{}); v != "1" || !ok || err != nil {
		t.Errorf("= %q, %v, %v", v, ok, err)
	}
	env, err := WithCUDAVisibleDevices([]string{"A=1", EnvCUDAVisibleDevices + "=6,7"}, "cuda:1", CUDAOptions{})
	if err != nil || strings.Join(env, " ") != "A=1 "+EnvCUDAVisibleDevices+"=7" {
		t.Errorf("WithCUDAVisibleDevices = %v, %v", env, err)
	}
	env, err = WithCUDAVisibleDevices([]string{"A=1"}, "cpu", CUDAOptions{})
	if err != nil || strings.Join(env, " ") != "A=1" {
		t.Errorf("cpu: %v, %v", env, err)
	}
	if _, err := WithCUDAVisibleDevices([]string{EnvCUDAVisibleDevices + "=0"}, "cuda:1", CUDAOptions{}); err == nil {
		t.Error("index past the env's list accepted")
	}
}

func TestEnvHelpers(t *testing.T) {
	env := []string{"A=1", "B=2", "A=3"}
	if v, ok := EnvValue(env, "A"); v != "3" || !ok {
		t.Errorf("EnvValue = %q, %v", v, ok)
	}
	if _, ok := EnvValue(env, "AB"); ok {
		t.Error("prefix matched")
	}
	if got := strings.Join(SetEnv(env, "A", "9"), " "); got != "B=2 A=9" {
		t.Errorf("SetEnv = %s", got)
	}
	if env[0] != "A=1" {
		t.Error("SetEnv modified its input")
	}
}
