/* The wfgen playground: builds a form per task from the family description
   (runtime/playground's Family JSON) and calls the Open Inference Protocol
   REST API; a streaming task gets a live view driven from the keyboard. */
'use strict';
(() => {
  const WF = window.WF = window.WF || {};
  const ds = document.body.dataset, main = document.getElementById('main');
  const isStatic = ds.static === '1';
  const query = new URLSearchParams(location.search);
  const st = WF.state = {
    server: isStatic ? (query.get('server') || localStorage.getItem('wf-server') || '') : '',
    token: '',
  };
  // A token is kept for the server it was given for: a link whose ?server=
  // names another server gets none of it until the user gives it one.
  const tokenKey = () => {
    let origin = location.origin;
    try { if (st.server) origin = new URL(st.server, location.href).origin; } catch (e) { origin = st.server; }
    return 'wf-token ' + origin;
  };
  st.token = sessionStorage.getItem(tokenKey()) || '';
  WF.sessions = {};
  WF.results = {}; // the last outputs of each task, by task id
  WF.requests = {}; // the last inputs sent, by task id

  function el(tag, props, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v == null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids.flat()) if (k != null && k !== false && k !== '') e.append(k);
    return e;
  }

  const base = () => st.server.replace(/\/+$/, '');
  const headers = (extra) => Object.assign(st.token ? {Authorization: 'Bearer ' + st.token} : {}, extra);
  WF.errorText = async (r) => {
    const t = await r.text();
    try { const j = JSON.parse(t); if (j.error) return j.error; } catch (e) { /* not JSON */ }
    return r.status + ' ' + (/^\s*</.test(t) ? r.statusText : t || r.statusText); // a proxy's HTML: its status
  };
  async function api(path, init) {
    init = Object.assign({}, init);
    init.headers = headers(init.headers);
    const r = await fetch(base() + path, init);
    if (r.status === 401) askToken();
    return r;
  }

  // The connection box: the bearer token (wfserve -token-file) and, for
  // the static page, the server's URL.
  const conn = document.getElementById('conn'), connMsg = document.getElementById('conn-msg');
  const tokenIn = document.getElementById('token'), serverIn = document.getElementById('server');
  tokenIn.value = st.token;
  if (serverIn) serverIn.value = st.server;
  document.getElementById('conn-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (serverIn) { st.server = serverIn.value.trim(); localStorage.setItem('wf-server', st.server); }
    st.token = tokenIn.value.trim();
    sessionStorage.setItem(tokenKey(), st.token);
    connMsg.textContent = 'Saved.';
    if (!loaded) init().then(() => { if (loaded) conn.open = false; });
  });
  function askToken() {
    conn.open = true;
    connMsg.textContent = 'This server needs a bearer token: enter it and save.';
    tokenIn.setAttribute('aria-invalid', 'true');
    tokenIn.focus();
  }

  let loaded = false; // the page is built: saving the token keeps its form
  async function init() {
    let fams = window.WF_FAMILIES;
    if (!fams) {
      let r;
      try { r = await api(ds.desc); } catch (e) { return fatal('Cannot reach the server: ' + e.message); }
      if (!r.ok) return fatal('Cannot load the models: ' + await WF.errorText(r));
      fams = await r.json();
    }
    tokenIn.removeAttribute('aria-invalid');
    loaded = true;
    if (!ds.family) return index(fams);
    const f = fams.find((x) => x.id === ds.family);
    if (!f) return fatal('No model ' + ds.family);
    family(f);
  }
  function fatal(msg) { main.replaceChildren(el('p', {class: 'error', role: 'alert', text: msg})); }

  function index(fams) {
    document.title = 'Playground';
    main.replaceChildren(el('h1', {text: 'Served models'}), el('ul', {class: 'families'}, fams.map((f) =>
      el('li', {}, el('a', {href: ds.home + 'playground/' + encodeURIComponent(f.id), text: f.name}),
        el('span', {class: 'help', text: ' ' + f.id + ' · ' + f.tasks.map((t) => t.label + (t.stream ? ' (live)' : '')).join(', ')}),
        f.description ? el('p', {text: f.description}) : null))));
  }

  function family(f) {
    document.title = f.name + ' · playground';
    let ver = null;
    if (f.versions.length > 1) {
      ver = el('select', {id: 'version'}, f.versions.map((v) => el('option', {value: v, text: v})));
    }
    const path = (suffix) => '/v2/models/' + encodeURIComponent(f.id) +
      (ver ? '/versions/' + encodeURIComponent(ver.value) : '') + suffix;
    main.replaceChildren(...[el('h1', {text: f.name}), f.description ? el('p', {text: f.description}) : null,
      ver ? el('p', {}, el('label', {for: 'version', text: 'Variant '}), ver) : null,
      f.tasks.map((t) => taskView(f, t, path))].flat().filter(Boolean));
  }

  const id = (...parts) => parts.join('-').replace(/[^A-Za-z0-9_-]/g, '_');
  const values = (o) => (o.data || []).flat(Infinity);

  // raw is a tensor's datatype and shape as the protocol gives them (* any
  // size); shapeWords says what the field or output holds in words.
  const raw = (x) => x.datatype + ' [' + (x.shape ? x.shape.map((d) => d < 0 ? '*' : d) : '…') + ']';
  const channelWords = {L: '1 channel (grey)', RGB: '3 channels (RGB)', BGR: '3 channels (BGR)', RGBA: '4 channels (RGBA)'};
  function pictureSize(x) {
    const p = x.picture, dims = x.kind === 'video' ? (x.shape || []).slice(1) : x.shape || [], chw = p.layout === 'CHW';
    const H = dims[chw ? 1 : 0], W = dims[chw ? 2 : 1];
    return {H: H > 0 ? H : 0, W: W > 0 ? W : 0, T: x.kind === 'video' && x.shape && x.shape[0] > 0 ? x.shape[0] : 0};
  }
  function shapeWords(x) {
    const s = x.shape, num = /INT/.test(x.datatype) ? 'whole numbers' : x.datatype === 'BOOL' ? 'true/false values' : 'numbers';
    if (x.picture) {
      const {H, W, T} = pictureSize(x), size = H && W ? W + '×' + H : 'any size', ch = channelWords[x.picture.channels] || x.picture.channels;
      if (x.kind === 'video') return (T ? T + ' frames' : 'frames') + ' of ' + size + ', ' + ch;
      return size + ' picture, ' + ch;
    }
    if (!s) return num + ', any shape';
    if (s.length === 0 || s.length === 1 && s[0] === 1) return 'one ' + num.replace(/s$/, '');
    if (s.length === 1) return s[0] > 0 ? 'a list of ' + s[0] + ' ' + num : 'a list of ' + num + ' (any length)';
    return 'a ' + s.map((d) => d < 0 ? 'n' : d).join('×') + ' table of ' + num + ' (nested lists)';
  }
  const kindWords = {string: 'text', int: 'whole number', float: 'number', bool: 'yes/no', image: 'picture', video: 'frames',
    tensor: 'numbers', tensor_list: 'lists of numbers', tensor_dict: 'numbers', tensor_tuple: 'numbers', string_list: 'texts', int_list: 'whole numbers', float_list: 'numbers', bool_list: 'yes/no values'};

  // bounds summarises a field's rules in words; the protocol's datatype
  // and shape of a tensor-like field follow in small print.
  function bounds(fi) {
    const tensorish = fi.kind.match(/tensor|image|video/);
    const b = [tensorish ? shapeWords(fi) : kindWords[fi.kind] || fi.kind];
    if (fi.presence === 'required') b.push('required');
    if (fi.default !== undefined) b.push('default ' + JSON.stringify(fi.default));
    if (fi.minimum != null || fi.maximum != null) b.push((fi.minimum ?? '…') + ' to ' + (fi.maximum ?? '…'));
    if (fi.multiple_of) b.push(fi.multiple_of + 'k' + (fi.remainder ? '+' + fi.remainder : ''));
    if (fi.min_length != null || fi.max_length != null) b.push('length ' + (fi.min_length ?? 0) + ' to ' + (fi.max_length ?? '…'));
    if (fi.pattern) b.push('matches ' + fi.pattern);
    return el('small', {class: 'rules'}, b.join(' · '), tensorish ? [' · ', el('code', {class: 'raw', title: 'datatype and shape sent', text: raw(fi)})] : null);
  }

  // fieldView builds one field's label, control, help and error slot;
  // value() gives its input tensor, or null to leave it out.
  function fieldView(t, fi, hooks) {
    const fid = id(t.id, fi.name), help = fid + '-help', err = fid + '-err';
    const aria = {id: fid, name: fi.name, 'aria-describedby': help + ' ' + err};
    let control, value, pic = null, view = null;
    const scalar = (v) => {
      if (fi.kind.startsWith('int')) return /^[-+]?\d+$/.test(v) ? Number(v) : v;
      if (fi.kind.startsWith('float')) return v !== '' && isFinite(Number(v)) ? Number(v) : v;
      if (fi.kind.startsWith('bool')) return v === 'true' || v === '1';
      return v;
    };
    const dt = {string: 'BYTES', int: 'INT64', float: 'FP64', bool: 'BOOL'}[fi.kind.replace('_list', '')];
    if (fi.choices) {
      control = el('select', aria, fi.presence === 'required' ? null : el('option', {value: '', text: '(default)'}),
        fi.choices.map((c) => el('option', {value: c, text: c, selected: c === fi.default})));
    } else if (fi.kind === 'bool') {
      control = el('input', Object.assign({type: 'checkbox', checked: fi.default === true}, aria));
    } else if (fi.kind === 'int' || fi.kind === 'float') {
      control = el('input', Object.assign({type: 'number', inputmode: fi.kind === 'int' ? 'numeric' : 'decimal',
        step: fi.kind === 'int' ? (fi.multiple_of || 1) : 'any', min: fi.minimum, max: fi.maximum,
        value: fi.default}, aria));
    } else if (fi.kind === 'image' || fi.kind === 'video') {
      pic = pictureInput(t, fi, aria, hooks, (msg) => view.setError(msg));
      control = pic.input;
      value = pic.value;
    } else if (fi.kind.startsWith('tensor')) {
      control = el('textarea', Object.assign({rows: 3, placeholder: 'JSON: nested arrays of numbers'}, aria));
    } else if (fi.kind.endsWith('_list')) {
      control = el('input', Object.assign({type: 'text', placeholder: 'comma-separated',
        value: fi.default ? fi.default.join(', ') : null}, aria));
    } else {
      control = el('input', Object.assign({type: 'text', value: fi.default, maxlength: null}, aria));
    }
    if (!value) {
      value = async () => {
        const c = control;
        if (fi.kind === 'bool') return {name: fi.name, datatype: 'BOOL', shape: [1], data: [c.checked]};
        const v = c.value.trim();
        if (v === '' && fi.kind !== 'string') return null;
        if (v === '' && fi.presence !== 'required' && !c.value) return null;
        if (fi.kind.startsWith('tensor')) return tensorInput(fi, v);
        if (fi.kind.endsWith('_list')) {
          const items = v.split(',').map((s) => s.trim()).filter((s) => s !== '').map(scalar);
          return {name: fi.name, datatype: dt, shape: [items.length], data: items};
        }
        return {name: fi.name, datatype: dt, shape: [1], data: [fi.kind === 'string' ? c.value : scalar(v)]};
      };
    }
    const error = el('p', {class: 'error', id: err, role: 'alert'});
    const node = el('div', {class: 'field'},
      el('label', {for: fid}, fi.label, el('span', {class: 'kind', text: ' (' + fi.name + ')'})), pic ? pic.node : control,
      el('p', {class: 'help', id: help}, fi.description ? fi.description + ' ' : '', bounds(fi)),
      error);
    // An error marks the field's own control (a picture's file input) and
    // shows beside it; focus() moves there.
    return view = {fi, node, value, control,
      setError(msg) {
        error.textContent = msg || '';
        if (msg) control.setAttribute('aria-invalid', 'true'); else control.removeAttribute('aria-invalid');
      },
      focus() { control.focus(); }};
  }

  // tensorInput reads a tensor field's JSON: nested lists, rectangular,
  // fitted to the field's rank by adding or dropping leading dimensions of
  // size 1 (a [1, L] item typed as [[1, 2, 3]] or [1, 2, 3] alike).
  function tensorInput(fi, text) {
    let v;
    try { v = JSON.parse(text); } catch (e) { throw new Error('not a list of numbers: ' + e.message + ' (type nested lists such as [[1, 2, 3]])'); }
    const shape = [];
    for (let x = v; Array.isArray(x); x = x[0]) shape.push(x.length);
    const check = (x, d) => {
      if (d === shape.length) { if (typeof x !== 'number' && typeof x !== 'boolean') throw new Error('not a number: ' + JSON.stringify(x)); return; }
      if (!Array.isArray(x) || x.length !== shape[d]) throw new Error('the lists are not all the same length (a table needs every row as long as the first, ' + shape.slice(d).join('×') + ')');
      x.forEach((y) => check(y, d + 1));
    };
    check(v, 0);
    const want = fi.shape;
    if (want) {
      while (shape.length > want.length && shape[0] === 1) shape.shift();
      while (shape.length < want.length && want[want.length - shape.length - 1] === 1) shape.unshift(1);
      if (shape.length !== want.length || want.some((d, i) => d >= 0 && d !== shape[i])) {
        throw new Error('this field takes ' + shapeWords(fi) + ' (' + raw(fi) + '); the text is shaped [' + shape + ']');
      }
    }
    const dt = fi.datatype === 'ANY' ? 'FP32' : fi.datatype;
    return {name: fi.name, datatype: dt, shape, data: Array.isArray(v) ? v.flat(Infinity) : [v]};
  }
  WF.tensorInput = tensorInput;

  // pictureInput is an image or video field: files (a video's frames, in
  // name order), for an image a drawing pad, for a stream's optional video
  // example frames from the model itself; value() converts the picture as
  // the description's levels say (runtime/pixels' rule). A video's frames
  // must be the field's size and count: they are not resized, as a frame
  // squeezed from another picture is no world the model knows.
  function pictureInput(t, fi, aria, hooks, setError) {
    const p = fi.picture, video = fi.kind === 'video', {H, W, T} = pictureSize(fi);
    const chw = p.layout === 'CHW';
    const file = el('input', Object.assign({type: 'file', accept: 'image/*', multiple: video}, aria));
    let pad = null, drawn = false, example = null;
    const parts = [file];
    const pixelsOf = (src, w, h) => {
      const c = el('canvas', {width: w, height: h}), g = c.getContext('2d');
      g.imageSmoothingEnabled = true; g.imageSmoothingQuality = 'high';
      g.drawImage(src, 0, 0, w, h);
      return g.getImageData(0, 0, w, h).data;
    };
    const convert = (rgba, h, w) => {
      const order = p.channels, C = order === 'L' ? 1 : order === 'RGBA' ? 4 : 3, out = new Array(h * w * C);
      for (let i = 0; i < h * w; i++) {
        const r = rgba[4 * i], g = rgba[4 * i + 1], b = rgba[4 * i + 2], a = rgba[4 * i + 3];
        // luma as runtime/pixels computes it: (19595 R + 38470 G + 7471 B + 32768) >> 16
        const px = order === 'L' ? [Math.floor((19595 * r + 38470 * g + 7471 * b + 32768) / 65536)]
          : order === 'BGR' ? [b, g, r] : order === 'RGBA' ? [r, g, b, a] : [r, g, b];
        for (let k = 0; k < C; k++) {
          const v = p.levels ? p.levels[k][px[k]] : px[k];
          out[chw ? (k * h * w + i) : (i * C + k)] = v;
        }
      }
      return {data: out, shape: chw ? [C, h, w] : [h, w, C]};
    };
    let strip = null;
    const show = (imgs) => {
      if (!strip) return;
      strip.replaceChildren(...imgs.map((im, i) => {
        const c = el('canvas', {class: 'thumb', width: im.width, height: im.height, role: 'img', 'aria-label': 'Frame ' + (i + 1) + ' of ' + imgs.length});
        const g = c.getContext('2d');
        if (im instanceof ImageData) g.putImageData(im, 0, 0); else g.drawImage(im, 0, 0);
        return c;
      }));
      strip.dataset.frames = String(imgs.length);
    };
    // frames reads the chosen files, refusing what does not fit a video.
    const frames = async () => {
      const files = [...file.files].sort((a, b) => a.name.localeCompare(b.name));
      if (video && T && files.length && files.length !== T) {
        throw new Error(fi.label + ' takes ' + T + ' pictures, one per frame; ' + files.length + (files.length === 1 ? ' was' : ' were') + ' chosen.');
      }
      const bms = [];
      for (const f of files) {
        const bm = await createImageBitmap(f, {colorSpaceConversion: 'none', premultiplyAlpha: 'none'});
        if (video && (H && bm.height !== H || W && bm.width !== W)) {
          throw new Error(f.name + ' is ' + bm.width + '×' + bm.height + '; ' + fi.label + ' takes frames of ' + W + '×' + H +
            ' from the model\'s own world (they are not resized)' + (hooks.example ? ': try the example frames.' : '.'));
        }
        bms.push(bm);
      }
      return bms;
    };
    if (!video) {
      const size = 160;
      pad = el('canvas', {class: 'pad', width: size, height: size, role: 'img', 'aria-label': 'Drawing pad: draw with the mouse or a finger'});
      const g = pad.getContext('2d');
      const blank = () => { g.fillStyle = '#000'; g.fillRect(0, 0, size, size); drawn = false; };
      // Clear empties the pad and the chosen file: Run then sends nothing.
      const clear = () => { blank(); file.value = ''; setError(''); };
      blank();
      let last = null;
      const at = (ev) => { const r = pad.getBoundingClientRect(); return [(ev.clientX - r.left) * size / r.width, (ev.clientY - r.top) * size / r.height]; };
      pad.addEventListener('pointerdown', (ev) => { last = at(ev); pad.setPointerCapture(ev.pointerId); });
      pad.addEventListener('pointermove', (ev) => {
        if (!last) return;
        const q = at(ev);
        g.strokeStyle = '#fff'; g.lineWidth = size / 5; g.lineCap = 'round';
        g.beginPath(); g.moveTo(last[0], last[1]); g.lineTo(q[0], q[1]); g.stroke();
        last = q; drawn = true; file.value = '';
      });
      pad.addEventListener('pointerup', () => { last = null; });
      // An uploaded picture shows on the pad, as the model will see it.
      file.addEventListener('change', async () => {
        if (!file.files.length) return;
        const bm = await createImageBitmap(file.files[0]);
        blank();
        g.imageSmoothingEnabled = false;
        g.drawImage(bm, 0, 0, size, size);
      });
      parts.push(el('div', {class: 'padbox'}, el('span', {class: 'help', text: 'or draw:'}), pad,
        el('button', {type: 'button', class: 'clear', text: 'Clear', onclick: clear})));
    } else {
      strip = el('div', {class: 'strip', 'data-frames': '0', 'aria-live': 'polite'});
      const note = el('span', {class: 'help'});
      const none = () => { note.textContent = fi.presence === 'required' ? 'No frames chosen.' : 'None chosen: the model starts from its own start.'; };
      none();
      // Chosen files are checked and shown at once.
      file.addEventListener('change', async () => {
        example = null;
        setError('');
        try {
          const bms = await frames();
          show(bms);
          if (bms.length) note.textContent = bms.length + ' frame(s) chosen.'; else none();
        } catch (e) { show([]); note.textContent = ''; setError(e.message); file.focus(); }
      });
      const clear = () => { file.value = ''; example = null; show([]); none(); setError(''); };
      const btns = [el('button', {type: 'button', class: 'clear', text: 'Clear', onclick: clear})];
      if (hooks.example) {
        const ex = el('button', {type: 'button', class: 'example', text: 'Use example frames'});
        ex.addEventListener('click', async () => {
          ex.disabled = true;
          note.textContent = 'Asking the model for its own frames…';
          try {
            const imgs = await hooks.example(fi, T || 2);
            file.value = '';
            setError('');
            example = imgs;
            show(imgs);
            note.textContent = 'Example: the first ' + imgs.length + ' frames the model plays from its checkpoint\'s own start.';
          } catch (e) { none(); setError('No example frames: ' + e.message); } finally { ex.disabled = false; }
        });
        btns.unshift(ex);
      }
      parts.push(el('div', {class: 'framebox'}, btns, note, strip));
    }
    const datatype = fi.datatype === 'ANY' ? (p.levels ? 'FP32' : 'UINT8') : fi.datatype;
    const value = async () => {
      const out = [];
      const bms = await frames();
      if (bms.length) {
        for (const bm of bms) {
          const h = H || bm.height, w = W || bm.width;
          out.push(convert(pixelsOf(bm, w, h), h, w));
        }
      } else if (example) {
        for (const im of example) out.push(convert(im.data, im.height, im.width));
      } else if (pad && drawn) {
        const h = H || 32, w = W || 32;
        out.push(convert(pixelsOf(pad, w, h), h, w));
      }
      if (!out.length) return null;
      if (!video) return {name: fi.name, datatype, shape: out[0].shape, data: out[0].data};
      return {name: fi.name, datatype, shape: [out.length, ...out[0].shape], data: out.flatMap((x) => x.data)};
    };
    return {node: el('div', {class: 'picture'}, parts), input: file, value};
  }

  // placeError shows a server error at the field it names (quoted, or as
  // "field NAME" / "input NAME"), else under the form.
  function placeError(views, formErr, msg) {
    for (const v of views) {
      const b = v.fi.name.replace(/\.0$/, ''), n = b.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      if (msg.includes('"' + b + '"') || new RegExp('\\b(field|input)s?\\(?s?\\)? ' + n + '\\b').test(msg) ||
        new RegExp('(^|[\\s"(])' + n + '(\\[\\d+\\])?:').test(msg)) {
        v.setError(msg);
        v.focus();
        return;
      }
    }
    formErr.textContent = msg;
  }

  // collect reads every field's value; a field that cannot give one shows
  // why beside it and takes the focus.
  async function collect(views) {
    const inputs = [];
    for (const v of views) {
      let x;
      try { x = await v.value(); } catch (e) { v.setError(String(e.message || e)); v.focus(); throw e; }
      if (x) inputs.push(x);
    }
    return inputs;
  }

  function taskView(f, t, path) {
    const hid = id(t.id, '-h');
    const hooks = {};
    let views = [];
    // A stream's optional video (a world model's start) can be filled with
    // the model's own frames: a short session from the checkpoint's start,
    // no controls held, the other fields as they are.
    if (t.stream && t.inputs.some((fi) => fi.kind === 'video' && fi.presence !== 'required')) {
      hooks.example = async (fi, n) => {
        const inputs = await collect(views.filter((v) => v.fi !== fi));
        const video = t.outputs.find((o) => o.kind === 'video') || t.outputs[0];
        return new Promise((resolve, reject) => {
          const got = [];
          let done = false;
          const finish = (err) => { if (done) return; done = true; conn.close(); err ? reject(new Error(err)) : resolve(got.slice(0, n)); };
          const conn = WF.transport.open({
            base: base(), path: path(''), headers: headers(),
            request: {parameters: {task: t.id, lockstep: true, paced: false}, inputs},
            onSession() {},
            onChunk(resp, bytes) {
              const out = resp.outputs.find((o) => o.name === video.name) || resp.outputs[0];
              got.push(...frames(video, out.shape, bytes || values(out)));
              if (got.length >= n) finish();
              else conn.send({controls: {}, ack: resp.parameters.index});
            },
            onError: finish,
            onEnd() { finish('the session ended after ' + got.length + ' frame(s)'); },
          });
        });
      };
    }
    views = t.inputs.map((fi) => fieldView(t, fi, hooks));
    const formErr = el('p', {class: 'error', role: 'alert', id: id(t.id, '-err')});
    const results = el('div', {class: 'results', id: id(t.id, '-results'), 'aria-live': 'polite'});
    const clear = () => { formErr.textContent = ''; views.forEach((v) => v.setError('')); };
    const form = el('form', {novalidate: true, 'aria-labelledby': hid}, views.map((v) => v.node));
    const sec = el('section', {class: 'task', id: id('task', t.id), 'aria-labelledby': hid},
      el('h2', {id: hid, text: t.label}), t.description ? el('p', {text: t.description}) : null, form);
    if (t.stream) {
      sec.append(liveView(f, t, views, path, clear, formErr));
      sec.append(formErr);
      return sec;
    }
    const run = el('button', {type: 'submit', id: id(t.id, '-run'), text: 'Run'}), status = el('p', {class: 'status', role: 'status'});
    form.append(el('div', {class: 'actions'}, run, status), formErr);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clear();
      let inputs;
      try { inputs = await collect(views); } catch (e) { return; }
      WF.requests[t.id] = inputs;
      run.disabled = true;
      status.textContent = 'Running…';
      const t0 = performance.now();
      try {
        const r = await api(path('/infer'), {method: 'POST', headers: {'Content-Type': 'application/json'},
          body: JSON.stringify({parameters: {task: t.id}, inputs})});
        if (!r.ok) { status.textContent = ''; return placeError(views, formErr, await WF.errorText(r)); }
        const res = await r.json();
        status.textContent = 'Done in ' + Math.round(performance.now() - t0) + ' ms.';
        render(results, t, res.outputs || [], res.parameters || {});
      } catch (e) {
        status.textContent = '';
        formErr.textContent = String(e.message || e);
      } finally { run.disabled = false; }
    });
    sec.append(results);
    return sec;
  }

  // render shows each output as people look at it: a classification's
  // answer first (the top class and its probability), then each output
  // under a caption in words, its datatype and shape in small print. A
  // tensor_list artifact arrives as its elements NAME.0, NAME.1, ... and
  // its count in the response parameter the page data names (runtime/oip's
  // lists.go): each element is shown as a tensor of its own, an empty list
  // as one line saying so. Records arrive as their keys (records.go) and
  // are shown by recordFigures.
  const caption = (name, a, small) => el('figcaption', {}, el('strong', {text: name}), a.description ? ' — ' + a.description + ' ' : ' ', small);
  function render(box, t, outputs, params) {
    WF.results[t.id] = outputs;
    const artifact = (name) => t.outputs.find((x) => x.name === name) || t.outputs.find((x) => x.kind === 'tensor_list' &&
      name.startsWith(x.name + '.') && /^(0|[1-9][0-9]*)$/.test(name.slice(x.name.length + 1))) ||
      t.outputs.find((x) => x.fields && name.startsWith(x.name + '.')) || {kind: 'tensor'};
    const figs = outputs.filter((o) => !artifact(o.name).fields).map((o) => {
      const a = artifact(o.name), list = a.kind === 'tensor_list' && a.name !== o.name;
      const kind = list ? 'element ' + o.name.slice(a.name.length + 1) + ' of ' + params[a.count] : a.kind;
      const data = values(o);
      const fig = el('figure', {class: 'out', 'data-output': o.name},
        caption(o.name, a, el('small', {class: 'raw', title: 'datatype and shape received'}, kind + ' · ' + raw(o))));
      if (a.kind === 'text') fig.append(el('pre', {text: String(data[0])}));
      else if (a.kind === 'json') {
        let s = String(data[0]);
        try { s = JSON.stringify(JSON.parse(s), null, 2); } catch (e) { /* as sent */ }
        fig.append(el('pre', {text: s}));
      } else if (a.kind === 'video' || a.kind === 'image') fig.append(player(a, o.shape, data, a.fps || 16));
      else if (a.role === 'class_scores' && data.length > 1) fig.append(bars(probabilities(data.map(Number))));
      else fig.append(plot(data.map(Number), o.shape));
      return fig;
    });
    for (const a of t.outputs) {
      if (a.kind === 'tensor_list' && Number(params[a.count]) === 0) {
        figs.push(el('figure', {class: 'out', 'data-output': a.name},
          caption(a.name, a, el('small', {class: 'raw'}, 'tensor_list · 0 elements')), el('p', {text: 'An empty list.'})));
      }
      if (a.fields && params[a.count] != null) figs.push(...recordFigures(a, outputs, Number(params[a.count])));
    }
    box.replaceChildren(...[answer(t, outputs), ...figs].filter(Boolean));
  }

  // recordFigures shows a record (a dict of tensors) as a table of its
  // keys (datatype, shape, values in brief; absent ones marked), a
  // record_list as one per dict (at most maxDicts). n: the artifact's count.
  const maxDicts = 50;
  function recordFigures(a, outputs, n) {
    const byName = new Map(outputs.map((o) => [o.name, o]));
    const figure = (name, what, ...body) => el('figure', {class: 'out record', 'data-output': name},
      caption(name, a, el('small', {class: 'raw'}, what)), ...body);
    const table = (prefix) => el('table', {class: 'keys'}, el('tbody', {}, a.fields.map((k) => {
      const o = byName.get(prefix + k);
      return el('tr', {'data-key': k, class: o ? null : 'absent'}, el('th', {scope: 'row', text: k}),
        el('td', {class: 'raw', text: o ? raw(o) : '—'}), el('td', {class: 'values', text: o ? brief(o) : 'absent'}));
    })));
    if (a.kind === 'record') return [figure(a.name, 'record · ' + n + ' of ' + a.fields.length + ' keys', table(a.name + '.'))];
    if (n === 0) return [figure(a.name, 'record_list · 0 elements', el('p', {text: 'An empty list.'}))];
    const figs = [];
    for (let i = 0; i < n && i < maxDicts; i++) figs.push(figure(a.name + '.' + i, 'element ' + i + ' of ' + n, table(a.name + '.' + i + '.')));
    if (n > maxDicts) figs.push(el('p', {class: 'more', text: (n - maxDicts) + ' more elements not shown.'}));
    return figs;
  }

  // brief says what a tensor holds in a few words: its values when there
  // are few, else how many and their range.
  function brief(o) {
    const v = values(o);
    if (v.length === 0) return 'no values';
    if (v.length <= 6) return v.map(String).join(', ');
    let lo = Infinity, hi = -Infinity;
    for (const x of v) { const y = Number(x); if (y < lo) lo = y; if (y > hi) hi = y; }
    return v.length + ' values from ' + lo.toPrecision(4) + ' to ' + hi.toPrecision(4);
  }

  // probabilities are the scores as they are when they already are a
  // distribution, else their softmax (logits).
  function probabilities(v) {
    const sum = v.reduce((a, b) => a + b, 0);
    if (v.every((x) => x >= 0 && x <= 1) && Math.abs(sum - 1) < 1e-3) return v;
    const m = Math.max(...v), e = v.map((x) => Math.exp(x - m)), z = e.reduce((a, b) => a + b, 0);
    return e.map((x) => x / z);
  }
  const percent = (x) => (x * 100).toFixed(1) + ' %';
  const argmax = (v) => v.reduce((best, x, i) => x > v[best] ? i : best, 0);

  // answer is a classification's result in one line: the class the model
  // chose (its class output, else the top score) and its probability.
  function answer(t, outputs) {
    const get = (role) => {
      const a = t.outputs.find((x) => x.role === role);
      const o = a && outputs.find((x) => x.name === a.name);
      return o ? values(o).map(Number) : null;
    };
    const scores = get('class_scores'), cls = get('class');
    if (!(scores && scores.length > 1) && !(cls && cls.length === 1)) return null;
    const p = scores && scores.length > 1 ? probabilities(scores) : null;
    const top = cls && cls.length === 1 ? cls[0] : argmax(p);
    return el('p', {class: 'answer', 'data-class': top},
      el('span', {class: 'answer-label', text: 'Answer'}), el('span', {class: 'top1', text: String(top)}),
      p && p[top] != null ? [el('span', {class: 'prob', text: percent(p[top])}), el('span', {class: 'help', text: ' probability'})] : null);
  }

  // bars draws class probabilities as labelled horizontal bars, the top
  // class marked.
  function bars(p) {
    const best = argmax(p);
    return el('ol', {class: 'bars', start: 0, 'aria-label': 'Probability of each class'}, p.map((x, i) =>
      el('li', {'data-class': i, class: i === best ? 'best' : null},
        el('span', {class: 'cl', text: String(i)}),
        el('span', {class: 'track'}, el('span', {class: 'bar', style: 'width:' + (x * 100).toFixed(2) + '%'})),
        el('span', {class: 'pc', text: percent(x)}))));
  }

  // frames turns an image or video tensor into ImageData frames, undoing
  // the artifact's conversion.
  function frames(a, shape, data) {
    const p = a.picture || {layout: 'HWC', channels: 'RGB'};
    const s = shape.length === 4 ? shape.slice(1) : shape, T = shape.length === 4 ? shape[0] : 1;
    const chw = p.layout === 'CHW', C = chw ? s[0] : s[2], H = chw ? s[1] : s[0], W = chw ? s[2] : s[1];
    const [lo, hi] = p.range || [0, 1];
    const floating = p.range || p.mean || !/INT|UINT8|BOOL/.test(a.datatype || 'UINT8');
    const level = (v, k) => {
      v = Number(v);
      if (floating) {
        if (p.mean) v = v * p.std[k] + p.mean[k];
        v = (v - lo) / (hi - lo) * 255;
      }
      return v > 0 ? Math.min(255, Math.round(v)) : 0;
    };
    const out = [];
    for (let f = 0; f < T; f++) {
      const img = new ImageData(W, H), off = f * H * W * C;
      for (let i = 0; i < H * W; i++) {
        const at = (k) => level(data[off + (chw ? k * H * W + i : i * C + k)], k);
        const v = C === 1 ? [at(0), at(0), at(0), 255] : [at(0), at(1), at(2), C === 4 ? at(3) : 255];
        if (p.channels === 'BGR') [v[0], v[2]] = [v[2], v[0]];
        img.data.set(v, 4 * i);
      }
      out.push(img);
    }
    return out;
  }
  WF.frames = frames;

  function player(a, shape, data, fps) {
    const fr = frames(a, shape, data);
    const c = el('canvas', {class: 'frames', width: fr[0].width, height: fr[0].height, role: 'img',
      'aria-label': a.kind + ': ' + fr.length + ' frame(s) of ' + fr[0].width + '×' + fr[0].height});
    const g = c.getContext('2d');
    let i = 0;
    g.putImageData(fr[0], 0, 0);
    if (fr.length > 1) {
      const timer = setInterval(() => {
        if (!c.isConnected) return clearInterval(timer);
        i = (i + 1) % fr.length;
        g.putImageData(fr[i], 0, 0);
      }, 1000 / fps);
    }
    return c;
  }

  // plot draws numbers as bars (class scores, an embedding) with a summary
  // screen readers read; a single number is text.
  function plot(v, shape) {
    if (v.length === 1) return el('p', {class: 'scalar', text: String(v[0])});
    const best = argmax(v), min = Math.min(0, ...v), max = Math.max(0, ...v), w = 320, h = 96;
    const c = el('canvas', {class: 'plot', width: w, height: h, role: 'img'});
    const g = c.getContext('2d'), bw = w / v.length, y0 = h * max / ((max - min) || 1);
    g.fillStyle = '#eef'; g.fillRect(0, 0, w, h);
    v.forEach((x, i) => {
      g.fillStyle = i === best ? '#c60' : '#36a';
      const y = h * x / ((max - min) || 1);
      g.fillRect(i * bw + (bw > 3 ? 1 : 0), y0 - Math.max(y, 0), Math.max(bw - (bw > 3 ? 2 : 0), 1), Math.abs(y) || 1);
    });
    const summary = v.length + ' values from ' + min.toPrecision(4) + ' to ' + max.toPrecision(4) +
      '; largest ' + v[best].toPrecision(4) + ' at index ' + best;
    c.setAttribute('aria-label', summary);
    return el('div', {}, c, el('p', {class: 'summary', 'data-argmax': best, text: summary}));
  }

  const keyLabel = (k) => ({ArrowUp: '↑', ArrowDown: '↓', ArrowLeft: '←', ArrowRight: '→', ' ': 'Space'}[k] || k.toUpperCase());

  // A fork's page: the snapshot to restore, from the URL's fragment
  // (#fork=JSON: task, path, token, next, inputs), taken out of the address.
  let forked = null;
  if (location.hash.startsWith('#fork=')) {
    try { forked = JSON.parse(decodeURIComponent(location.hash.slice(6))); } catch (e) { console.warn('a fork that does not read: ' + e.message); }
    history.replaceState(null, '', location.pathname + location.search);
  }
  const REWIND_S = 3, KEEP = 4, PLAYERS_MS = 2000;

  // liveView runs a realtime session: the client asks for each chunk
  // (lockstep, its own clock at the realtime fps), so a key pressed
  // between two frames applies to the next frame the server makes.
  function liveView(f, t, views, path, clear, formErr) {
    const rt = t.realtime, interval = 1000 / rt.fps;
    const video = t.outputs.find((o) => o.kind === 'video') || t.outputs[0];
    const canvas = el('canvas', {class: 'live', id: id(t.id, '-live'), tabindex: 0, width: 32, height: 32, role: 'img', 'aria-label': 'Live frames (not started)'});
    const start = el('button', {type: 'button', id: id(t.id, '-start'), text: 'Start'});
    const stop = el('button', {type: 'button', id: id(t.id, '-stop'), text: 'Stop', disabled: true});
    const status = el('p', {class: 'status', role: 'status', text: 'Not started.'});
    // Rewind and Fork restore the session's snapshots (docs/playground.md),
    // which need the server's session key; players is how many sessions of
    // this model the server has open (GET /v2/models/NAME/sessions).
    const rewind = el('button', {type: 'button', id: id(t.id, '-rewind'), text: 'Rewind', disabled: true, 'aria-describedby': id(t.id, '-snapnote')});
    const fork = el('button', {type: 'button', id: id(t.id, '-fork'), text: 'Fork', disabled: true, 'aria-describedby': id(t.id, '-snapnote')});
    const snapNote = el('p', {class: 'help', id: id(t.id, '-snapnote')});
    const players = el('p', {class: 'players', id: id(t.id, '-players'), 'aria-live': 'polite', hidden: true});
    let s = null; // the session playing (WF.sessions[task])
    let info = null; // the server's answer: {open, limit, snapshots}
    const why = () => !info ? 'Asking the server whether it takes snapshots…'
      : info.unknown ? 'This server does not say it takes snapshots (it has no sessions endpoint), so Rewind and Fork are off.'
      : !info.snapshots ? 'This server takes no snapshots: it needs a session key (wfserve -session-key-file); without one it refuses them (501).' : null;
    const buttons = () => {
      const w = why(), has = !!(s && s.running && s.snaps.length);
      for (const [b, what] of [[rewind, 'Go back about ' + REWIND_S + ' seconds: a new session restored from the snapshot taken then'],
        [fork, 'Open the latest snapshot (at most a second old) in a new tab, where it plays on its own']]) {
        b.disabled = !!w || !has;
        b.title = w || (has ? what : 'Snapshots are taken once a second while a session plays');
      }
      snapNote.textContent = w && info ? w : '';
    };
    const poll = async (again) => {
      try {
        const r = await fetch(base() + '/v2/models/' + encodeURIComponent(f.id) + '/sessions', {headers: headers(), cache: 'no-store'});
        if (r.ok) {
          info = await r.json();
          players.hidden = false;
          players.dataset.players = String(info.open);
          players.textContent = 'Players on the server: ' + info.open + (info.open === 1 ? ' session' : ' sessions') + ' of this model open (at most ' + info.limit + ' over all models)';
        } else if (r.status === 404 || r.status === 405) {
          info = {unknown: true, snapshots: false}; again = false; players.hidden = true;
        }
      } catch (e) { /* the server is away: ask again later */ }
      buttons();
      if (again) setTimeout(() => poll(true), PLAYERS_MS);
    };
    poll(true);
    const keyOf = {}, btn = {};
    for (const c of rt.controls) for (const k of c.keys) keyOf[k.length === 1 ? k.toLowerCase() : k] = c.name;
    const pads = rt.controls.map((c) => (btn[c.name] = el('button', {type: 'button', class: 'ctl', 'aria-pressed': 'false', 'data-control': c.name},
      c.name, c.keys.length ? el('kbd', {text: c.keys.map(keyLabel).join(' ')}) : null)));
    const stat = {}, dl = el('dl', {class: 'stats'});
    for (const [k, label, help] of [['frames', 'Frames shown', 'frames drawn since Start'], ['fps', 'Frame rate', 'frames arriving per second, over the last ten chunks'],
      ['rtt', 'Round trip', 'from asking for the next chunk to receiving it'], ['step', 'Model time', "the server's time making the last chunk"],
      ['key', 'Key to screen', 'from a key press to the first frame made with it on screen']]) {
      dl.append(el('dt', {text: label, title: help}), stat[k] = el('dd', {text: '–', 'data-stat': k}));
    }
    const press = (name) => {
      if (!s || !s.running) return;
      s.queue.push({c: name, t: performance.now()});
    };
    const hold = (name, on) => {
      if (!s) return;
      if (on) s.held.add(name); else s.held.delete(name);
      btn[name].setAttribute('aria-pressed', String(on));
    };
    for (const c of rt.controls) {
      const b = btn[c.name];
      b.addEventListener('pointerdown', () => { press(c.name); hold(c.name, true); });
      for (const e of ['pointerup', 'pointerleave', 'pointercancel']) b.addEventListener(e, () => hold(c.name, false));
      b.addEventListener('click', (ev) => { if (ev.detail === 0) press(c.name); });
    }
    const typing = (e) => /^(INPUT|TEXTAREA|SELECT)$/.test(e.target.tagName);
    document.addEventListener('keydown', (ev) => {
      const c = keyOf[ev.key.length === 1 ? ev.key.toLowerCase() : ev.key];
      if (!c || !s || !s.running || typing(ev)) return;
      ev.preventDefault();
      if (!ev.repeat) press(c);
      hold(c, true);
    });
    document.addEventListener('keyup', (ev) => {
      const c = keyOf[ev.key.length === 1 ? ev.key.toLowerCase() : ev.key];
      if (c && s) hold(c, false);
    });

    // next is the controls of the next chunk: the oldest press not yet
    // sent (a press moves one frame), else the keys held.
    const next = () => {
      const p = s.queue.shift();
      const c = p ? p.c : [...s.held].pop();
      return {controls: c ? {[c]: 1} : {}, pressed: p ? p.t : null};
    };
    const ms = (x) => x.toFixed(x < 10 ? 1 : 0) + ' ms';
    // ack asks for chunk k+1 of session me, and once a second for a
    // snapshot of it at that boundary (the state after chunk k, the
    // controls sent with the ack): its answer joins me.snaps.
    const ack = (me, k) => {
      if (!me.running) return;
      const n = next(), now = performance.now();
      me.sent[k + 1] = {at: now, pressed: n.pressed};
      me.ctl[k + 1] = n.controls;
      const msg = {controls: n.controls, ack: k};
      if (info && info.snapshots && now - me.asked >= 1000) { msg.snapshot = true; me.asked = now; }
      if (!me.behind) me.conn.send(msg);
    };
    const keep = (me, snap) => {
      me.snaps.push({token: snap.token, next: snap.next, at: performance.now()});
      if (me.snaps.length > KEEP) me.snaps.shift();
      for (const j in me.ctl) if (j <= snap.next) delete me.ctl[j];
      buttons();
    };
    const g = canvas.getContext('2d');
    const chunk = (resp, bytes) => {
      const me = s, now = performance.now(), k = resp.parameters.index;
      const out = resp.outputs.find((o) => o.name === video.name) || resp.outputs[0];
      const data = bytes || values(out);
      const fr = frames(video, out.shape, data);
      if (canvas.width !== fr[0].width) { canvas.width = fr[0].width; canvas.height = fr[0].height; }
      // A frame still waiting (its timer late) is drawn before the new ones.
      for (const img of s.pend || []) g.putImageData(img, 0, 0);
      s.pend = fr;
      fr.forEach((img, i) => setTimeout(() => { if (me.running && me.pend[0] === img) g.putImageData(me.pend.shift(), 0, 0); }, i * interval));
      if (s.first == null) { s.first = k; s.firstChunk = Uint8Array.from(data); }
      s.index = k;
      s.frames += fr.length;
      s.arrivals.push(now);
      s.arrived.push(fr.length);
      if (s.arrivals.length > 11) { s.arrivals.shift(); s.arrived.shift(); }
      const sent = s.sent[k];
      delete s.sent[k];
      if (sent) {
        s.rtt.push(now - sent.at);
        stat.rtt.textContent = ms(now - sent.at);
        if (sent.pressed != null) {
          requestAnimationFrame(() => {
            const l = performance.now() - sent.pressed;
            s.keyLatency.push(l);
            // where the time went: waiting for the next frame's turn, the
            // round trip (the server's step within it), the paint
            s.presses.push({wait: sent.at - sent.pressed, rtt: now - sent.at, step: resp.parameters.latency_ms, total: l});
            const mean = s.keyLatency.reduce((a, b) => a + b, 0) / s.keyLatency.length;
            stat.key.textContent = ms(l) + ' (mean ' + ms(mean) + ' of ' + s.keyLatency.length + ')';
          });
        }
      }
      stat.frames.textContent = String(s.frames);
      stat.step.textContent = ms(resp.parameters.latency_ms);
      const a = s.arrivals;
      // frames per second over the last ten chunks: the frames that came
      // after the first of them, over the time they took
      const n = s.arrived.slice(1).reduce((x, y) => x + y, 0);
      if (a.length > 1) stat.fps.textContent = (n * 1000 / (a.at(-1) - a[0])).toFixed(1) + ' frames per second';
      canvas.setAttribute('aria-label', 'Live frames: chunk ' + k);
      s.due = (s.due ?? now) + fr.length * interval;
      setTimeout(() => ack(me, k), Math.max(0, s.due - performance.now()));
    };
    // end stops the session; the focus, when it was on Stop (now
    // disabled), the canvas or nowhere, goes to Start.
    const end = (msg) => {
      if (!s) return;
      s.running = false;
      s.conn.close();
      const here = document.activeElement;
      start.disabled = false; stop.disabled = true;
      buttons();
      poll(false);
      status.textContent = msg;
      if (!here || here === stop || here === canvas || here === document.body) start.focus();
    };
    // begin starts a session of inputs, restored from the snapshot
    // restore ({token, next, path}) when given: Start, Rewind (the old
    // session closed, its earlier snapshots kept) and a fork's page.
    const begin = (inputs, restore) => {
      const prev = s;
      if (prev && prev.running) { prev.running = false; prev.conn.close(); }
      WF.requests[t.id] = inputs;
      s = WF.sessions[t.id] = {running: true, queue: [], held: restore && prev ? prev.held : new Set(), sent: {}, ctl: {}, tries: 0, rtt: [], keyLatency: [], presses: [], arrivals: [], arrived: [], frames: 0, index: -1, due: null,
        inputs, path: restore ? restore.path : path(''), snaps: restore && prev ? prev.snaps.filter((x) => x.next < restore.next) : [], asked: -Infinity,
        restored: restore ? {token: restore.token, next: restore.next} : null, first: null};
      for (const k in stat) stat[k].textContent = '–';
      start.disabled = true; stop.disabled = false;
      buttons();
      status.textContent = restore ? 'Restoring chunk ' + restore.next + '…' : 'Starting…';
      connect(s, restore);
    };
    // connect opens session me's connection, from snapshot x if given; a
    // break resumes it as remote.WithResume does (docs/playground.md):
    // me.ctl logs the controls to ack the chunks made again with.
    const connect = (me, x) => {
      const parameters = {task: t.id, lockstep: true, paced: false};
      if (x) parameters.snapshot = x.token;
      me.conn = WF.transport.open({
        base: base(), path: me.path, headers: headers(),
        request: {parameters, inputs: me.inputs},
        onSession(info) { me.id = info.id; me.controlsURL = info.controls_url; status.textContent = 'Playing: use the keys or the buttons.'; canvas.focus(); poll(false); },
        onChunk(resp, bytes) {
          const j = resp.parameters.index;
          if (!me.running) return;
          if (j <= me.index) {
            me.behind = j < me.index;
            return me.ctl[j + 1] && me.conn.send({controls: me.ctl[j + 1], ack: j});
          }
          if (me.lost) { // the stall: from its ask's due time (the ack's) to now
            me.stall = performance.now() - me.due;
            status.textContent = 'Reconnected (a stall of ' + ms(me.stall) + ').';
            me.lost = me.tries = me.behind = 0; me.due = null;
          }
          chunk(resp, bytes);
        },
        onSnapshot(snap) { if (me.running) keep(me, snap); },
        onError(msg, broken) {
          if (!me.running) return;
          if (broken && me.index >= 0 && me.tries < 4) {
            me.lost ||= performance.now(); me.behind = 1;
            status.textContent = 'Connection lost: reconnecting…';
            const y = me.snaps.at(-1);
            return setTimeout(() => me.running && connect(me, y && y.next >= me.first ? y : me.restored), [0, 0, 50, 100][me.tries++]);
          }
          if (me.index < 0) placeError(views, formErr, msg);
          end('Stopped: ' + (me.tries ? 'the connection broke and reconnecting failed (' + msg + ').' : msg));
        },
        onEnd() { if (me.running) end('The session ended.'); },
      });
    };
    start.addEventListener('click', async () => {
      clear();
      let inputs;
      try { inputs = await collect(views); } catch (e) { return; }
      begin(inputs, null);
    });
    stop.addEventListener('click', () => end('Stopped.'));
    // Rewind: the newest snapshot at least REWIND_S seconds old (else the
    // oldest kept), restored into a new session.
    rewind.addEventListener('click', () => {
      if (!s || !s.running || !s.snaps.length) return;
      const now = performance.now(), back = s.snaps.filter((x) => now - x.at >= REWIND_S * 1000);
      const x = back.at(-1) || s.snaps[0];
      begin(s.inputs, {token: x.token, next: x.next, path: s.path});
    });
    // Fork: the latest snapshot, in a new tab. It travels in the URL's
    // fragment, which the browser never sends to the server (nor to its
    // logs); the new page takes it out of its address at once.
    fork.addEventListener('click', () => {
      if (!s || !s.running || !s.snaps.length) return;
      const x = s.snaps.at(-1);
      const data = {task: t.id, path: s.path, token: x.token, next: x.next, inputs: s.inputs};
      window.open(location.pathname + location.search + '#fork=' + encodeURIComponent(JSON.stringify(data)), '_blank');
    });
    if (forked && forked.task === t.id) {
      const x = forked;
      forked = null;
      setTimeout(() => begin(x.inputs, {token: x.token, next: x.next, path: x.path}), 0);
    }
    return el('div', {class: 'liveview'},
      el('div', {class: 'actions'}, start, stop, rewind, fork, status),
      snapNote, players,
      el('div', {class: 'stage'}, canvas, el('div', {class: 'pads', role: 'group', 'aria-label': 'Controls'}, pads)),
      el('p', {class: 'help', text: 'Keys: ' + rt.controls.map((c) => c.name + ' ' + (c.keys.map(keyLabel).join('/') || '(button only)')).join(', ') +
        '. Each press moves one frame; holding a key keeps it on. ' + rt.fps + ' frames a second.'}),
      dl);
  }

  init();
})();
