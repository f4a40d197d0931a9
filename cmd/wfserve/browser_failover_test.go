package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/worldfoundry/wfgen/generated/tinyworld"
	"github.com/worldfoundry/wfgen/internal/enginetest"
	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// chromiumTab starts Debian's chromium headless with a fresh profile and
// every background network feature off, as runtime/playground's browser
// tests do, and opens a tab whose console and uncaught errors go to the
// test log; it skips when chromium is absent.
func chromiumTab(t *testing.T) context.Context {
	t.Helper()
	const chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("skipping the browser test: %s is absent (scripts/setup.sh installs Debian's chromium): %v", chromium, err)
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1100, 1100))
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Do(bctx); err != nil {
		t.Fatal(err)
	}
	chromedp.Listen(bctx, func(ev any) {
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
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// recordFrames is run in the page before its own scripts: every frame
// the page draws on a live view's canvas is kept, base64, in
// window.shown — what the player saw, in order.
const recordFrames = `window.shown = [];
(() => {
  const put = CanvasRenderingContext2D.prototype.putImageData;
  CanvasRenderingContext2D.prototype.putImageData = function (img, ...rest) {
    if (this.canvas.classList.contains('live')) {
      let b = '';
      for (const v of img.data) b += String.fromCharCode(v);
      window.shown.push(btoa(b));
    }
    return put.call(this, img, ...rest);
  };
})();`

// recordCloses keeps the close code of every WebSocket the page opens in
// window.closes.
const recordCloses = `window.closes = [];
(() => {
  const W = window.WebSocket;
  if (!W) return;
  window.WebSocket = function (...args) {
    const ws = new W(...args);
    ws.addEventListener('close', (e) => window.closes.push(e.code));
    return ws;
  };
  window.WebSocket.prototype = W.prototype;
  for (const k of ['CONNECTING', 'OPEN', 'CLOSING', 'CLOSED']) window.WebSocket[k] = W[k];
})();`

// recordSent wraps the page's transport: every message the page sends
// on a session's connection is kept in window.sent, as the chunk it acks
// and the controls it sets for the chunk after — sent again, after a
// resume, for the chunks made again.
const recordSent = `window.sent = [];
(() => {
  const open = WF.transport.open;
  WF.transport.open = (o) => {
    const h = open(o), send = h.send;
    h.send = (m) => { if (m.ack != null && m.controls) window.sent.push([m.ack, m.controls]); return send.call(h, m); };
    return h;
  };
})();`

// arrowKey holds (down) or releases a key of kb in the page: the key
// events of chromedp's KeyEvent, which presses and releases at once,
// without the release or without the press.
func arrowKey(key string, down bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		for _, k := range kb.Encode([]rune(key)[0]) {
			if (k.Type == kb.KeyUp) != down {
				if _, err := chromedp.Call(ctx, input.DispatchKeyEvent, *k); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// sseFailoverConfig is failoverConfig with the affinity an SSE session
// needs (docs/serving.md, "Scale-out"): its controls POSTs must reach the
// replica of its stream, here by a cookie haproxy sets; a request whose
// cookie names a replica that is down goes to another (redispatch). And
// http-no-delay: without it each controls POST took about 215 ms through
// haproxy here (the chunks a resume makes again came 215 ms apart, and a
// resume stalled 0.4–1.1 s), against a few ms with it.
var sseFailoverConfig = strings.NewReplacer(
	"  http-response set-header X-Replica", "  option http-no-delay\n  cookie wfserve insert indirect nocache\n  http-response set-header X-Replica",
	"server r1 127.0.0.1:%d check", "server r1 127.0.0.1:%d cookie r1 check",
	"server r2 127.0.0.1:%d check", "server r2 127.0.0.1:%d cookie r2 check",
).Replace(failoverConfig)

// TestBrowserSurvivesReplicaKill plays the tiny world in the playground
// page through haproxy in front of two wfserve replicas with one
// -session-key-file, with scripted key presses and a key held across the
// kills: over the page's WebSocket (failoverConfig: round robin, no
// affinity), and over SSE in a page without WebSocket (sseFailoverConfig:
// the controls POSTs' affinity). Three times, at a seeded random chunk,
// the replica holding the session is killed (SIGKILL) and a new one takes
// its place in the balancer: the page reconnects by itself (its status
// says so), and every frame it draws — before and after each kill —
// equals, bit for bit and in order, an uninterrupted in-process
// session's given the controls the page sent for each chunk. The stall
// of each resume, as the page measures it (from the time the first new
// chunk was due to be asked for to its arrival), is logged. Replicas
// without a session key take no snapshots: the page then resumes from
// the session's start, making every chunk again. At the end of the
// WebSocket's run both replicas are killed: the page gives up after its
// tries and says so.
func TestBrowserSurvivesReplicaKill(t *testing.T) {
	haproxyPath(t)
	if strings.Count(sseFailoverConfig, " cookie ") != 3 || !strings.Contains(sseFailoverConfig, "http-no-delay") {
		t.Fatalf("sseFailoverConfig does not set the cookie affinity:\n%s", sseFailoverConfig)
	}
	for i, tc := range []failoverCase{
		{name: "websocket", transport: "websocket", config: failoverConfig, key: true, giveUp: true, drain: true},
		{name: "sse", transport: "sse", config: sseFailoverConfig, key: true},
		{name: "websocket without a session key", transport: "websocket", config: failoverConfig},
	} {
		tc.seed = uint64(i)
		t.Run(tc.name, func(t *testing.T) { browserFailover(t, tc) })
	}
}

// failoverCase is one run of TestBrowserSurvivesReplicaKill: the page's
// transport, haproxy's configuration, whether the replicas share a
// session key, whether the run ends by killing both replicas, whether the
// second replica to go is drained (SIGTERM: its WebSockets close with
// 1001) rather than killed.
type failoverCase struct {
	name, transport, config string
	key, giveUp, drain      bool
	seed                    uint64
}

func browserFailover(t *testing.T, tc failoverCase) {
	ctx := chromiumTab(t)
	transport := tc.transport
	args := []string{"-grpc-addr", "127.0.0.1:0"}
	if tc.drain {
		// haproxy's health checks keep arriving: the drain ends at its timeout.
		args = append(args, "-drain-timeout", "1s")
	}
	if tc.key {
		keyFile := filepath.Join(t.TempDir(), "session.key")
		if err := os.WriteFile(keyFile, []byte("the browser failover test's replicas' key\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-session-key-file", keyFile)
	}
	replica := func() *wfserveProc { return startProc(t, args...) }
	slots := map[string]*wfserveProc{"r1": replica(), "r2": replica()}
	bal := startHAProxy(t, tc.config, slots["r1"], slots["r2"])
	replicasSeen(t, bal.url, "r1", "r2")

	wait := func(what, cond string) {
		t.Helper()
		err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)))
		if err != nil {
			st, _ := chromedp.Run(context.WithoutCancel(ctx), chromedp.Evaluate[string](`document.querySelector('.liveview .status').textContent`))
			t.Fatalf("waiting for %s (%s): %v; the page's status: %q", what, cond, err, st)
		}
	}
	index := func() int {
		t.Helper()
		i, err := chromedp.Run(ctx, chromedp.Evaluate[int](`WF.sessions.step.index`))
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	press := func(keys ...string) {
		t.Helper()
		for _, k := range keys {
			if err := chromedp.Do(ctx, chromedp.KeyEvent(k)); err != nil {
				t.Fatal(err)
			}
		}
	}

	script := recordFrames + "\n" + recordCloses
	if transport == "sse" {
		script += "\nwindow.WebSocket = undefined;"
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: script}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(bal.url+"/playground/tiny-world"),
		chromedp.WaitVisible(chromedp.ID("step--start")), chromedp.Evaluate[chromedp.Void](recordSent), chromedp.Click(chromedp.ID("step--start"))); err != nil {
		t.Fatal(err)
	}
	if tc.key {
		wait("the first chunks and a snapshot", `WF.sessions.step && WF.sessions.step.index >= 2 && WF.sessions.step.snaps.length > 0`)
	} else {
		wait("the first chunks", `WF.sessions.step && WF.sessions.step.index >= 2`)
	}
	if name, err := chromedp.Run(ctx, chromedp.Evaluate[string](`WF.sessions.step.conn.name`)); err != nil || name != transport {
		t.Fatalf("the page plays over %q (%v), want %s", name, err, transport)
	}

	rng := rand.New(rand.NewPCG(45, 4+tc.seed))
	var stalls []string
	var kills []int
	for n := range 3 {
		press(kb.ArrowRight, kb.ArrowRight, kb.ArrowDown)
		// A key held across the kill: its control is on in every chunk
		// until it is released, after the resume.
		held := []string{kb.ArrowLeft, kb.ArrowUp, kb.ArrowRight}[n]
		if err := chromedp.Do(ctx, arrowKey(held, true)); err != nil {
			t.Fatal(err)
		}
		at := index() + 1 + rng.IntN(6)
		wait("chunk "+strconv.Itoa(at), fmt.Sprintf(`WF.sessions.step.index >= %d`, at))
		var holder string
		enginetest.WaitFor(t, "one replica to hold the session", func() bool {
			holder = ""
			open := 0
			for name, p := range slots {
				if k := sessionsOpen(p); k > 0 {
					holder, open = name, open+k
				}
			}
			return open == 1
		})
		killed := index()
		drained := tc.drain && n == 1
		if drained {
			slots[holder].cmd.Process.Signal(syscall.SIGTERM)
		} else {
			slots[holder].cmd.Process.Kill()
		}
		<-slots[holder].exited
		kills = append(kills, killed)
		wait("the page to reconnect", fmt.Sprintf(`WF.sessions.step.index > %d && !WF.sessions.step.lost && document.querySelector('.liveview .status').textContent.startsWith('Reconnected (a stall of ')`, killed))
		if drained {
			closes, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`window.closes`))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(closes, 1001) {
				t.Fatalf("the drained replica's WebSocket closed with %v, want 1001 (going away)", closes)
			}
		}
		stall, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`WF.sessions.step.stall`))
		if err != nil {
			t.Fatal(err)
		}
		stalls = append(stalls, fmt.Sprintf("%.0f ms", stall))
		press(kb.ArrowDown)
		if err := chromedp.Do(ctx, arrowKey(held, false)); err != nil {
			t.Fatal(err)
		}
		press(kb.ArrowLeft, kb.ArrowUp)
		// A new replica in place of the killed one.
		slots[holder] = replica()
		bal.setReplica(t, holder, slots[holder])
		replicasSeen(t, bal.url, "r1", "r2")
	}
	last := index()
	wait("a few chunks more", fmt.Sprintf(`WF.sessions.step.index >= %d`, last+4))
	if tc.giveUp {
		for _, p := range slots {
			p.cmd.Process.Kill()
			<-p.exited
		}
		wait("the page to give up", `document.querySelector('.liveview .status').textContent.startsWith('Stopped: the connection broke and reconnecting failed (') &&
			!document.getElementById('step--start').disabled`)
		st, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.liveview .status').textContent`))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("with both replicas gone the page says %q", st)
	} else if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("step--stop"))); err != nil {
		t.Fatal(err)
	}

	var seen struct {
		Shown  []string
		Sent   [][2]json.RawMessage
		Index  int
		First  int
		Snaps  int
		Name   string
		Inputs []struct {
			Name string
			Data []float64
		}
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({shown, sent, index: WF.sessions.step.index, first: WF.sessions.step.first, snaps: WF.sessions.step.snaps.length, name: WF.sessions.step.conn.name, inputs: WF.requests.step})`))
	if err == nil {
		err = json.Unmarshal([]byte(raw), &seen)
	}
	if err != nil {
		t.Fatal(err)
	}
	if seen.Name != transport {
		t.Errorf("the page's last connection was over %q, want %s: a resume keeps the transport", seen.Name, transport)
	}
	if !tc.key && seen.Snaps != 0 {
		t.Errorf("the page holds %d snapshots from replicas without a session key", seen.Snaps)
	}
	// The form sends the speed it shows, the manifest's default.
	params := tinyworld.DefaultStepParams()
	if seen.First != 0 || len(seen.Inputs) != 1 || seen.Inputs[0].Name != "speed" || !slices.Equal(seen.Inputs[0].Data, []float64{params.Speed}) {
		t.Fatalf("the page's session started at chunk %d with inputs %+v, want chunk 0 and speed %v", seen.First, seen.Inputs, params.Speed)
	}

	// The controls the page sent for each chunk: the same each time.
	ctl := map[int]stream.Controls{}
	acks0 := 0
	for _, m := range seen.Sent {
		var ack int
		var c stream.Controls
		if err := json.Unmarshal(m[0], &ack); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(m[1], &c); err != nil {
			t.Fatal(err)
		}
		if prev, ok := ctl[ack+1]; ok && !maps.Equal(prev, c) {
			t.Errorf("the page sent controls %v, then %v for chunk %d", prev, c, ack+1)
		}
		ctl[ack+1] = c
		if ack == 0 {
			acks0++
		}
	}
	// Chunk 0 is acked again only by a resume from the session's start:
	// each one without a session key, none with one (the first kill comes
	// after the first snapshot).
	want0 := 1
	if !tc.key {
		want0 += len(kills)
	}
	if acks0 != want0 {
		t.Errorf("the page acked chunk 0 %d times, want %d (session key: %v)", acks0, want0, tc.key)
	}
	// The in-process session, with those controls.
	in, err := tinyworld.New(client.WithCheckpointRoot(tiny.Dir(t)), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ref, err := in.StepStream(sctx, params, stream.WithPacing(false), stream.WithMaxChunks(seen.Index+1))
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	moved := 0
	for i := 0; i <= seen.Index; i++ {
		if i > 0 {
			c, ok := ctl[i]
			if !ok {
				t.Fatalf("the page sent no controls for chunk %d", i)
			}
			if len(c) > 0 {
				moved++
			}
			if err := ref.SetControls(c); err != nil {
				t.Fatal(err)
			}
		}
		got := false
		for ch, err := range ref.Chunks(sctx) {
			if err != nil {
				t.Fatal(err)
			}
			f := ch.Video.Frames.Data
			size := len(f) / int(ch.Video.Frames.Shape[0])
			for off := 0; off < len(f); off += size {
				want = append(want, f[off:off+size])
			}
			got = true
			break
		}
		if !got {
			t.Fatalf("the in-process session ended before chunk %d", i)
		}
	}
	// The page draws every frame of the chunks it got, but the last
	// chunk's later frames only while it plays: compare what it drew.
	if len(seen.Shown) > len(want) || len(seen.Shown) < len(want)-3 {
		t.Fatalf("the page drew %d frames of %d chunks; the in-process session made %d", len(seen.Shown), seen.Index+1, len(want))
	}
	for i, s := range seen.Shown {
		rgba, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		var rgb []byte
		for p := 0; p+3 < len(rgba); p += 4 {
			rgb = append(rgb, rgba[p:p+3]...)
		}
		if !bytes.Equal(rgb, want[i]) {
			other := slices.IndexFunc(want, func(w []byte) bool { return bytes.Equal(w, rgb) })
			t.Fatalf("frame %d drawn by the page differs from the in-process session's (kills at chunks %v; it is the in-process frame %d; the page sent %s)", i, kills, other, raw)
		}
	}
	if moved < 10 || slices.Max(kills) >= seen.Index-3 {
		t.Errorf("%d chunks with a control on, kills at chunks %v of %d: want the controls to move the sprite, and chunks after the last kill", moved, kills, seen.Index)
	}
	how := "killed"
	if tc.drain {
		how = "killed (the second drained: SIGTERM, closed 1001)"
	}
	t.Logf("%d frames (%d chunks, %d with a control on) drawn as in process; %s the session's replica at chunks %v; the stall of each resume, as the page says (its first new chunk came that long after it was due to be asked for: the round trip included): %v",
		len(seen.Shown), seen.Index+1, moved, how, kills, stalls)
}
