package main

import "testing"

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"1048576": 1 << 20, "2GiB": 2 << 30, "2gi": 2 << 30, "512MiB": 512 << 20, "512 MiB": 512 << 20,
		"1.5G": 1_500_000_000, "1.5GB": 1_500_000_000, "10kB": 10_000, "3Ki": 3072, "1TiB": 1 << 40, "7B": 7,
	} {
		got, err := parseBytes(in)
		if err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "2XB", "-1", "1e99TiB", "two"} {
		if got, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", in, got)
		}
	}
}
