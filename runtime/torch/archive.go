package torch

import (
	"archive/zip"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
)

// maxMetaEntry bounds the size of one metadata entry (pickles, code, debug
// info) checkArchive reads; real ones are kilobytes to a few megabytes.
const maxMetaEntry = 256 << 20

// deflateMaxRatio bounds the uncompressed/compressed ratio of a deflate
// stream (the format's limit is about 1032:1).
const deflateMaxRatio = 1100

// checkArchive checks that path is a well-formed TorchScript zip archive
// before libtorch reads it. libtorch 1.13 trusts sizes and does not verify
// checksums, so a corrupt archive can make it allocate tens of gigabytes
// (found by FuzzLoad: a one-byte change in a compressed debug pickle took
// 21 GB and 80 s before failing). This check reads the zip directory and
// every metadata entry (pickles, code, debug info, version), verifying their
// CRC-32; tensor data records are not read, so its cost does not grow with
// the weights. It cannot make an untrusted archive safe: TorchScript is
// code, load only archives you trust.
func checkArchive(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(f, st.Size())
	if err != nil {
		return fmt.Errorf("not a TorchScript archive (want the zip written by torch.jit.save): %w", err)
	}
	size := uint64(st.Size())
	hasData := false
	for _, e := range zr.File {
		if e.CompressedSize64 > size {
			return fmt.Errorf("corrupt archive: entry %q claims %d bytes in a %d-byte file", e.Name, e.CompressedSize64, size)
		}
		switch e.Method {
		case zip.Store:
			if e.UncompressedSize64 != e.CompressedSize64 {
				return fmt.Errorf("corrupt archive: stored entry %q has sizes %d and %d", e.Name, e.UncompressedSize64, e.CompressedSize64)
			}
		case zip.Deflate:
			if e.UncompressedSize64 > deflateMaxRatio*e.CompressedSize64+1024 {
				return fmt.Errorf("corrupt archive: entry %q claims %d bytes from %d compressed", e.Name, e.UncompressedSize64, e.CompressedSize64)
			}
		default:
			return fmt.Errorf("corrupt archive: entry %q uses compression method %d", e.Name, e.Method)
		}
		if strings.HasSuffix(e.Name, "/data.pkl") {
			hasData = true
		}
		if isTensorRecord(e.Name) {
			continue
		}
		if e.UncompressedSize64 > maxMetaEntry {
			return fmt.Errorf("archive entry %q is %d bytes, more than the %d-byte limit for metadata", e.Name, e.UncompressedSize64, maxMetaEntry)
		}
		if err := verifyEntry(e); err != nil {
			return fmt.Errorf("corrupt archive: entry %q: %w", e.Name, err)
		}
	}
	if !hasData {
		return errors.New("not a TorchScript archive: no data.pkl record")
	}
	return nil
}

// isTensorRecord reports whether name is a tensor storage record
// ("<archive>/data/<key>" or "<archive>/constants/<key>").
func isTensorRecord(name string) bool {
	i := strings.IndexByte(name, '/')
	if i < 0 {
		return false
	}
	rest := name[i+1:]
	return strings.HasPrefix(rest, "data/") || strings.HasPrefix(rest, "constants/")
}

// verifyEntry reads one entry to its end; archive/zip checks the length and
// the CRC-32 there.
func verifyEntry(e *zip.File) error {
	r, err := e.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	h := crc32.NewIEEE()
	n, err := io.Copy(h, io.LimitReader(r, int64(e.UncompressedSize64)+1))
	if err != nil {
		return err
	}
	if uint64(n) != e.UncompressedSize64 {
		return fmt.Errorf("%d bytes, header says %d", n, e.UncompressedSize64)
	}
	if e.CRC32 != 0 && h.Sum32() != e.CRC32 {
		return zip.ErrChecksum
	}
	return nil
}
