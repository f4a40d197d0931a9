package device

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/engine"
)

func TestScaleBatchSize(t *testing.T) {
	cases := []struct {
		def     int
		freeGiB float64
		want    int
	}{
		{16, 24, 16},   // the reference
		{16, 23, 16},   // a 24 GiB card with a little in use
		{16, 22, 16},   // band edge
		{16, 21.9, 10}, // 16*21.9/32 = 10.95
		{16, 16, 8},    // half of the margin-scaled reference
		{16, 8, 4},     //
		{16, 1, 1},     // never below 1
		{16, 0, 1},     //
		{1, 4, 1},      //
		{16, 40, 16},   // 40/48 GB cards: no scale-up below the 80 GB class
		{16, 69.9, 16},
		{16, 70, 32},    // 80 GB class, much in use
		{16, 78.5, 48},  // 80 GB card: 3 ×
		{16, 141, 80},   // H200: 5 ×
		{16, 1000, 128}, // capped at 8 ×
		{0, 24, 1},      // def below 1 counts as 1
	}
	for _, tc := range cases {
		if got := ScaleBatchSize(tc.def, uint64(tc.freeGiB*gib)); got != tc.want {
			t.Errorf("ScaleBatchSize(%d, %.1f GiB) = %d, want %d", tc.def, tc.freeGiB, got, tc.want)
		}
	}
	if got := ScaleBatchSize(1<<62, 100*gib); got != 1<<62 {
		t.Errorf("overflowing scale-up = %d, want def", got)
	}
}

func TestScaleBatchSizeIsMonotonic(t *testing.T) {
	for _, def := range []int{1, 3, 16, 64} {
		prev := 0
		for mib := uint64(0); mib <= 300*1024; mib += 256 {
			n := ScaleBatchSize(def, mib<<20)
			if n < prev {
				t.Fatalf("def %d: %d MiB free gives %d, less than %d for less memory", def, mib, n, prev)
			}
			prev = n
		}
	}
}

func TestScopeEnv(t *testing.T) {
	for in, want := range map[string]string{
		"":              "",
		"text-encoder":  "WORLDFOUNDRY_BATCH_SIZE_TEXT_ENCODER",
		"vae.decode":    "WORLDFOUNDRY_BATCH_SIZE_VAE_DECODE",
		"Clip_L14":      "WORLDFOUNDRY_BATCH_SIZE_CLIP_L14",
		"image to text": "WORLDFOUNDRY_BATCH_SIZE_IMAGE_TO_TEXT",
	} {
		if got := ScopeEnv(in); got != want {
			t.Errorf("ScopeEnv(%q) = %q, want %q", in, got, want)
		}
	}
}

func writeMeminfo(t *testing.T, content string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	old := memInfoPath
	memInfoPath = p
	t.Cleanup(func() { memInfoPath = old })
}

const meminfo8G = "MemTotal:       24000000 kB\nMemFree:         1000000 kB\nMemAvailable:    8388608 kB\nBuffers:          100 kB\n"

func TestChooseBatchSize(t *testing.T) {
	t.Setenv(EnvLocalRank, "")
	writeMeminfo(t, meminfo8G) // 8 GiB available
	eng := &enginetest.Engine{GPUs: []engine.DeviceInfo{enginetest.GPU(0, 8, 0, 78.5), enginetest.GPU(1, 7, 5, 12), enginetest.GPU(2, 8, 6, 23)}, Current: 2}
	cases := []struct {
		name          string
		env           map[string]string
		eng           engine.Engine
		device, scope string
		def           int
		want          int
		src           Source
		err           string
	}{
		{"80 GB card", nil, eng, "cuda:0", "", 16, 48, FromMemory, ""},
		{"12 GiB free", nil, eng, "cuda:1", "", 16, 6, FromMemory, ""},
		{"bare cuda is current device", nil, eng, "cuda", "", 16, 16, FromMemory, ""},
		{"cpu scales down", nil, eng, "cpu", "", 16, 4, FromMemory, ""},
		{"cpu, small default", nil, nil, "cpu", "", 2, 1, FromMemory, ""},
		{"other device uses default", nil, nil, "mps", "", 16, 16, FromDefault, ""},
		{"global env beats memory", map[string]string{EnvBatchSize: "7"}, eng, "cuda:0", "vae", 16, 7, FromGlobalEnv, ""},
		{"scoped env beats global", map[string]string{EnvBatchSize: "7", "WORLDFOUNDRY_BATCH_SIZE_VAE": "3"}, eng, "cuda:0", "vae", 16, 3, FromScopedEnv, ""},
		{"other scope ignored", map[string]string{"WORLDFOUNDRY_BATCH_SIZE_TEXT": "3"}, eng, "cuda:0", "vae", 16, 48, FromMemory, ""},
		{"empty env is unset", map[string]string{EnvBatchSize: " ", "WORLDFOUNDRY_BATCH_SIZE_VAE": ""}, eng, "cuda:1", "vae", 16, 6, FromMemory, ""},
		{"env needs no engine", map[string]string{EnvBatchSize: "5"}, nil, "cuda:9", "", 16, 5, FromGlobalEnv, ""},
		{"bad global env", map[string]string{EnvBatchSize: "lots"}, eng, "cuda:0", "", 16, 0, "", `WORLDFOUNDRY_BATCH_SIZE="lots" is not a positive integer`},
		{"zero scoped env", map[string]string{"WORLDFOUNDRY_BATCH_SIZE_VAE": "0"}, eng, "cuda:0", "vae", 16, 0, "", `WORLDFOUNDRY_BATCH_SIZE_VAE="0"`},
		{"bad default", nil, eng, "cuda:0", "", 0, 0, "", "default 0 is not positive"},
		{"cuda without engine", nil, nil, "cuda", "", 16, 0, "", "no CUDA device is available"},
		{"bad device", nil, eng, "gpu", "", 16, 0, "", "is not a device"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvBatchSize, "")
			t.Setenv("WORLDFOUNDRY_BATCH_SIZE_VAE", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			got, err := ChooseBatchSize(tc.eng, tc.device, tc.scope, tc.def)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("= %+v, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got.Size != tc.want || got.Source != tc.src || got.Detail == "" {
				t.Fatalf("= %+v, %v; want size %d from %s", got, err, tc.want, tc.src)
			}
		})
	}
}

func TestChooseBatchSizeCPUNeverScalesUp(t *testing.T) {
	t.Setenv(EnvBatchSize, "")
	writeMeminfo(t, "MemAvailable:   209715200 kB\n") // 200 GiB
	got, err := ChooseBatchSize(nil, "cpu", "", 16)
	if err != nil || got.Size != 16 || got.Source != FromMemory {
		t.Errorf("= %+v, %v; want 16 (the default, not 8 ×)", got, err)
	}
	if !strings.Contains(got.Detail, "200.0 GiB available") {
		t.Errorf("detail %q does not give the memory", got.Detail)
	}
}

func TestChooseBatchSizeCPUWithoutMeminfo(t *testing.T) {
	t.Setenv(EnvBatchSize, "")
	old := memInfoPath
	memInfoPath = filepath.Join(t.TempDir(), "missing")
	defer func() { memInfoPath = old }()
	got, err := ChooseBatchSize(nil, "cpu", "", 12)
	if err != nil || got.Size != 12 || got.Source != FromDefault {
		t.Errorf("= %+v, %v; want the default 12", got, err)
	}
}

func TestRealProcMeminfo(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/meminfo is Linux only")
	}
	n, err := readMemAvailable("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	if n < 1<<20 || n > 1<<50 {
		t.Errorf("MemAvailable = %d bytes, implausible", n)
	}
}

func TestParseMemAvailable(t *testing.T) {
	if n, err := ParseMemAvailable(strings.NewReader(meminfo8G)); err != nil || n != 8*gib {
		t.Errorf("= %d, %v; want 8 GiB", n, err)
	}
	for in, want := range map[string]string{
		"MemTotal: 1 kB\n":                   "no MemAvailable line",
		"MemAvailable: 12 MB\n":              "malformed MemAvailable line",
		"MemAvailable: 12\n":                 "malformed",
		"MemAvailable: -5 kB\n":              `"-5" is not a size`,
		"MemAvailable: 99999999999999999 kB": "is not a size",
		"":                                   "no MemAvailable line",
	} {
		if _, err := ParseMemAvailable(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseMemAvailable(%q) err = %v, want %q", in, err, want)
		}
	}
}

func FuzzParseMemAvailable(f *testing.F) {
	f.Add(meminfo8G)
	f.Add("MemAvailable: 12 MB\n")
	f.Add("MemAvailable:\n")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseMemAvailable(strings.NewReader(s))
		if err == nil && !strings.Contains(s, "MemAvailable:") {
			t.Fatalf("accepted %q without a MemAvailable line (= %d)", s, n)
		}
		if err == nil && n%1024 != 0 {
			t.Fatalf("%d bytes is not whole kB", n)
		}
	})
}
