//go:build !unix

package logctx

import "os"

// lockFile is a no-op where flock(2) does not exist; appends then rely on
// O_APPEND (FILE_APPEND_DATA on Windows) alone.
func lockFile(*os.File, bool) error { return nil }

func unlockFile(*os.File) error { return nil }
