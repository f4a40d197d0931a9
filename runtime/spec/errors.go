package spec

import "errors"

// ErrUnknownID means a family, variant or task id (or alias) is not known.
var ErrUnknownID = errors.New("unknown id")
