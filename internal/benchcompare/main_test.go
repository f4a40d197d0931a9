package main

import "testing"

func TestParse(t *testing.T) {
	out := []byte(`goos: linux
BenchmarkInterleaved/tiny-1x16-2         	      20	  12345 ns/op	      9600 go-ns/call	         1.244 go/cpp
BenchmarkEmbedBatchInterleaved-2   	       5	 623140020 ns/op	    117170 go-items/s	         2.006 go/py-slice-x
W20261203 a warning line
PASS
`)
	res := parse(out)
	if len(res) != 2 {
		t.Fatalf("%d results: %+v", len(res), res)
	}
	if res[0].name != "Interleaved/tiny-1x16" || res[0].metrics["go/cpp"] != 1.244 || res[0].metrics["go-ns/call"] != 9600 {
		t.Errorf("first: %+v", res[0])
	}
	if res[1].name != "EmbedBatchInterleaved" || res[1].metrics["go/py-slice-x"] != 2.006 {
		t.Errorf("second: %+v", res[1])
	}
}
