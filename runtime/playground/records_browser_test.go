//go:build cgo

package playground_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/worldfoundry/wfgen/golden/records/output/goldenrecords"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/torch"
)

// recordSource gives the golden records family losses with one of their
// two keys for more than one image, and image i i+1 detections unless
// its first value is below -100.
const recordSource = `
def forward(self, x: Tensor) -> Tuple[Dict[str, Tensor], List[Dict[str, Tensor]]]:
    losses: Dict[str, Tensor] = {}
    if x.size(0) > 1:
        losses["bbox_regression"] = x.sum()
    detections: List[Dict[str, Tensor]] = []
    for i in range(x.size(0)):
        if bool(x[i, 0, 0] < -100.0):
            continue
        boxes = x[i, :i + 1]
        detections.append({"boxes": boxes, "labels": torch.argmax(boxes, dim=1), "scores": boxes.sum(dim=1)})
    return losses, detections

def heads(self, x: Tensor) -> Dict[str, Tensor]:
    return {"mean": x.mean(dim=0), "max": x.amax(dim=0)}
`

// TestBrowserRecords runs a detector's task on its playground page: the
// record is one figure, a table of its keys (one absent), each dict of
// the record_list a figure of its own with the same table; a record
// without keys says so, an empty list is one line.
func TestBrowserRecords(t *testing.T) {
	bctx := browser(t)
	path := filepath.Join(t.TempDir(), "records.pt")
	if err := torch.BuildModule(torch.ModuleSource{Source: recordSource, Parameters: map[string]*tensor.Tensor{}}, path); err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(serve.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		serve.Family{Spec: goldenrecords.Spec(), Options: []client.Option{client.WithCheckpointPath(path), client.WithDevice("cpu")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if err := srv.Load(); err != nil {
		t.Fatal(err)
	}
	hs := srv.HTTPServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	ctx, cancel := tab(t, bctx)
	defer cancel()
	type figure struct {
		Name string   `json:"name"`
		Raw  string   `json:"raw"`
		Rows []string `json:"rows"`
	}
	run := func(x string) []figure {
		t.Helper()
		if err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.ID("detect-x"), x),
			chromedp.Click(chromedp.ID("detect--run")),
			chromedp.WaitVisible(chromedp.CSS(`#detect--results figure`)),
		); err != nil {
			dump(t, ctx)
			t.Fatal(err)
		}
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const figs = [...document.querySelectorAll('#detect--results figure')];
			const out = JSON.stringify(figs.map((f) => ({name: f.dataset.output, raw: f.querySelector('.raw').textContent,
				rows: [...f.querySelectorAll('tr')].map((r) => [...r.children].map((c) => c.textContent).join(' | '))})));
			document.querySelector('#detect--results').replaceChildren(); return out; })()`))
		var figs []figure
		if err != nil || json.Unmarshal([]byte(raw), &figs) != nil {
			t.Fatalf("the page's figures: %v %s", err, raw)
		}
		return figs
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+ln.Addr().String()+"/playground/golden-records"),
		chromedp.WaitReady(chromedp.ID("detect-x"))); err != nil {
		dump(t, ctx)
		t.Fatal(err)
	}
	want := []figure{
		{"losses", "record · 1 of 2 keys", []string{"classification | — | absent", "bbox_regression | FP32 [] | 24.5"}},
		{"detections.0", "element 0 of 2", []string{"boxes | FP32 [1,4] | 1, 2, 3, 4", "labels | INT64 [1] | 3", "scores | FP32 [1] | 10"}},
		{"detections.1", "element 1 of 2", []string{"boxes | FP32 [2,4] | 8 values from -1.000 to 3.000", "labels | INT64 [2] | 2, 0", "scores | FP32 [2] | 2.5, 12"}},
	}
	if got := run(`[[[1, 2, 3, 4], [0, 0, 0, 0]], [[-1, 0.5, 3, 0], [3, 3, 3, 3]]]`); !reflect.DeepEqual(got, want) {
		t.Errorf("two images: figures\n%+v\nwant\n%+v", got, want)
	}
	want = []figure{
		{"losses", "record · 0 of 2 keys", []string{"classification | — | absent", "bbox_regression | — | absent"}},
		{"detections", "record_list · 0 elements", []string{}},
	}
	if got := run(`[[[-999, 0, 0, 0]]]`); !reflect.DeepEqual(got, want) {
		t.Errorf("no detections: figures\n%+v\nwant\n%+v", got, want)
	}
}
