//go:build cgo

package playground_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/worldfoundry/wfgen/golden/structured/output/goldenstructured"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	"github.com/worldfoundry/wfgen/runtime/torch"
)

// listSource gives the golden structured family a pyramid of three
// elements of two dtypes, and none for an input without rows.
const listSource = `
def forward(self, x: Tensor) -> Tuple[Tensor, Tensor]:
    return x, x.sum(0)

def split(self, x: Tensor) -> Tuple[Tensor, List[Tensor]]:
    return x.sum(), [x[0:1], x[1:3] * 2.0]

def pyramid(self, x: Tensor) -> List[Tensor]:
    out: List[Tensor] = []
    if x.size(0) > 0:
        out.append(x * 2.0)
        out.append(x.sum(0))
        out.append(x.long())
    return out
`

// TestBrowserTensorList runs a task returning List[Tensor] on its
// playground page: each element is a figure of its own, captioned with its
// name and its place in the list; an empty list is one line saying so.
func TestBrowserTensorList(t *testing.T) {
	bctx := browser(t)
	path := filepath.Join(t.TempDir(), "structured.pt")
	if err := torch.BuildModule(torch.ModuleSource{Source: listSource, Parameters: map[string]*tensor.Tensor{}}, path); err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(serve.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		serve.Family{Spec: goldenstructured.Spec(), Options: []client.Option{client.WithCheckpointPath(path), client.WithDevice("cpu")}})
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
		Name string `json:"name"`
		Raw  string `json:"raw"`
	}
	run := func(x string) []figure {
		t.Helper()
		if err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.ID("pyramid-x"), x),
			chromedp.Click(chromedp.ID("pyramid--run")),
			chromedp.WaitVisible(chromedp.CSS(`#pyramid--results figure`)),
		); err != nil {
			dump(t, ctx)
			t.Fatal(err)
		}
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const figs = [...document.querySelectorAll('#pyramid--results figure')];
			const out = JSON.stringify(figs.map((f) => ({name: f.dataset.output, raw: f.querySelector('.raw').textContent})));
			document.querySelector('#pyramid--results').replaceChildren(); return out; })()`))
		var figs []figure
		if err != nil || json.Unmarshal([]byte(raw), &figs) != nil {
			t.Fatalf("the page's figures: %v %s", err, raw)
		}
		return figs
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+ln.Addr().String()+"/playground/golden-structured"),
		chromedp.WaitReady(chromedp.ID("pyramid-x"))); err != nil {
		dump(t, ctx)
		t.Fatal(err)
	}
	want := []figure{
		{"levels.0", "element 0 of 3 · FP32 [2,3]"},
		{"levels.1", "element 1 of 3 · FP32 [3]"},
		{"levels.2", "element 2 of 3 · INT64 [2,3]"},
	}
	if got := run(`[[1, 2, 3], [4, 5, 6]]`); !slices.Equal(got, want) {
		t.Errorf("a list of three: figures %+v, want %+v", got, want)
	}
	if got := run(`[]`); !slices.Equal(got, []figure{{"levels", "tensor_list · 0 elements"}}) {
		t.Errorf("an empty list: figures %+v, want one saying it is empty", got)
	}
}
