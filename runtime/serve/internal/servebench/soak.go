package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/worldfoundry/wfgen/gen/validate"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/oip"

	"github.com/worldfoundry/wfgen/runtime/serve/internal/benchproc"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// soak runs clients against wfserve -batch (batch-invariant, its default)
// for d with the text encoder, whose answers depend on the batch size, and
// checks every answer bit for bit against an in-process client in the same
// mode: an answer must not depend on how the server grouped requests. It
// prints the requests, errors, mismatches and the server's RSS.
func soak(bin, dir, root string, env []string, clients int, d time.Duration, ntok int) error {
	m := allModels[1] // the text encoder
	f, diags, err := validate.File(filepath.Join(root, m.manifest))
	if err != nil || len(diags) > 0 {
		return fmt.Errorf("%s: %v %v", m.manifest, err, diags)
	}
	in, err := client.New(f.Spec, client.WithCheckpointRoot(dir), client.WithDevice("cpu"), client.WithBatchInvariant())
	if err != nil {
		return err
	}
	defer in.Close()
	const distinct = 256
	bodies := make([][]byte, distinct)
	want := make([][]byte, distinct)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range bodies {
		ids := make([]int64, ntok)
		parts := make([]string, ntok)
		for j := range ids {
			ids[j] = int64(r.IntN(m.vocab))
			parts[j] = strconv.FormatInt(ids[j], 10)
		}
		bodies[i] = []byte(fmt.Sprintf(`{"inputs":[{"name":"tokens","datatype":"INT64","shape":[%d],"data":[%s]}]}`, ntok, strings.Join(parts, ",")))
		out, err := in.Run(context.Background(), "embed", map[string]any{"tokens": tensor.FromInt64(ids, int64(ntok))}, nil)
		if err != nil {
			return err
		}
		want[i] = out["embedding"].(*tensor.Tensor).Data
	}
	w, err := benchproc.StartWfserve(bin, env, "-checkpoint-root", dir, "-device", "cpu", "-batch", filepath.Join(root, m.manifest))
	if err != nil {
		return err
	}
	srv := &server{name: "wfserve -batch", url: w.URL, cmd: w.Cmd}
	defer benchproc.Stop(srv.cmd)
	rss0 := rss(srv.cmd.Process.Pid)
	task, _ := f.Spec.Task("embed")
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var requests, failed, mismatched atomic.Int64
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(end); i += clients {
				k := i % distinct
				resp, err := hc.Post(srv.url+"/v2/models/"+m.name+"/infer", "application/json", bytes.NewReader(bodies[k]))
				requests.Add(1)
				if err != nil {
					failed.Add(1)
					continue
				}
				var ans oip.InferenceResponse
				err = json.NewDecoder(resp.Body).Decode(&ans)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					failed.Add(1)
					continue
				}
				out, err := oip.DecodeOutputs(task, ans.Outputs)
				if err != nil {
					failed.Add(1)
					continue
				}
				if !bytes.Equal(out["embedding"].(*tensor.Tensor).Data, want[k]) {
					mismatched.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("\nsoak: %s, %d clients for %v through wfserve -batch (batch-invariant): %d requests, %d failed, %d not bit-equal to the in-process client (batch-invariant); server RSS %d MiB at the start, %d MiB at the end\n",
		m.about, clients, d, requests.Load(), failed.Load(), mismatched.Load(), rss0>>20, rss(srv.cmd.Process.Pid)>>20)
	if failed.Load() > 0 || mismatched.Load() > 0 {
		return fmt.Errorf("soak: %d failed, %d mismatched", failed.Load(), mismatched.Load())
	}
	return nil
}

// rss returns a process's resident memory in bytes (0 when unknown).
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
