//go:build cgo

package playground_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/worldfoundry/wfgen/examples/digits"
	"github.com/worldfoundry/wfgen/examples/tinymodels"
	"github.com/worldfoundry/wfgen/examples/worldmodel"
	gendigits "github.com/worldfoundry/wfgen/generated/digits"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/playground"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/tensor"
	_ "github.com/worldfoundry/wfgen/runtime/torch" // the libtorch engine
)

// chromium is Debian's chromium (scripts/setup.sh installs it).
const chromium = "/usr/bin/chromium"

// token is the served playground's bearer token: the page must ask for it.
const token = "playground-test-token"

// tiny holds the tiny demo checkpoints (tiny-world), built once.
var tiny = enginetest.Checkpoints{Name: "playground-test", Build: tinymodels.Build}

func TestMain(m *testing.M) { enginetest.Main(m) }

// repoOut is the repository's out/ folder, where the demo keeps its
// trained models and the tests their screenshots.
func repoOut(t *testing.T) string {
	t.Helper()
	out, err := filepath.Abs(filepath.Join("..", "..", "out"))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// served is wfserve's handler with the digits model, the learned world
// model and the tiny world, behind a bearer token, on loopback; /static/
// serves a page written by playground.Write from the same origin.
type served struct {
	url, digitsRoot, static, worldRoot string
	srv                                *serve.Server
}

func startServer(t *testing.T, configure ...func(*serve.Config)) *served {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out := repoOut(t)
	// The demo and the examples' tests share these trained models; the
	// first to need one trains it (digits: seconds; the world model: about
	// two minutes, once).
	dr := filepath.Join(out, "digits")
	if _, err := digits.Ensure(ctx, dr); err != nil {
		t.Fatal(err)
	}
	wr := filepath.Join(out, "worldmodel")
	if _, err := worldmodel.Ensure(ctx, wr); err != nil {
		t.Fatal(err)
	}
	fam := func(name, root string) serve.Family {
		return serve.Family{Spec: loadSpec(t, name), Options: []client.Option{client.WithCheckpointRoot(root), client.WithDevice("cpu")}}
	}
	cfg := serve.Config{Token: token, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range configure {
		f(&cfg)
	}
	srv, err := serve.New(cfg,
		fam("worldmodel", wr), fam("digits", dr), fam("tiny-world", tiny.Dir(t)), fam("tiny-encoder", tiny.Dir(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if err := srv.Load(); err != nil {
		t.Fatal(err)
	}
	static := t.TempDir()
	if err := playground.Write(static, loadSpec(t, "tiny-world")); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/static/", http.StripPrefix("/static/", http.FileServer(http.Dir(static))))
	mux.Handle("/", srv)
	hs := srv.HTTPServer()
	hs.Handler = mux
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return &served{url: "http://" + ln.Addr().String(), digitsRoot: dr, static: static, worldRoot: wr, srv: srv}
}

// browser starts headless chromium with a fresh profile and every
// background network feature off (the machine is offline).
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("skipping the browser tests: %s is absent (scripts/setup.sh installs Debian's chromium): %v", chromium, err)
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1100, 1100))
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		t.Fatal(err)
	}
	return bctx
}

// tabTimeout bounds what a test does in one tab.
var tabTimeout = 90 * time.Second

// tab opens a new tab with a deadline for everything done in it.
func tab(t *testing.T, bctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := chromedp.NewContext(bctx)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	// The page's console and uncaught errors go to the test log.
	chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *cdpruntime.EventConsoleAPICalled:
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			t.Logf("console.%s: %s", ev.Type, strings.Join(args, " "))
		case *cdpruntime.EventExceptionThrown:
			t.Errorf("the page threw: %s %s", ev.ExceptionDetails.Text, ev.ExceptionDetails.Exception.Description)
		}
	})
	tctx, cancelT := context.WithTimeout(ctx, tabTimeout)
	return tctx, func() { cancelT(); cancel() }
}

// dump logs what the page shows, for a test that failed waiting on it.
func dump(t *testing.T, ctx context.Context) {
	t.Helper()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	html, err := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + [...document.querySelectorAll('.error, .status, #conn-msg, [data-stat]')].map((e) => (e.id || e.className) + ": " + e.textContent).join("\n")`))
	t.Logf("the page: %v\n%s", err, html)
}

// login answers the page's token prompt: the page asks when the server
// answers 401.
func login(ctx context.Context) error {
	return chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS("#conn[open] #token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#conn-form button")),
	)
}

// updateDocs makes the browser test write its screenshots into docs/ too:
// go test -run TestBrowser ./runtime/playground -update-screenshots
var updateDocs = flag.Bool("update-screenshots", false, "write the browser test's screenshots into docs/ (the README shows them) as well as out/")

// screenshot saves the page as out/NAME (and docs/NAME with
// -update-screenshots).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	paths := []string{filepath.Join(repoOut(t), name)}
	if *updateDocs {
		paths = append(paths, filepath.Join("..", "..", "docs", name))
	}
	for _, path := range paths {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Error(err)
		}
	}
}

// notFound records the URLs the tab got a 404 for (a missing favicon, an
// asset).
func notFound(t *testing.T, ctx context.Context) func() []string {
	t.Helper()
	var mu sync.Mutex
	var urls []string
	chromedp.Listen(ctx, func(ev any) {
		if r, ok := ev.(*network.EventResponseReceived); ok && r.Response.Status == http.StatusNotFound {
			mu.Lock()
			urls = append(urls, r.Response.URL)
			mu.Unlock()
		}
	})
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(urls)
	}
}

// focused is the id of the element that has the focus ("" for the body).
func focused(t *testing.T, ctx context.Context) string {
	t.Helper()
	id, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement ? document.activeElement.id : ''`))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// fieldError is what the page shows beside a field: the message in its
// error slot, its control's aria-invalid, and whether the control has the
// focus.
func fieldError(t *testing.T, ctx context.Context, id string) (msg string, invalid, focus bool) {
	t.Helper()
	var r struct {
		Msg            string
		Invalid, Focus bool
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(() => { const c = document.getElementById(%q);
		return JSON.stringify({msg: document.getElementById(%q + '-err').textContent, invalid: c.getAttribute('aria-invalid') === 'true',
			focus: document.activeElement === c}); })()`, id, id)))
	if err == nil {
		err = json.Unmarshal([]byte(raw), &r)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r.Msg, r.Invalid, r.Focus
}

// TestBrowser drives the playground in Chromium against a running server:
// a digit read from an uploaded picture (the page converts it as Go does:
// the same logits), a bad value answered with the server's error beside
// its field, the world model played from the keyboard (five presses of
// the right arrow move the sprite as the simulator says), the session
// ended by closing the tab, and the static page of `wfgen playground`.
func TestBrowser(t *testing.T) {
	bctx := browser(t)
	s := startServer(t)

	t.Run("digits", func(t *testing.T) {
		ctx, cancel := tab(t, bctx)
		defer cancel()
		items, err := digits.TestSet(s.digitsRoot)
		if err != nil || len(items) == 0 {
			t.Fatalf("the digits test set: %v", err)
		}
		item := items[0]
		missing := notFound(t, ctx)
		if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/")); err != nil {
			t.Fatal(err)
		}
		if err := login(ctx); err != nil {
			t.Fatalf("the index page did not ask for the token: %v", err)
		}
		if err := chromedp.Do(ctx,
			chromedp.Click(chromedp.CSS(`a[href="/playground/digits"]`)),
			chromedp.WaitReady(chromedp.ID("classify-pixels")),
			chromedp.SetUploadFiles(chromedp.ID("classify-pixels"), []string{item.Path}),
			chromedp.Click(chromedp.ID("classify--run")),
			chromedp.WaitVisible(chromedp.CSS(`#classify--results .answer .top1`)),
		); err != nil {
			t.Fatal(err)
		}
		// The answer in one line: the digit, large, and its probability;
		// the scores as bars labelled 0 to 9.
		var page struct {
			Top1, Prob, Label, Rules, Raw string
			Classes                       []string
		}
		if raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const q = (s) => document.querySelector(s);
			return JSON.stringify({top1: q('#classify--results .answer .top1').textContent, prob: q('#classify--results .answer .prob').textContent,
				label: q('#classify--results [data-output="label"] .scalar').textContent,
				classes: [...document.querySelectorAll('#classify--results [data-output="logits"] .bars .cl')].map((e) => e.textContent),
				rules: q('#classify-pixels-help .rules').textContent, raw: q('#classify-pixels-help .raw').textContent}); })()`)); err != nil || json.Unmarshal([]byte(raw), &page) != nil {
			t.Fatalf("the page's answer: %v %s", err, raw)
		}
		shown := page.Top1
		if want := []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}; !slices.Equal(page.Classes, want) {
			t.Errorf("the score bars are labelled %q, want %q", page.Classes, want)
		}
		if !strings.HasPrefix(page.Rules, "8×8 picture, 1 channel (grey) · required") || page.Raw != "FP32 [1,8,8]" {
			t.Errorf("the picture field's rules read %q (raw %q), want words first: 8×8 picture, 1 channel (grey), then FP32 [1,8,8]", page.Rules, page.Raw)
		}
		var outs []struct {
			Name string    `json:"name"`
			Data []float64 `json:"data"`
		}
		if raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(WF.results.classify)`)); err != nil || json.Unmarshal([]byte(raw), &outs) != nil {
			t.Fatalf("the page's outputs: %v %s", err, raw)
		}
		argmax, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`#classify--results [data-output="logits"] .bars .best`), "data-class"))
		if err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, "playground-digits.png")
		if m := missing(); len(m) > 0 {
			t.Errorf("the index and digits pages got 404 for %q", m)
		}

		// The same picture in Go: png.Decode, SetPixelsFromImage, libtorch.
		c, err := gendigits.New(client.WithCheckpointRoot(s.digitsRoot), client.WithDevice("cpu"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		f, err := os.Open(item.Path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		p := gendigits.DefaultClassifyParams()
		if err := p.SetPixelsFromImage(img); err != nil {
			t.Fatal(err)
		}
		res, err := c.Classify(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		label, _ := res.Label.Int64s()
		logits, _ := res.Logits.Float32s()
		if shown != strconv.FormatInt(label[0], 10) || argmax.Value != shown || page.Label != shown {
			t.Errorf("the page shows the answer %q (largest score at %s, label output %s); Go reads %d (the picture is a %d)", shown, argmax.Value, page.Label, label[0], item.Label)
		}
		// The probability is the softmax of Go's logits.
		top := logits[label[0]]
		z := 0.0
		for _, l := range logits {
			z += math.Exp(float64(l - top))
		}
		if want := fmt.Sprintf("%.1f %%", 100/z); page.Prob != want {
			t.Errorf("the answer's probability reads %q; the softmax of Go's logits is %s", page.Prob, want)
		}
		for _, o := range outs {
			if o.Name != "logits" {
				continue
			}
			if len(o.Data) != len(logits) {
				t.Fatalf("the page got %d logits, Go %d", len(o.Data), len(logits))
			}
			for i := range logits {
				if float32(o.Data[i]) != logits[i] {
					t.Errorf("logit %d: the page's request gave %v, Go's %v: the page converted the picture otherwise", i, o.Data[i], logits[i])
				}
			}
		}
		t.Logf("picture %s (a %d): the page shows %s", filepath.Base(item.Path), item.Label, shown)

		// Clear empties the pad and the chosen file: Run then sends no
		// picture, and the server's error (the picture is required) shows
		// beside the picture's own control, which takes the focus.
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#task-classify .padbox button.clear`)),
			chromedp.Evaluate[chromedp.Void](`WF.requests.classify = null`),
			chromedp.Click(chromedp.ID("classify--run")),
			chromedp.Poll[chromedp.Void](`document.getElementById('classify-pixels-err').textContent`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			dump(t, ctx)
			t.Fatal(err)
		}
		files, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.getElementById('classify-pixels').files.length`))
		if err != nil {
			t.Fatal(err)
		}
		sentAfterClear, err := chromedp.Run(ctx, chromedp.Evaluate[int](`WF.requests.classify.length`))
		if err != nil {
			t.Fatal(err)
		}
		msg, invalid, focus := fieldError(t, ctx, "classify-pixels")
		if files != 0 || sentAfterClear != 0 || !strings.Contains(msg, "pixels") || !invalid || !focus {
			t.Errorf("after Clear: %d file(s) chosen, %d input(s) sent; beside the picture %q, aria-invalid %v, focused %v (the focus is on %q)",
				files, sentAfterClear, msg, invalid, focus, focused(t, ctx))
		}

		// A digit drawn on the pad: a one, a stroke down the middle.
		box, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => { WF.results.classify = null;
			const r = document.querySelector('#task-classify canvas.pad').getBoundingClientRect();
			return [r.left, r.top, r.width, r.height]; })()`))
		if err != nil {
			t.Fatal(err)
		}
		held := func(p *input.DispatchMouseEventParams) { p.Button, p.Buttons = input.MouseButtonLeft, 1 }
		x := box[0] + box[2]/2
		steps := []chromedp.Action[chromedp.Void]{chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, x, box[1]+box[3]*0.15, held, chromedp.ClickCount(1))}
		for i := 1; i <= 10; i++ {
			steps = append(steps, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x, box[1]+box[3]*(0.15+0.07*float64(i)), held))
		}
		steps = append(steps, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, x, box[1]+box[3]*0.85, held, chromedp.ClickCount(1)),
			chromedp.Click(chromedp.ID("classify--run")),
			chromedp.Poll[chromedp.Void](`WF.results.classify`, chromedp.WithPollingTimeout(30*time.Second)))
		if err := chromedp.Do(ctx, steps...); err != nil {
			dump(t, ctx)
			t.Fatal(err)
		}
		drawn, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#classify--results .answer .top1`)))
		if err != nil {
			t.Fatal(err)
		}
		// The page sent the pad's picture, and shows what the model makes
		// of that tensor.
		sent, err := chromedp.Run(ctx, chromedp.Evaluate[[]float32](`WF.requests.classify[0].data`))
		if err != nil || len(sent) != 64 {
			t.Fatalf("the drawn picture sent: %v, %d values", err, len(sent))
		}
		lo, hi := slices.Min(sent), slices.Max(sent)
		if lo == hi {
			t.Fatalf("the drawn picture is blank: every value %v", lo)
		}
		p.Pixels = tensor.FromFloat32(sent, 1, 8, 8)
		res, err = c.Classify(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		label, _ = res.Label.Int64s()
		if drawn != strconv.FormatInt(label[0], 10) {
			t.Errorf("the drawing reads as %q in the page, %d in Go", drawn, label[0])
		}
		if drawn != "1" {
			t.Errorf("a stroke down the middle of the pad reads as %s, want 1", drawn)
		}
	})

	t.Run("server error at the field", func(t *testing.T) {
		ctx, cancel := tab(t, bctx)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/playground/tiny-world")); err != nil {
			t.Fatal(err)
		}
		if err := login(ctx); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx,
			chromedp.WaitVisible(chromedp.ID("generate-prompt")),
			chromedp.SendKeys(chromedp.ID("generate-prompt"), "a red ball"),
			chromedp.SetValue(chromedp.ID("generate-num_frames"), "6"),
			chromedp.Click(chromedp.ID("generate--run")),
			chromedp.WaitVisible(chromedp.ID("generate-num_frames-err")),
		); err != nil {
			dump(t, ctx)
			t.Fatal(err)
		}
		shown, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("generate-num_frames-err")))
		if err != nil {
			t.Fatal(err)
		}
		invalid, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.ID("generate-num_frames"), "aria-invalid"))
		if err != nil {
			t.Fatal(err)
		}
		// What the server answers the same request.
		body := `{"parameters":{"task":"generate"},"inputs":[{"name":"prompt","datatype":"BYTES","shape":[1],"data":["a red ball"]},` +
			`{"name":"seed","datatype":"INT64","shape":[1],"data":[0]},{"name":"num_frames","datatype":"INT64","shape":[1],"data":[6]},` +
			`{"name":"height","datatype":"INT64","shape":[1],"data":[32]},{"name":"width","datatype":"INT64","shape":[1],"data":[32]}]}`
		code, answer := post(t, s.url+"/v2/models/tiny-world/infer", body)
		var e struct{ Error string }
		json.Unmarshal(answer, &e)
		if code != http.StatusBadRequest || e.Error == "" || shown != e.Error || invalid.Value != "true" {
			t.Errorf("beside num_frames the page shows %q (aria-invalid %q); the server answers %d %s", shown, invalid.Value, code, answer)
		}
		t.Logf("beside num_frames: %s", shown)

		// The tiny world's live view: chunks of four frames, then two;
		// Stop ends the session on the server.
		if err := chromedp.Do(ctx,
			chromedp.Click(chromedp.ID("step--start")),
			chromedp.Poll[chromedp.Void](`WF.sessions.step && WF.sessions.step.index >= 2`, chromedp.WithPollingTimeout(30*time.Second)),
		); err != nil {
			dump(t, ctx)
			t.Fatal(err)
		}
		frames, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[WF.sessions.step.index, WF.sessions.step.frames]`))
		if err != nil {
			t.Fatal(err)
		}
		if want := 4 + 2*frames[0]; frames[1] != want {
			t.Errorf("%d frames shown after chunk %d, want %d (4, then 2 a chunk)", frames[1], frames[0], want)
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("step--stop"))); err != nil {
			t.Fatal(err)
		}
		waitSessions(t, s.url, 0)
		// Stop is disabled once the session ends: the focus goes to Start,
		// not the page's body.
		if id := focused(t, ctx); id != "step--start" {
			t.Errorf("after Stop the focus is on %q, want Start (step--start)", id)
		}
	})

	t.Run("tensor typed as nested lists", func(t *testing.T) {
		ctx, cancel := tab(t, bctx)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/playground/tiny-encoder")); err != nil {
			t.Fatal(err)
		}
		if err := login(ctx); err != nil {
			t.Fatal(err)
		}
		// embed types text into the token field and runs the task; it
		// returns the embedding, or "" when the page shows an error.
		embed := func(text string) (sent string, emb []float64) {
			t.Helper()
			if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("embed-tokens")),
				chromedp.SetValue(chromedp.ID("embed-tokens"), text),
				chromedp.Evaluate[chromedp.Void](`WF.results.embed = null; WF.requests.embed = null`),
				chromedp.Click(chromedp.ID("embed--run")),
				chromedp.Poll[chromedp.Void](`WF.results.embed || document.getElementById('embed-tokens-err').textContent || document.getElementById('embed--err').textContent`,
					chromedp.WithPollingTimeout(30*time.Second))); err != nil {
				dump(t, ctx)
				t.Fatal(err)
			}
			var r struct {
				Sent string
				Emb  []float64
			}
			raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({sent: JSON.stringify(WF.requests.embed && WF.requests.embed[0].shape),
				emb: WF.results.embed ? WF.results.embed[0].data.flat(Infinity) : null})`))
			if err == nil {
				err = json.Unmarshal([]byte(raw), &r)
			}
			if err != nil {
				t.Fatal(err)
			}
			return r.Sent, r.Emb
		}
		nestedShape, nested := embed("[[1, 2, 3]]")
		flatShape, flat := embed("[1, 2, 3]")
		if len(nested) != 64 || !slices.Equal(nested, flat) || nestedShape != "[3]" || flatShape != "[3]" {
			t.Errorf("[[1, 2, 3]] was sent shaped %s and embeds to %d values; [1, 2, 3] shaped %s to %d; want both sent as [3], one 64-value embedding",
				nestedShape, len(nested), flatShape, len(flat))
		}
		// A table of two rows is no [1, L] item: the page says so beside
		// the field, and sends nothing.
		if sent, emb := embed("[[1, 2], [3, 4]]"); sent != "null" || emb != nil {
			t.Errorf("[[1, 2], [3, 4]] was sent shaped %s", sent)
		}
		msg, invalid, focus := fieldError(t, ctx, "embed-tokens")
		if !strings.Contains(msg, "[2,2]") || !strings.Contains(msg, "INT64 [*]") || !invalid || !focus {
			t.Errorf("beside the tokens field: %q, aria-invalid %v, focused %v", msg, invalid, focus)
		}
		t.Logf("beside the tokens field: %s", msg)
	})

	t.Run("world model from the keyboard", func(t *testing.T) {
		ctx, cancel := tab(t, bctx)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/playground/worldmodel")); err != nil {
			t.Fatal(err)
		}
		if err := login(ctx); err != nil {
			t.Fatal(err)
		}
		// Pictures that are not two frames of the world's 32×32 are refused
		// beside the field, which takes the focus.
		items, err := digits.TestSet(s.digitsRoot)
		if err != nil || len(items) < 3 {
			t.Fatalf("the digits test set: %v", err)
		}
		for _, c := range []struct {
			files []string
			want  string
		}{
			{[]string{items[0].Path}, "takes 2 pictures, one per frame; 1 was chosen"},
			{[]string{items[1].Path, items[2].Path}, "is 8×8; Start frames takes frames of 32×32"},
		} {
			if err := chromedp.Do(ctx, chromedp.WaitReady(chromedp.ID("play-start")),
				chromedp.SetUploadFiles(chromedp.ID("play-start"), c.files),
				chromedp.Poll[chromedp.Void](`document.getElementById('play-start-err').textContent`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
				dump(t, ctx)
				t.Fatal(err)
			}
			msg, invalid, focus := fieldError(t, ctx, "play-start")
			if !strings.Contains(msg, c.want) || !invalid || !focus {
				t.Errorf("%d digit picture(s) as the start: beside the field %q (want %q), aria-invalid %v, focused %v (the focus is on %q)",
					len(c.files), msg, c.want, invalid, focus, focused(t, ctx))
			}
			// Start refuses them too, and starts no session.
			if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('play-start-err').textContent = ''`),
				chromedp.Click(chromedp.ID("play--start")),
				chromedp.Poll[chromedp.Void](`document.getElementById('play-start-err').textContent`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
				t.Fatal(err)
			}
			if msg, _, focus := fieldError(t, ctx, "play-start"); !strings.Contains(msg, c.want) || !focus {
				t.Errorf("Start with %d digit picture(s): beside the field %q, focused %v", len(c.files), msg, focus)
			}
		}
		if n, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!WF.sessions.play`)); err != nil || n {
			t.Errorf("a session started from pictures the field refuses (%v)", err)
		}
		// The example frames: the first two frames the model plays from its
		// checkpoint's own start, where the sprite stands still (the
		// checkpoint's start has it at 6, 20; train.py's DEFAULT_START).
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#task-play button.example`)),
			chromedp.Poll[chromedp.Void](`document.querySelector('#task-play .strip').dataset.frames === '2'`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			dump(t, ctx)
			t.Fatal(err)
		}
		if msg, invalid, _ := fieldError(t, ctx, "play-start"); msg != "" || invalid {
			t.Errorf("with the example frames the field still shows %q (aria-invalid %v)", msg, invalid)
		}
		thumbs, err := chromedp.Run(ctx, chromedp.Evaluate[[][]int](`[...document.querySelectorAll('#task-play .strip canvas')].map((c) => Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data))`))
		if err != nil {
			t.Fatal(err)
		}
		var example []byte
		for i, rgba := range thumbs {
			frame := rgbOf(rgba)
			x, y, ok := worldmodel.SpritePosition(frame)
			if !ok || math.Abs(x-7.5) > 0.5 || math.Abs(y-21.5) > 0.5 {
				t.Errorf("example frame %d: the sprite is at (%.1f, %.1f) (found %v), want the checkpoint's start, (7.5, 21.5)", i, x, y, ok)
			}
			example = append(example, frame...)
		}
		if err := chromedp.Do(ctx,
			chromedp.WaitVisible(chromedp.ID("play--start")),
			chromedp.Click(chromedp.ID("play--start")),
			chromedp.Poll[chromedp.Void](`WF.sessions.play && WF.sessions.play.index >= 3`, chromedp.WithPollingTimeout(30*time.Second)),
		); err != nil {
			dump(t, ctx)
			t.Fatal(err)
		}
		if n := sessionsOpen(t, s.url); n != 1 {
			t.Errorf("%v sessions open while the page plays, want 1", n)
		}
		// This server has no session key: Rewind and Fork are off, and
		// say why.
		if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`document.getElementById('play--rewind').title.includes('session key')`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			dump(t, ctx)
			t.Fatalf("Rewind does not say it needs a session key: %v", err)
		}
		off, err := chromedp.Run(ctx, chromedp.Evaluate[string](`['play--rewind', 'play--fork'].map((b) => document.getElementById(b).disabled + ' ' + document.getElementById(b).title).join('\n') + '\n' + document.getElementById('play--snapnote').textContent`))
		if err != nil || strings.Count(off, "true This server takes no snapshots: it needs a session key (wfserve -session-key-file)") != 2 || !strings.Contains(off, "501") {
			t.Errorf("without a session key Rewind and Fork are (disabled, title):\n%s (%v)", off, err)
		}
		// The session started from the example frames, as they show.
		var start struct {
			Shape []int
			Data  []byte
		}
		sentStart, err := chromedp.Run(ctx, chromedp.Evaluate[[][]int](`[WF.requests.play[0].shape, WF.requests.play[0].data]`))
		if err != nil || len(sentStart) != 2 {
			t.Fatalf("the start sent: %v", err)
		}
		start.Shape = sentStart[0]
		for _, v := range sentStart[1] {
			start.Data = append(start.Data, byte(v))
		}
		if !slices.Equal(start.Shape, []int{2, 32, 32, 3}) || !bytes.Equal(start.Data, example) {
			t.Errorf("the session started from %v frames, equal to the example shown: %v", start.Shape, bytes.Equal(start.Data, example))
		}
		before := spriteOnCanvas(t, ctx)
		// Five presses, each one frame. Three in a burst (queued: one frame
		// each), then two alone, each once the frame of the one before is
		// drawn, which measure the latency of a press on its own.
		for i := range 5 {
			if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight)); err != nil {
				t.Fatal(err)
			}
			if i < 2 {
				continue
			}
			if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(`WF.sessions.play.keyLatency.length >= %d`, i+1), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
				t.Fatal(err)
			}
		}
		idx, err := chromedp.Run(ctx, chromedp.Evaluate[int](`WF.sessions.play.index`))
		if err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(`WF.sessions.play.index >= %d`, idx+1), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatal(err)
		}
		after := spriteOnCanvas(t, ctx)
		// The simulator's answer: five steps right from where the sprite
		// was (its top-left corner is the centre less 1.5 px).
		st := worldmodel.State{Sprite: worldmodel.Point{X: int(math.Round(before[0] - 1.5)), Y: int(math.Round(before[1] - 1.5))}, Velocity: worldmodel.Point{X: 1, Y: 1}}
		for range 5 {
			st = st.Step(worldmodel.Right)
		}
		wantX, wantY := float64(st.Sprite.X)+1.5, float64(st.Sprite.Y)+1.5
		if math.Abs(after[0]-wantX) > 1 || math.Abs(after[1]-wantY) > 1 {
			t.Errorf("after five presses of the right arrow the sprite is at (%.1f, %.1f), from (%.1f, %.1f); the simulator says (%.1f, %.1f)",
				after[0], after[1], before[0], before[1], wantX, wantY)
		}
		// Ten more presses on their own, left and right in turn, for the
		// latency figures of docs/playground.md: as a player's presses fall
		// anywhere between two frames, press i waits until i×10 ms after a
		// chunk arrived (the frame period is 100 ms).
		for i := range 10 {
			key := kb.ArrowLeft
			if i%2 == 1 {
				key = kb.ArrowRight
			}
			phase := fmt.Sprintf(`performance.now() - WF.sessions.play.arrivals[WF.sessions.play.arrivals.length - 1] >= %d`, i*10)
			if err := chromedp.Do(ctx,
				chromedp.Poll[chromedp.Void](phase, chromedp.WithPollingInterval(time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)),
				chromedp.KeyEvent(key),
				chromedp.Poll[chromedp.Void](fmt.Sprintf(`WF.sessions.play.keyLatency.length >= %d`, 6+i), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
				t.Fatal(err)
			}
		}
		var stats struct {
			Presses   []struct{ Wait, RTT, Step, Total float64 }
			RTT       []float64
			Frames    int
			FPS       string
			Transport string
		}
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({transport: WF.sessions.play.conn.name, presses: WF.sessions.play.presses, rtt: WF.sessions.play.rtt, frames: WF.sessions.play.frames, fps: document.querySelector('[data-stat=fps]').textContent})`))
		if err == nil {
			err = json.Unmarshal([]byte(raw), &stats)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(stats.FPS, " frames per second") {
			t.Errorf("the frame rate reads %q, want N frames per second", stats.FPS)
		}
		if stats.Transport != "websocket" {
			t.Errorf("the session ran over %q, want the WebSocket", stats.Transport)
		}
		t.Logf("sprite (%.1f, %.1f) → (%.1f, %.1f); chunk round trip %s ms; %d frames, %s, over the %s", before[0], before[1], after[0], after[1], summary(stats.RTT), stats.Frames, stats.FPS, stats.Transport)
		var alone, wait, rtt, step []float64
		for i, p := range stats.Presses {
			t.Logf("press %d: key to frame %.1f ms = wait for the frame's turn %.1f + round trip %.1f (server step %.1f) + paint %.1f", i+1, p.Total, p.Wait, p.RTT, p.Step, p.Total-p.Wait-p.RTT)
			if i >= 3 {
				alone, wait, rtt, step = append(alone, p.Total), append(wait, p.Wait), append(rtt, p.RTT), append(step, p.Step)
			}
		}
		t.Logf("a press alone, key to frame: %s ms; waiting for the frame's turn %s; round trip %s; server step %s", summary(alone), summary(wait), summary(rtt), summary(step))
		screenshot(t, ctx, "playground-worldmodel.png")

		// Closing the tab ends the session on the server.
		cancel()
		waitSessions(t, s.url, 0)
	})

	t.Run("static page", func(t *testing.T) {
		ctx, cancel := tab(t, bctx)
		defer cancel()
		// generate opens the static page for server and runs its
		// generate task.
		generate := func(server string) {
			t.Helper()
			if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/static/index.html?server="+server),
				chromedp.WaitVisible(chromedp.ID("generate-prompt")),
				chromedp.SendKeys(chromedp.ID("generate-prompt"), "hi"),
				chromedp.SetValue(chromedp.ID("generate-num_frames"), "5"),
				chromedp.Click(chromedp.ID("generate--run")),
			); err != nil {
				t.Fatal(err)
			}
		}
		generate(s.url)
		server, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("server")))
		if err != nil || server != s.url {
			t.Errorf("the server field holds %q (%v), want the ?server= parameter %s", server, err, s.url)
		}
		if err := login(ctx); err != nil { // the infer call got 401: the page asks
			t.Fatal(err)
		}
		label, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
			document.getElementById('generate--run').click();
			for (;;) {
				const c = document.querySelector('#generate--results [data-output="video"] canvas');
				if (c) return c.getAttribute('aria-label');
				await new Promise((r) => setTimeout(r, 20));
			}
		})()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if label != "video: 5 frame(s) of 32×32" {
			t.Errorf("the video output is %q, want 5 frames of 32×32", label)
		}

		// A link to the page that names another server gets none of the
		// token saved for this one (it was sent to whatever ?server=
		// named): a server that lets any page send it headers records
		// what it is sent.
		var mu sync.Mutex
		var sent []string
		spy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Access-Control-Allow-Origin", "*")
			w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
			if r.Method == http.MethodOptions { // the preflight
				w.WriteHeader(http.StatusNoContent)
				return
			}
			mu.Lock()
			sent = append(sent, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
			mu.Unlock()
			http.NotFound(w, r)
		}))
		defer spy.Close()
		generate(spy.URL)
		enginetest.WaitFor(t, "the page to call the other server", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(sent) > 0
		})
		mu.Lock()
		for _, r := range sent {
			if strings.Contains(r, token) {
				t.Errorf("the page sent the token saved for %s to %s: %s", s.url, spy.URL, r)
			}
		}
		mu.Unlock()
	})
}

// spriteOnCanvas finds the sprite on the live canvas, by colour as the
// world model's measure does.
func spriteOnCanvas(t *testing.T, ctx context.Context) [2]float64 {
	t.Helper()
	rgba, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`Array.from(document.getElementById('play--live').getContext('2d').getImageData(0, 0, 32, 32).data)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rgba) != worldmodel.Size*worldmodel.Size*4 {
		t.Fatalf("the canvas holds %d values, want a 32×32 frame", len(rgba))
	}
	x, y, ok := worldmodel.SpritePosition(rgbOf(rgba))
	if !ok {
		t.Fatal("no sprite on the canvas")
	}
	return [2]float64{x, y}
}

// rgbOf drops the alpha of canvas pixels: a uint8 HWC RGB frame.
func rgbOf(rgba []int) []byte {
	frame := make([]byte, 0, len(rgba)/4*3)
	for i := 0; i < len(rgba); i += 4 {
		frame = append(frame, byte(rgba[i]), byte(rgba[i+1]), byte(rgba[i+2]))
	}
	return frame
}

// waitSessions polls the server's metrics until want sessions are open,
// for at most 30 s.
func waitSessions(t *testing.T, url string, want float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n := sessionsOpen(t, url); n != want; n = sessionsOpen(t, url) {
		select {
		case <-ctx.Done():
			t.Fatalf("%v sessions open after 30 s, want %v", n, want)
		case <-time.After(20 * time.Millisecond): // polling a condition, with a deadline
		}
	}
}

// sessionsOpen reads wfserve_sessions_open from the server's metrics.
func sessionsOpen(t *testing.T, url string) float64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "wfserve_sessions_open "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal(errors.Join(sc.Err(), errors.New("no wfserve_sessions_open in the metrics")))
	return 0
}

func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, b
}

// summary is "mean (min–max, n)" of latencies in ms.
func summary(v []float64) string {
	if len(v) == 0 {
		return "none"
	}
	lo, hi, sum := v[0], v[0], 0.0
	for _, x := range v {
		lo, hi, sum = min(lo, x), max(hi, x), sum+x
	}
	sorted := slices.Sorted(slices.Values(v))
	return fmt.Sprintf("median %.1f, mean %.1f (%.1f–%.1f, n=%d)", sorted[len(sorted)/2], sum/float64(len(v)), lo, hi, len(v))
}
