package proc

import (
	"os"
	"strings"
	"testing"
)

func TestCUDAVisibleDevices(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	cases := []struct {
		device    string
		inherited *string
		noMap     bool
		def       string // CUDAOptions.DefaultCUDA
		want      string
		wantOK    bool
		wantErr   string
	}{
		// The seed's None / empty device: no value, no error.
		{"", nil, false, "", "", false, ""},
		{"  ", s("0,1"), false, "", "", false, ""},
		{"cpu", nil, false, "", "", false, ""},
		{"cpu", s("0,1"), false, "", "", false, ""},
		{"mps", nil, false, "", "", false, ""},
		// Bare cuda: the inherited list unchanged, else default_cuda.
		{"cuda", s("2,3"), false, "", "2,3", true, ""},
		{"cuda", s("2,3"), true, "", "2,3", true, ""},
		{"cuda", nil, false, "", "0", true, ""},
		{"cuda", nil, false, "3", "3", true, ""},
		{" CUDA ", nil, false, "", "0", true, ""},
		{"cuda", s(""), false, "", "", false, "set but empty"},
		// cuda:N: a local index into the inherited list.
		{"cuda:0", nil, false, "", "0", true, ""},
		{"cuda:7", nil, false, "", "7", true, ""},
		{"CUDA:0", nil, false, "", "0", true, ""},
		{" cuda:1 ", s("4,5,6"), false, "", "5", true, ""},
		{"cuda:2", s("4, 5 ,6"), false, "", "6", true, ""},
		{"cuda:0", s("GPU-8f3e,GPU-11aa"), false, "", "GPU-8f3e", true, ""},
		{"cuda:3", s("4,5,6"), true, "", "3", true, ""},
		// Errors where the seed answers None or the unmapped index.
		{"cuda:3", s("4,5,6"), false, "", "", false, "out of range"},
		{"cuda:0", s(""), false, "", "", false, "empty"},
		{"cuda:1", s("0,,1"), false, "", "", false, "empty entry"},
		{"cuda:-1", nil, false, "", "", false, "non-negative"},
		{"cuda:", nil, false, "", "", false, "empty device index"},
		{"cuda:1x", nil, false, "", "", false, "non-negative"},
		{"cuda:99999999999999999999", nil, false, "", "", false, "out of range"},
		{"gpu:0", nil, false, "", "", false, "unknown device"},
		{"0,1", nil, false, "", "", false, "unknown device"},
		{"cpu:x", nil, false, "", "", false, "non-negative"},
	}
	for _, c := range cases {
		got, ok, err := cudaVisible(c.device, CUDAOptions{Inherited: c.inherited, NoMap: c.noMap, DefaultCUDA: c.def})
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q (inherited %v): err = %v; want one containing %q", c.device, deref(c.inherited), err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want || ok != c.wantOK {
			t.Errorf("%q (inherited %v, noMap %v, default %q) = %q, %v, %v; want %q, %v", c.device, deref(c.inherited), c.noMap, c.def, got, ok, err, c.want, c.wantOK)
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
	// Bare cuda: the env's own list, else one device (default_cuda "0"),
	// so a child never sees every GPU of the host by accident.
	env, err = WithCUDAVisibleDevices([]string{"A=1", EnvCUDAVisibleDevices + "=6,7"}, "cuda", CUDAOptions{})
	if err != nil || strings.Join(env, " ") != "A=1 "+EnvCUDAVisibleDevices+"=6,7" {
		t.Errorf("bare cuda under 6,7: %v, %v", env, err)
	}
	env, err = WithCUDAVisibleDevices([]string{"A=1"}, "cuda", CUDAOptions{})
	if err != nil || strings.Join(env, " ") != "A=1 "+EnvCUDAVisibleDevices+"=0" {
		t.Errorf("bare cuda, nothing inherited: %v, %v", env, err)
	}
	t.Setenv(EnvCUDAVisibleDevices, "")
	os.Unsetenv(EnvCUDAVisibleDevices)
	if v, ok, err := CUDAVisibleDevices("cuda", CUDAOptions{DefaultCUDA: "2"}); v != "2" || !ok || err != nil {
		t.Errorf("bare cuda with DefaultCUDA 2 = %q, %v, %v", v, ok, err)
	}
	if _, err := WithCUDAVisibleDevices([]string{EnvCUDAVisibleDevices + "=0"}, "cuda:1", CUDAOptions{}); err == nil {
		t.Error("index past the env's list accepted")
	}
}

func TestEnvHelpers(t *testing.T) {
	t.Parallel()
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
