// Package cache remembers, for one build of the generator, the sha256 of
// the output it generated from each input. A regeneration whose inputs did
// not change can then verify the file on disk by its hash instead of
// generating it again, which makes a no-op "wfgen generate" cheap.
//
// The cache can only make a run slower, never wrong: an entry is used only
// when the file on disk hashes to the recorded sum, entries are keyed by
// the generator's own executable (any change to the generator misses), and
// a missing, unreadable or corrupt cache is the same as an empty one.
//
// Each generator build has one index file (<dir>/v1/<build>.idx, a line
// "key sum" per input) that is read once and written once per run.
package cache

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Env names the environment variable that sets the cache folder; the value
// "off" disables the cache.
const Env = "WFGEN_CACHE"

// MaxEntries bounds an index; the oldest entries are dropped beyond it.
const MaxEntries = 20000

// MaxAge is how long the index of another generator build is kept after
// its last use.
const MaxAge = 14 * 24 * time.Hour

// Key identifies one input for one generator build.
type Key [sha256.Size]byte

// Sum is the sha256 of an output.
type Sum [sha256.Size]byte

// Cache maps keys to output sums. It is safe for concurrent use.
type Cache struct {
	dir string
	gen [sha256.Size]byte

	mu      sync.Mutex
	loaded  bool
	order   []Key
	entries map[Key]Sum
	dirty   bool
}

// Open returns a cache in dir for the generator identified by gen (for
// example the sha256 of its executable).
func Open(dir string, gen [sha256.Size]byte) *Cache { return &Cache{dir: dir, gen: gen} }

// Default returns the cache the wfgen command uses: the folder $WFGEN_CACHE
// or <user cache folder>/wfgen, for the running executable. It returns nil
// (no caching) when the variable is "off" or the executable or folder is
// not available. It hashes the executable, so call it once per run.
func Default() *Cache {
	dir := os.Getenv(Env)
	if dir == "off" {
		return nil
	}
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return nil
		}
		dir = filepath.Join(base, "wfgen")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	gen, err := FileSum(exe)
	if err != nil {
		return nil
	}
	return Open(dir, gen)
}

// FileSum returns the sha256 of a file's contents.
func FileSum(path string) ([sha256.Size]byte, error) {
	var s [sha256.Size]byte
	f, err := os.Open(path)
	if err != nil {
		return s, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return s, err
	}
	copy(s[:], h.Sum(nil))
	return s, nil
}

// SumOf returns the sha256 of b.
func SumOf(b []byte) Sum { return sha256.Sum256(b) }

// Key returns the key of an input (any canonical encoding of it).
func (c *Cache) Key(input []byte) Key {
	h := sha256.New()
	h.Write(input)
	var k Key
	copy(k[:], h.Sum(nil))
	return k
}

func (c *Cache) index() string {
	return filepath.Join(c.dir, "v1", hex.EncodeToString(c.gen[:])+".idx")
}

// load reads the index once; c.mu is held.
func (c *Cache) load() {
	if c.loaded {
		return
	}
	c.loaded = true
	c.entries = map[Key]Sum{}
	b, err := readIndex(c.index())
	if err != nil {
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		ks, ss, ok := strings.Cut(sc.Text(), " ")
		var k Key
		var s Sum
		if !ok || len(ks) != 2*len(k) || len(ss) != 2*len(s) {
			continue
		}
		if _, err := hex.Decode(k[:], []byte(ks)); err != nil {
			continue
		}
		if _, err := hex.Decode(s[:], []byte(ss)); err != nil {
			continue
		}
		if _, dup := c.entries[k]; !dup {
			c.order = append(c.order, k)
		}
		c.entries[k] = s
	}
}

// readIndex reads an index file, refusing (without blocking) anything
// that is not a regular file or is far larger than MaxEntries lines.
func readIndex(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	return io.ReadAll(io.LimitReader(f, 2*MaxEntries*(4*sha256.Size+2)))
}

// Get returns the output sum recorded for k.
func (c *Cache) Get(k Key) (Sum, bool) {
	if c == nil {
		return Sum{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load()
	s, ok := c.entries[k]
	return s, ok
}

// Put records the output sum for k; Flush saves it.
func (c *Cache) Put(k Key, s Sum) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load()
	if old, ok := c.entries[k]; ok && old == s {
		return
	}
	if _, ok := c.entries[k]; !ok {
		c.order = append(c.order, k)
	}
	c.entries[k] = s
	c.dirty = true
}

// Flush writes the index when it changed (atomically: a concurrent run sees
// the old index or the new one) and removes the indexes of generator builds
// unused for MaxAge. Errors only mean a slower next run.
func (c *Cache) Flush() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return nil
	}
	if over := len(c.order) - MaxEntries; over > 0 {
		for _, k := range c.order[:over] {
			delete(c.entries, k)
		}
		c.order = c.order[over:]
	}
	var b bytes.Buffer
	for _, k := range c.order {
		s := c.entries[k]
		b.WriteString(hex.EncodeToString(k[:]))
		b.WriteByte(' ')
		b.WriteString(hex.EncodeToString(s[:]))
		b.WriteByte('\n')
	}
	p := c.index()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := p + "." + hex.EncodeToString(rnd[:]) + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return err
	}
	c.dirty = false
	c.prune(filepath.Dir(p), filepath.Base(p))
	return nil
}

// prune removes other builds' indexes (and stray temporary files) not
// modified for MaxAge.
func (c *Cache) prune(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Name() == keep || e.IsDir() {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > MaxAge {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
