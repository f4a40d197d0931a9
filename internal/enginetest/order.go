package enginetest

import "math/rand/v2"

// RoundOrder is the order in which an interleaved benchmark runs its n
// columns in round r: a permutation drawn afresh for each round (the same
// for the same r on every run). A rotating order keeps each column behind
// the same one in every round, so a column that leaves state behind (two
// lanes' threads, Python's allocator) always slows the same other column;
// with a new order each round it slows each in turn.
func RoundOrder(r, n int) []int {
	return rand.New(rand.NewPCG(uint64(r), 0x1e47)).Perm(n)
}
