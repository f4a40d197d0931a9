package cache

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/worldfoundry/wfgen/internal/enginetest"
)

func TestPutFlushGet(t *testing.T) {
	dir := t.TempDir()
	c := Open(dir, [32]byte{1})
	k := c.Key([]byte("input"))
	if _, ok := c.Get(k); ok {
		t.Fatal("hit in an empty cache")
	}
	s := SumOf([]byte("output"))
	c.Put(k, s)
	if got, ok := c.Get(k); !ok || got != s {
		t.Fatalf("Get before Flush = %x, %v", got, ok)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	// A new run (a new Cache value) reads the index back.
	again := Open(dir, [32]byte{1})
	if got, ok := again.Get(k); !ok || got != s {
		t.Fatalf("Get after reopening = %x, %v", got, ok)
	}
	// Another generator build never sees the entry.
	other := Open(dir, [32]byte{2})
	if _, ok := other.Get(k); ok {
		t.Error("entry visible to another generator build")
	}
	if c.Key([]byte("input")) == c.Key([]byte("inpuT")) {
		t.Error("different inputs share a key")
	}
}

func TestCorruptOrMissingIsAMiss(t *testing.T) {
	dir := t.TempDir()
	c := Open(dir, [32]byte{})
	k := c.Key([]byte("x"))
	c.Put(k, SumOf(nil))
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.index(), []byte("garbage\nzz 11\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := Open(dir, [32]byte{}).Get(k); ok {
		t.Error("corrupt index gave a hit")
	}
	var nilCache *Cache
	nilCache.Put(k, Sum{})
	if _, ok := nilCache.Get(k); ok || nilCache.Flush() != nil {
		t.Error("nil cache is not a no-op")
	}
	// An unusable folder only makes Flush fail.
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := Open(filepath.Join(dir, "file"), [32]byte{})
	bad.Put(k, Sum{})
	if err := bad.Flush(); err == nil {
		t.Error("Flush into a file succeeded")
	}
}

func TestPruneOldBuilds(t *testing.T) {
	dir := t.TempDir()
	old := Open(dir, [32]byte{9})
	old.Put(old.Key([]byte("a")), Sum{})
	if err := old.Flush(); err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-2 * MaxAge)
	if err := os.Chtimes(old.index(), long, long); err != nil {
		t.Fatal(err)
	}
	cur := Open(dir, [32]byte{1})
	cur.Put(cur.Key([]byte("b")), Sum{})
	if err := cur.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old.index()); !os.IsNotExist(err) {
		t.Error("an unused old index was kept")
	}
	if _, err := os.Stat(cur.index()); err != nil {
		t.Error("the current index was removed")
	}
}

func TestDefaultHonoursEnv(t *testing.T) {
	t.Setenv(Env, "off")
	if Default() != nil {
		t.Error("WFGEN_CACHE=off did not disable the cache")
	}
	dir := t.TempDir()
	t.Setenv(Env, dir)
	c := Default()
	if c == nil || c.dir != dir {
		t.Fatalf("Default() = %+v", c)
	}
	exe, _ := os.Executable()
	if sum, _ := FileSum(exe); sum != c.gen {
		t.Error("generator identity is not the executable's hash")
	}
}

// A named pipe where the index belongs is a miss, not a blocking read.
func TestPipeIndexIsAMiss(t *testing.T) {
	dir := t.TempDir()
	c := Open(dir, [32]byte{3})
	if err := os.MkdirAll(filepath.Dir(c.index()), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(c.index(), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan bool, 1)
	go func() { _, ok := c.Get(c.Key([]byte("x"))); done <- ok }()
	if enginetest.Receive(t, "Get (blocked on a named pipe?)", done) {
		t.Error("hit in a pipe")
	}
}
