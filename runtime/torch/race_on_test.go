//go:build race

package torch

// raceEnabled reports a -race build.
const raceEnabled = true
