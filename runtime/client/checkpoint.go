package client

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/worldfoundry/wfgen/runtime/spec"
)

// CheckpointRootEnv names the environment variable holding the folder that
// relative checkpoint URIs are resolved against after the manifest's folder.
const CheckpointRootEnv = "WORLDFOUNDRY_CHECKPOINT_ROOT"

// ErrCheckpoint marks a checkpoint that cannot be found or fails verification.
var ErrCheckpoint = errors.New("checkpoint")

// ResolveCheckpoint returns the local file for ref. An absolute path (or a
// file:// URI) is used as is; a relative one is tried against manifestDir,
// then against root (or $WORLDFOUNDRY_CHECKPOINT_ROOT when root is ""). A
// URI with another scheme (hf://, s3://, https://) is refused with an error
// saying to download the file and pass its path: nothing is fetched at run
// time.
func ResolveCheckpoint(ref spec.InferenceCheckpointRef, manifestDir, root string) (string, error) {
	uri := ref.URI
	if rest, ok := strings.CutPrefix(uri, "file://"); ok {
		uri = rest
	}
	if i := strings.Index(uri, "://"); i > 0 {
		return "", fmt.Errorf("%w %q: remote URI scheme %q is not fetched at run time; download the file and pass its path (client.WithCheckpointPath), or give the manifest a relative uri that %s or client.WithCheckpointRoot resolves",
			ErrCheckpoint, ref.URI, uri[:i], CheckpointRootEnv)
	}
	if uri == "" {
		return "", fmt.Errorf("%w: role %q has an empty uri", ErrCheckpoint, ref.Role)
	}
	if filepath.IsAbs(uri) {
		if _, err := os.Stat(uri); err != nil {
			return "", fmt.Errorf("%w %q: %v", ErrCheckpoint, ref.URI, err)
		}
		return uri, nil
	}
	p, tried := findRelative(uri, manifestDir, root)
	switch {
	case p != "":
		return p, nil
	case len(tried) == 0:
		return "", fmt.Errorf("%w %q: relative uri with neither a manifest folder nor a checkpoint root (set %s)", ErrCheckpoint, ref.URI, CheckpointRootEnv)
	}
	return "", fmt.Errorf("%w %q not found (tried %s; set %s or pass a checkpoint path)", ErrCheckpoint, ref.URI, strings.Join(tried, ", "), CheckpointRootEnv)
}

// findRelative is the one rule by which a relative path of a manifest
// (a checkpoint uri, an op library) is found: joined to manifestDir, then
// to root (or $WORLDFOUNDRY_CHECKPOINT_ROOT when root is ""), the first
// regular file. It returns that file, or "" and the paths it tried.
func findRelative(rel, manifestDir, root string) (string, []string) {
	if root == "" {
		root = os.Getenv(CheckpointRootEnv)
	}
	var tried []string
	for _, dir := range []string{manifestDir, root} {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(rel))
		tried = append(tried, p)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", tried
}

// ErrOpLibrary marks an op library (a manifest's op_libraries entry) that
// cannot be found.
var ErrOpLibrary = errors.New("op library")

// ResolveOpLibrary returns the local file of an op library that a
// manifest's op_libraries names, as ResolveCheckpoint finds a checkpoint:
// an absolute path (or a file:// URI) is used as is; a relative one is
// tried against manifestDir, then against root (or
// $WORLDFOUNDRY_CHECKPOINT_ROOT when root is ""). Another URI scheme is
// refused: nothing is downloaded.
func ResolveOpLibrary(lib, manifestDir, root string) (string, error) {
	p := strings.TrimPrefix(lib, "file://")
	if scheme, _, ok := strings.Cut(p, "://"); ok {
		return "", fmt.Errorf("%w %q: a %s:// URI is not fetched; download the library and give its path", ErrOpLibrary, lib, scheme)
	}
	if strings.TrimSpace(p) == "" {
		return "", fmt.Errorf("%w: an empty path", ErrOpLibrary)
	}
	if filepath.IsAbs(p) {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w %q: %v", ErrOpLibrary, lib, err)
		}
		return p, nil
	}
	found, tried := findRelative(p, manifestDir, root)
	switch {
	case found != "":
		return found, nil
	case len(tried) == 0:
		return "", fmt.Errorf("%w %q: a relative path with neither a manifest folder nor a checkpoint root (set %s, or give an absolute path)", ErrOpLibrary, lib, CheckpointRootEnv)
	}
	return "", fmt.Errorf("%w %q not found (tried %s)", ErrOpLibrary, lib, strings.Join(tried, ", "))
}

// verified remembers files whose digest matched, by path, size and mtime, so
// a checkpoint is hashed once per process rather than on every load.
var verified sync.Map // verifyKey -> struct{}

type verifyKey struct {
	path  string
	size  int64
	mtime time.Time
	want  string
}

// skipHint is how a mismatch error says to load the file anyway.
const skipHint = "(corrupted or wrong file; to load it anyway, pass client.WithoutCheckpointVerification())"

// VerifyCheckpoint checks path against the size and sha256 that ref gives
// (either may be absent). A mismatch names the expected and found values
// and the option that skips the check (WithoutCheckpointVerification).
func VerifyCheckpoint(path string, ref spec.InferenceCheckpointRef) error {
	if ref.SHA256 == "" && ref.SizeBytes == 0 {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%w %s: %v", ErrCheckpoint, path, err)
	}
	if ref.SizeBytes != 0 && st.Size() != ref.SizeBytes {
		return fmt.Errorf("%w %s: size %d bytes, manifest says %d %s", ErrCheckpoint, path, st.Size(), ref.SizeBytes, skipHint)
	}
	if ref.SHA256 == "" {
		return nil
	}
	key := verifyKey{path, st.Size(), st.ModTime(), strings.ToLower(ref.SHA256)}
	if _, ok := verified.Load(key); ok {
		return nil
	}
	got, err := FileSHA256(path)
	if err != nil {
		return fmt.Errorf("%w %s: %v", ErrCheckpoint, path, err)
	}
	if got != key.want {
		return fmt.Errorf("%w %s: sha256 %s, manifest says %s %s", ErrCheckpoint, path, got, key.want, skipHint)
	}
	verified.Store(key, struct{}{})
	return nil
}

// FileSHA256 returns the lower-case hex sha256 of a file's contents.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		return "", &fs.PathError{Op: "sha256", Path: path, Err: errors.New("not a regular file")}
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkpointIdentity names the bytes of a loaded checkpoint for a stream's
// origin: "sha256:<hex>" when the manifest declares the digest and the
// file was verified against it, else "file:<absolute path>:<size>:<mtime
// in Unix nanoseconds>".
func checkpointIdentity(path string, ref spec.InferenceCheckpointRef, verified bool) (string, error) {
	if verified && ref.SHA256 != "" {
		return "sha256:" + strings.ToLower(ref.SHA256), nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	return fmt.Sprintf("file:%s:%d:%d", abs, st.Size(), st.ModTime().UnixNano()), nil
}
