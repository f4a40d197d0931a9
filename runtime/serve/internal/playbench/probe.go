package main

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// chromium is Debian's chromium (scripts/setup.sh installs it).
const chromium = "/usr/bin/chromium"

// probePlayer plays the world model on the playground page of the server
// at url in headless Chromium, as runtime/playground's TestBrowser does
// for docs/playground.md's key-to-frame figure: it starts the play
// session, and from begin to end presses ← and → in turn, each press alone
// (once the frame of the one before is drawn) at a random point of the
// frame period, and returns the page's key-to-frame latencies (keydown to
// the animation frame that paints the first frame made with that key), in
// milliseconds.
func probePlayer(ctx context.Context, url string, begin, end time.Time) ([]press, error) {
	if _, err := os.Stat(chromium); err != nil {
		return nil, fmt.Errorf("no probe: %w (scripts/setup.sh installs chromium)", err)
	}
	dir, err := os.MkdirTemp("", "playbench-chromium")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	actx, cancelA := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(dir), chromedp.WindowSize(1100, 1100))
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	chromedp.Listen(bctx, func(ev any) {
		if ev, ok := ev.(*runtime.EventExceptionThrown); ok {
			fmt.Fprintf(os.Stderr, "playbench: the probe's page threw: %s %s\n", ev.ExceptionDetails.Text, ev.ExceptionDetails.Exception.Description)
		}
	})
	wait := func(expr string, timeout time.Duration) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(time.Millisecond), chromedp.WithPollingTimeout(timeout))
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(url+"/playground/worldmodel"),
		chromedp.WaitVisible(chromedp.ID("play--start")),
		chromedp.Click(chromedp.ID("play--start")),
		wait(`WF.sessions.play && WF.sessions.play.index >= 3`, 60*time.Second),
	); err != nil {
		return nil, fmt.Errorf("starting the page's session: %w", err)
	}
	time.Sleep(time.Until(begin))
	rng := mrand.New(mrand.NewPCG(45, 1))
	presses := 0
	for time.Now().Add(2 * time.Second).Before(end) {
		key := kb.ArrowLeft
		if presses%2 == 1 {
			key = kb.ArrowRight
		}
		// A press lands anywhere in the frame period: phase ms after the
		// last chunk arrived.
		phase := fmt.Sprintf(`performance.now() - WF.sessions.play.arrivals[WF.sessions.play.arrivals.length - 1] >= %d`, rng.IntN(100))
		if err := chromedp.Do(bctx,
			wait(phase, 10*time.Second),
			chromedp.KeyEvent(key),
			wait(fmt.Sprintf(`WF.sessions.play.keyLatency.length >= %d`, presses+1), 10*time.Second)); err != nil {
			return read(bctx), fmt.Errorf("press %d: %w", presses+1, err)
		}
		presses++
		time.Sleep(time.Duration(200+rng.IntN(300)) * time.Millisecond)
	}
	return read(bctx), nil
}

// press is one press the page measured, in milliseconds: key to frame
// (Total) = waiting for the next chunk's turn (Wait) + the round trip,
// ack sent to chunk received (RTT; the server's step, Step, within it) +
// the paint.
type press struct{ Wait, RTT, Step, Total float64 }

// read returns the presses the page measured.
func read(ctx context.Context) []press {
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(WF.sessions.play.presses)`))
	if err != nil {
		return nil
	}
	var ps []press
	json.Unmarshal([]byte(raw), &ps)
	return ps
}
