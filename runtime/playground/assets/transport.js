/* The realtime session transport of the playground: one small module, so
   that the page does not care how a session travels. WF.transport.open(o)
   starts a session of the infer request o.request at o.base + o.path
   (/v2/models/NAME[/versions/V]) with o.headers, and returns {name,
   send(msg), close()}; msg is a ControlsRequest ({controls, ack,
   snapshot}). Callbacks: onSession(info), onChunk(response, videoBytes or
   null: the data are in the response), onSnapshot({token, next}) (the
   answer to {snapshot: true}), onError(message, broken: the connection
   broke, not the server's answer), onEnd(). wfserve's
   WebSocket session (docs/serving.md) first; SSE + the controls POST when
   the WebSocket cannot connect. */
'use strict';
(() => {
  const WF = window.WF = window.WF || {};

  // sse: POST the infer request asking for its stream (Server-Sent Events
  // read from the fetch body, so the bearer header goes along), and POST
  // each message to the session's controls URL.
  function sse(o) {
    const abort = new AbortController();
    let url = null, closed = false;
    const fail = (msg, broken) => { if (!closed) { closed = true; abort.abort(); o.onError(msg, broken); } };
    const bad = async (r) => fail(await WF.errorText(r), r.status === 404 || r.status > 501);
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
      const req = Object.assign({}, o.request, {parameters: Object.assign({stream: true}, o.request.parameters)});
      const r = await fetch(o.base + o.path + '/infer', {
        method: 'POST', signal: abort.signal, body: JSON.stringify(req),
        headers: Object.assign({'Content-Type': 'application/json', Accept: 'text/event-stream'}, o.headers),
      });
      if (!r.ok) return bad(r);
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
      if (!closed) fail('the server closed the stream', true);
    })().catch((e) => fail(String(e && e.message || e), true));
    return {
      name: 'sse',
      async send(msg) {
        if (!url || closed) return;
        const r = await fetch(o.base + url, {
          method: 'POST', body: JSON.stringify(msg),
          headers: Object.assign({'Content-Type': 'application/json'}, o.headers),
        }).catch((e) => fail(e.message, true));
        if (!r) return;
        if (!r.ok) return bad(r);
        if (msg.snapshot) {
          const a = await r.json();
          if (a.snapshot && !closed && o.onSnapshot) o.onSnapshot(a.snapshot);
        }
      },
      close() { closed = true; abort.abort(); },
    };
  }

  // websocket: one connection per session (subprotocol wfgen.session.v1,
  // the token as a second offered subprotocol); a chunk's text message is
  // followed by a binary one holding its video's bytes.
  let up = 0;
  function websocket(o) {
    let closed = false, pending = null, said = null;
    const url = (o.base || location.origin).replace(/^http/, 'ws') + o.path + '/stream';
    const protocols = ['wfgen.session.v1'];
    const auth = (o.headers.Authorization || '').replace(/^Bearer /, '');
    if (auth) {
      const b = String.fromCharCode(...new TextEncoder().encode(auth));
      protocols.push('base64url.bearer.wfgen.' + btoa(b).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, ''));
    }
    const ws = new WebSocket(url, protocols);
    ws.binaryType = 'arraybuffer';
    const fail = (msg, broken) => { if (!closed) { closed = true; ws.close(); o.onError(msg, broken); } };
    ws.onopen = () => { up = 1; ws.send(JSON.stringify(o.request)); };
    ws.onmessage = (m) => {
      if (typeof m.data !== 'string') {
        if (pending) o.onChunk(pending, new Uint8Array(m.data));
        pending = null;
        return;
      }
      const {event, data} = JSON.parse(m.data);
      if (event === 'session') o.onSession(data);
      else if (event === 'chunk') pending = data;
      // The close after an error says whose it is: 1001 (a drain) or
      // a status of 404 or above 501 is a break; a stuck close, not.
      else if (event === 'error') { said = data.error || 'the session failed'; setTimeout(() => fail(said), 2000); }
      else if (event === 'snapshot') { if (o.onSnapshot) o.onSnapshot(data); }
      else if (event === 'refused') console.warn('controls refused: ' + data.error);
      else if (event === 'end') { closed = true; o.onEnd(); }
    };
    ws.onclose = (ev) => {
      if (closed) return;
      const st = ev.code >= 4000 && ev.code < 5000 ? ev.code - 4000 : 0;
      if (said) return fail(said, ev.code === 1001 || st === 404 || st > 501);
      // No WebSocket ever connected (no route, or a proxy that does not
      // upgrade): the same session over SSE. Once one has, this is a break.
      if (!up) { closed = true; Object.assign(handle, sse(o)); return; }
      fail('the connection closed (' + ev.code + (ev.reason ? ': ' + ev.reason : '') + ')', ev.code !== 1000);
    };
    const handle = {
      name: 'websocket',
      send(msg) { if (!closed && ws.readyState === 1) ws.send(JSON.stringify(msg)); },
      close() { closed = true; ws.close(1000); },
    };
    return handle;
  }

  WF.transport = {open: window.WebSocket ? websocket : sse};
})();
