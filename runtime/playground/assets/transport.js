/* The realtime session transport of the playground: one small module, so
   that the page does not care how a session travels. WF.transport.open
   starts a session and returns {send(msg), close()}; msg is a
   ControlsRequest ({controls, ack}). Callbacks: onSession(info),
   onChunk(response, videoBytes), onError(message), onEnd(). */
'use strict';
(() => {
  const WF = window.WF = window.WF || {};

  // sse: POST the infer request asking for its stream (Server-Sent Events
  // read from the fetch body, so the bearer header goes along), and POST
  // each message to the session's controls URL.
  function sse(o) {
    const abort = new AbortController();
    let url = null, closed = false;
    const fail = (msg) => { if (!closed) { closed = true; abort.abort(); o.onError(msg); } };
    const event = (block) => {
      let name = 'message', data = '';
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) name = line.slice(6).trim();
        else if (line.startsWith('data:')) data += line.slice(5).trim();
      }
      const d = data ? JSON.parse(data) : {};
      if (name === 'session') { url = d.controls_url; o.onSession(d); }
      else if (name === 'chunk') o.onChunk(d, null);
      else if (name === 'error') fail(d.error || 'the session failed');
      else if (name === 'end') { closed = true; o.onEnd(); }
    };
    (async () => {
      const r = await fetch(o.url, {
        method: 'POST', signal: abort.signal, body: JSON.stringify(o.request),
        headers: Object.assign({'Content-Type': 'application/json', Accept: 'text/event-stream'}, o.headers),
      });
      if (!r.ok) return fail(await WF.errorText(r));
      const rd = r.body.getReader(), dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const {value, done} = await rd.read();
        if (done) break;
        buf += dec.decode(value, {stream: true});
        for (let i; (i = buf.indexOf('\n\n')) >= 0;) {
          event(buf.slice(0, i));
          buf = buf.slice(i + 2);
        }
      }
      if (!closed) fail('the server closed the stream');
    })().catch((e) => fail(String(e && e.message || e)));
    return {
      name: 'sse',
      async send(msg) {
        if (!url || closed) return;
        const r = await fetch(o.base + url, {
          method: 'POST', body: JSON.stringify(msg),
          headers: Object.assign({'Content-Type': 'application/json'}, o.headers),
        });
        if (!r.ok) fail(await WF.errorText(r));
      },
      close() { closed = true; abort.abort(); },
    };
  }

  WF.transport = {open: sse};
})();
