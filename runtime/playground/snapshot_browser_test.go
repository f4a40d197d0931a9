//go:build cgo

package playground_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/worldfoundry/wfgen/runtime/client"
	"github.com/worldfoundry/wfgen/runtime/serve"
	"github.com/worldfoundry/wfgen/runtime/stream"
)

// sessionKey seals the snapshots of TestBrowserRewindFork's server.
var sessionKey = []byte("playground-test-session-key-0123")

// restored is what the page holds of a session restored from a snapshot:
// the snapshot, the first chunk it got and that chunk's frames.
type restored struct {
	Restored struct {
		Token string
		Next  int
	}
	First int
	Chunk []int
	Index int
}

func readRestored(t *testing.T, ctx context.Context) restored {
	t.Helper()
	var r restored
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const s = WF.sessions.play;
		return JSON.stringify({restored: s.restored, first: s.first, chunk: Array.from(s.firstChunk), index: s.index}); })()`))
	if err == nil {
		err = json.Unmarshal([]byte(raw), &r)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// inProcess restores the sealed token in process (the world model's own
// client) and returns the frames of its first chunk, with the controls the
// snapshot holds: the page held no key, so it sent none either.
func inProcess(t *testing.T, s *served, token string) (int, []byte) {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(token)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := stream.Open(b, sessionKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(loadSpec(t, "worldmodel"), client.WithCheckpointRoot(s.worldRoot), client.WithDevice("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess, err := c.RestoreStream(ctx, snap, stream.WithPacing(false), stream.WithMaxChunks(1))
	if err != nil {
		t.Fatal(err)
	}
	for ch, err := range sess.Chunks(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		return ch.Index, bytes.Clone(ch.Video.Frames.Data)
	}
	t.Fatal("the in-process restore gave no chunk")
	return 0, nil
}

func byteSlice(v []int) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

// TestBrowserRewindFork plays the world model in the page of a server with
// a session key: the page counts the players on the server, Rewind goes
// back to a snapshot a few seconds old (the frames after it are an
// in-process restore's of the same token, bit for bit), and Fork opens a
// second page that plays on from the latest snapshot; the players count
// goes up with it and down when it closes. The first page plays over the
// WebSocket, then over SSE (a page without WebSocket: the snapshots come
// in the controls POST's answers).
func TestBrowserRewindFork(t *testing.T) {
	bctx := browser(t)
	s := startServer(t, func(c *serve.Config) { c.SessionKey = sessionKey })
	// The players count needs the page's token.
	r, err := http.Get(s.url + "/v2/models/worldmodel/sessions")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusUnauthorized {
		t.Errorf("the sessions endpoint without the token: %s, want 401", r.Status)
	}
	for _, transport := range []string{"websocket", "sse"} {
		t.Run(transport, func(t *testing.T) { rewindFork(t, bctx, s, transport) })
	}
}

func rewindFork(t *testing.T, bctx context.Context, s *served, transport string) {
	ctx, cancel := tab(t, bctx)
	defer cancel()
	if transport == "sse" {
		if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `window.WebSocket = undefined;`}); err != nil {
			t.Fatal(err)
		}
	}
	// Polled by interval: a background tab (the first page, once the fork
	// opened) paints no animation frames.
	wait := func(ctx context.Context, what, cond string) {
		t.Helper()
		err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)))
		if err == nil {
			return
		}
		dump(t, ctx)
		p, _ := chromedp.Run(context.WithoutCancel(ctx), chromedp.Evaluate[string](`document.getElementById('play--players').textContent`))
		t.Fatalf("waiting for %s (%s): %v; the page says %q; the server has %v sessions open", what, cond, err, p, sessionsOpen(t, s.url))
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/playground/worldmodel")); err != nil {
		t.Fatal(err)
	}
	if err := login(ctx); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("play--start")), chromedp.Click(chromedp.ID("play--start"))); err != nil {
		t.Fatal(err)
	}
	if name, err := chromedp.Run(ctx, chromedp.Evaluate[string](`WF.sessions.play.conn.name`)); err != nil || name != transport {
		t.Errorf("the page plays over %q (%v), want %s", name, err, transport)
	}
	wait(ctx, "one player on the server", `document.getElementById('play--players').dataset.players === '1'`)
	// Snapshots are taken once a second; Rewind needs one.
	wait(ctx, "two snapshots", `WF.sessions.play.snaps.length >= 2 && !document.getElementById('play--rewind').disabled`)
	before, err := chromedp.Run(ctx, chromedp.Evaluate[int](`WF.sessions.play.index`))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("play--rewind"))); err != nil {
		t.Fatal(err)
	}
	wait(ctx, "the rewound session's first chunk", `WF.sessions.play.restored && WF.sessions.play.first != null`)
	r := readRestored(t, ctx)
	if r.First != r.Restored.Next || r.Restored.Next >= before {
		t.Errorf("after Rewind at chunk %d the session starts at chunk %d, its snapshot's next is %d: want the snapshot's, before %d", before, r.First, r.Restored.Next, before)
	}
	t.Logf("rewound from chunk %d to chunk %d; the token is %d bytes of base64", before, r.Restored.Next, len(r.Restored.Token))
	idx, frames := inProcess(t, s, r.Restored.Token)
	if idx != r.First || !bytes.Equal(frames, byteSlice(r.Chunk)) {
		t.Errorf("the rewound page shows chunk %d; the in-process restore of its token gives chunk %d, equal frames: %v", r.First, idx, bytes.Equal(frames, byteSlice(r.Chunk)))
	}
	// The old session is closed: still one player.
	wait(ctx, "the rewound session to play on", fmt.Sprintf(`WF.sessions.play.index >= %d`, r.First+2))
	if n := sessionsOpen(t, s.url); n != 1 {
		t.Errorf("%v sessions open after Rewind, want 1 (the old one closed)", n)
	}

	// Fork: a second page, restored from the latest snapshot.
	wait(ctx, "a snapshot of the rewound session", `WF.sessions.play.snaps.some((x) => x.next > WF.sessions.play.first) && !document.getElementById('play--fork').disabled`)
	opened := chromedp.WaitNewTarget(ctx, func(i *target.Info) bool { return strings.Contains(i.URL, "/playground/worldmodel") })
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("play--fork"))); err != nil {
		t.Fatal(err)
	}
	var id target.ID
	select {
	case id = <-opened:
	case <-ctx.Done():
		t.Fatal("Fork opened no page")
	}
	fctx, fcancel := chromedp.NewContext(ctx, chromedp.WithTargetID(id))
	defer fcancel()
	wait(fctx, "the fork's first chunk", `WF.sessions.play && WF.sessions.play.restored && WF.sessions.play.first != null`)
	f := readRestored(t, fctx)
	tokens, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`WF.sessions.play.snaps.map((x) => x.token)`))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tok := range tokens {
		found = found || tok == f.Restored.Token
	}
	if !found || f.First != f.Restored.Next {
		t.Errorf("the fork starts at chunk %d from a snapshot whose next is %d, one of the first page's: %v", f.First, f.Restored.Next, found)
	}
	idx, frames = inProcess(t, s, f.Restored.Token)
	if idx != f.First || !bytes.Equal(frames, byteSlice(f.Chunk)) {
		t.Errorf("the fork shows chunk %d; the in-process restore of its token gives chunk %d, equal frames: %v", f.First, idx, bytes.Equal(frames, byteSlice(f.Chunk)))
	}
	// The token never stays in the fork's address (nor reaches the server).
	if href, err := chromedp.Run(fctx, chromedp.Evaluate[string](`location.href`)); err != nil || strings.Contains(href, "#") {
		t.Errorf("the fork's address is %q (%v), want no fragment", href, err)
	}
	// Two players, on both pages; one again when the fork closes.
	wait(ctx, "two players on the first page", `document.getElementById('play--players').dataset.players === '2'`)
	wait(fctx, "two players on the fork's page", `document.getElementById('play--players').dataset.players === '2'`)
	fcancel()
	wait(ctx, "one player again", `document.getElementById('play--players').dataset.players === '1'`)
	cancel()
	waitSessions(t, s.url, 0)
}
