package spec

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
)

// Number is a number from a manifest, kept exactly as written ("17",
// "9007199254740993", "0.5", "1e3"), so that an integer bound such as
// minimum: 9007199254740993 is compared exactly with int64 values however
// large. Its JSON form is the number itself.
type Number string

// NumberOf returns the Number of an integer.
func NumberOf(n int64) Number { return Number(strconv.FormatInt(n, 10)) }

// FloatNumber returns the shortest Number that reads back as f.
func FloatNumber(f float64) Number { return Number(strconv.FormatFloat(f, 'g', -1, 64)) }

// rat returns n's exact value, or nil when n is not a number.
func (n Number) rat() *big.Rat {
	if !json.Valid([]byte(n)) || n == "" || (n[0] != '-' && (n[0] < '0' || n[0] > '9')) {
		return nil
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return nil
	}
	return r
}

// Valid reports whether n is a JSON number.
func (n Number) Valid() bool { return n.rat() != nil }

// Float64 returns n as the nearest float64 (±Inf beyond its range, NaN when
// n is not a number).
func (n Number) Float64() float64 {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil && f == 0 {
		return math.NaN()
	}
	return f
}

// Int64 returns n's value when it is an integer that fits in int64 ("8.0"
// and "1e3" count as integers).
func (n Number) Int64() (int64, bool) {
	r := n.rat()
	if r == nil || !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}

// IsInteger reports whether n is an integer, of any size.
func (n Number) IsInteger() bool {
	r := n.rat()
	return r != nil && r.IsInt()
}

// Cmp compares n with m exactly: -1, 0 or +1. A value that is not a number
// sorts below every number.
func (n Number) Cmp(m Number) int {
	a, b := n.rat(), m.rat()
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	return a.Cmp(b)
}

// CmpInt compares n with the integer i exactly: -1, 0 or +1.
func (n Number) CmpInt(i int64) int {
	a := n.rat()
	if a == nil {
		return -1
	}
	return a.Cmp(new(big.Rat).SetInt64(i))
}

// IntBounds returns the integer range [lo, hi] that a bound of n allows for
// int64 values: for a minimum, the smallest int64 ≥ n (ok false when none
// is); for a maximum, the largest int64 ≤ n (ok false when none is).
func (n Number) IntBounds(minimum bool) (v int64, ok bool) {
	r := n.rat()
	if r == nil {
		return 0, false
	}
	q := new(big.Int)
	if minimum {
		// ceil(r)
		q.Neg(r.Num())
		q.Div(q, r.Denom()) // floor(-r), Euclidean for a positive divisor
		q.Neg(q)
	} else {
		q.Div(r.Num(), r.Denom()) // floor(r)
	}
	switch {
	case q.IsInt64():
		return q.Int64(), true
	case q.Sign() < 0 && minimum:
		return math.MinInt64, true // every int64 is above
	case q.Sign() > 0 && !minimum:
		return math.MaxInt64, true // every int64 is below
	}
	return 0, false // no int64 is in range
}

// String returns n as written.
func (n Number) String() string { return string(n) }

// MarshalJSON writes n as a JSON number; a Number that is not one is an error.
func (n Number) MarshalJSON() ([]byte, error) {
	if !n.Valid() {
		return nil, fmt.Errorf("runtime.Number %q is not a number", string(n))
	}
	return []byte(n), nil
}

// UnmarshalJSON reads a JSON number, keeping its text.
func (n *Number) UnmarshalJSON(b []byte) error {
	if !Number(b).Valid() {
		return fmt.Errorf("%s is not a number", b)
	}
	*n = Number(b)
	return nil
}
