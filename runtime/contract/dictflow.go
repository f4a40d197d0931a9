package contract

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// This file is a small abstract evaluation of serialized TorchScript code
// (parsed by flowparse.go) that follows the dicts of tensors a method
// returns back to the literals and item assignments that give them keys,
// through assignments, tuples, calls of methods of the module and its
// submodules and of the archive's functions, appends of dicts to lists,
// item assignments and update(). It runs the inference: self.training is
// false, though the keys of what a training branch builds are kept, as
// optional (a detector's losses). A key is Always when every path the
// evaluation takes sets it; a dict handed to code it does not follow is
// unknown: it may hold other keys.

// Limits of one evaluation (of one method; of an archive's methods, three
// times as many statements); past them it gives up (nothing is known). A
// torchvision detector's forward takes some 600 statements and 15 objects.
const (
	maxFlowSteps   = 20_000
	maxFlowObjects = 256
	maxFlowDepth   = 32
	maxFlowFiles   = 256
)

// vkind is the kind of an abstract value.
type vkind uint8

const (
	vUnknown vkind = iota
	vNone
	vBool   // b; or, with training, self.training (b true) or its negation
	vStr    // name is the string
	vInt    // name is the literal
	vObj    // obj: a dict or list in the heap; partial: one element of a list, not each
	vTuple  // elems
	vSeq    // a list literal of plain values (the lengths a min takes)
	vLen    // a length, no more than that of each of lists
	vIndex  // a loop variable over range(vLen): it visits every element of each of lists
	vModule // name is the module's class
	vFunc   // name is the function's qualified name
)

// value is an abstract value.
type value struct {
	kind     vkind
	b        bool
	training bool
	partial  bool
	obj      int
	name     string
	elems    []value
	lists    []int
	why      string // vUnknown: what made it so, when it matters
}

// object is a dict (its keys) or a list (the keys of its dicts) in the
// heap. Objects are copied on write: states share them.
type object struct {
	list    bool
	keys    []keyState // a dict's
	elem    int        // a list's: the summary of its dicts; 0 when none was added
	unknown bool       // it may hold keys not in keys (a list: dicts not in elem)
	why     string     // where it became unknown
}

// keyState is a key a dict may hold; always when every path sets it.
type keyState struct {
	name   string
	always bool
}

// flowState is the state of one path: the current frame's names and the
// heap.
type flowState struct {
	env  map[string]value
	heap map[int]*object
	dead bool
}

func (s *flowState) clone() *flowState {
	c := &flowState{env: make(map[string]value, len(s.env)), heap: make(map[int]*object, len(s.heap)), dead: s.dead}
	for k, v := range s.env {
		c.env[k] = v
	}
	for k, v := range s.heap {
		c.heap[k] = v
	}
	return c
}

// mut returns a copy of object id that this state may change.
func (s *flowState) mut(id int) *object {
	o := s.heap[id]
	if o == nil {
		o = &object{unknown: true}
	}
	c := *o
	c.keys = slices.Clone(o.keys)
	s.heap[id] = &c
	return &c
}

// retName holds a frame's returned value in the state of a return.
const retName = "\x00return"

// flowFrame is one method or function being evaluated.
type flowFrame struct {
	fn      *funcDef
	returns *flowState
	loops   []*flowState // the states that break or continue each loop
}

// flowEval evaluates the code of one archive.
type flowEval struct {
	read   func(path string) (string, bool)
	files  map[string]*codeFile
	nextID int
	steps  int // in this method
	total  int // in the archive's
	stack  []*funcDef
	failed bool
}

func (ev *flowEval) file(path string) *codeFile {
	if f, ok := ev.files[path]; ok {
		return f
	}
	var f *codeFile
	if len(ev.files) < maxFlowFiles {
		if code, ok := ev.read(path); ok {
			f = parseCodeFile(path, code)
		}
	}
	ev.files[path] = f
	return f
}

// splitQual splits __torch__.a.b.Name into the file code/__torch__/a/b.py
// and Name.
func splitQual(q string) (path, name string, ok bool) {
	mod, name, ok := cutLast(q, ".")
	if !ok || !strings.HasPrefix(q, "__torch__.") || !isIdentifier(name) {
		return "", "", false
	}
	return "code/" + strings.ReplaceAll(mod, ".", "/") + ".py", name, true
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+len(sep):], true
}

func (ev *flowEval) class(q string) *classDef {
	path, name, ok := splitQual(q)
	if !ok {
		return nil
	}
	if f := ev.file(path); f != nil {
		return f.classes[name]
	}
	return nil
}

func (ev *flowEval) function(q string) *funcDef {
	path, name, ok := splitQual(q)
	if !ok {
		return nil
	}
	if f := ev.file(path); f != nil {
		return f.funcs[name]
	}
	return nil
}

func (ev *flowEval) alloc(s *flowState, o *object) int {
	if len(s.heap) >= maxFlowObjects {
		ev.failed = true
	}
	ev.nextID++
	s.heap[ev.nextID] = o
	return ev.nextID
}

func (ev *flowEval) where(fr *flowFrame, line int) string {
	if fr == nil || fr.fn == nil {
		return "the method's arguments"
	}
	return fmt.Sprintf("%s:%d (%s)", fr.fn.file, line, fr.fn.qual)
}

// run evaluates method name of class q with unknown arguments and returns
// its value and final state; ok is false when the evaluation gave up.
func (ev *flowEval) run(q, name string) (value, *flowState, bool) {
	c := ev.class(q)
	if c == nil || c.methods[name] == nil {
		return value{}, nil, false
	}
	s := &flowState{env: map[string]value{}, heap: map[int]*object{}}
	v := ev.invoke(s, c.methods[name], value{kind: vModule, name: q}, true, nil, nil, 0, nil, true)
	return v, s, !ev.failed && !s.dead
}

// tracked reports whether v holds a dict or list of the heap.
func tracked(v value) bool {
	switch v.kind {
	case vObj:
		return true
	case vTuple:
		return slices.ContainsFunc(v.elems, tracked)
	}
	return false
}

// escape marks what v holds unknown: code the evaluation does not follow
// may give it keys.
func (ev *flowEval) escape(s *flowState, v value, why string) {
	switch v.kind {
	case vObj:
		o := s.heap[v.obj]
		if o == nil || o.unknown {
			return
		}
		m := s.mut(v.obj)
		m.unknown, m.why = true, why
		if m.list && m.elem != 0 {
			ev.escape(s, value{kind: vObj, obj: m.elem}, why)
		}
	case vTuple:
		for _, e := range v.elems {
			ev.escape(s, e, why)
		}
	}
}

// invoke evaluates fn called with self (when method) and args (kw names
// the keyword ones) and returns its value. A call that cannot change what
// the evaluation follows (no dict or list passed, no dict or bool
// returned) is not evaluated.
func (ev *flowEval) invoke(s *flowState, fn *funcDef, self value, method bool, args []value, kw []string, line int, caller *flowFrame, root bool) value {
	passes := false
	for _, a := range args {
		passes = passes || tracked(a)
	}
	if !root && !passes && !strings.Contains(fn.ret, "Dict") && fn.ret != "bool" {
		return value{}
	}
	why := ""
	switch {
	case len(ev.stack) >= maxFlowDepth:
		why = "calls nested too deep"
	case slices.Contains(ev.stack, fn):
		why = "a recursive call"
	}
	if why != "" {
		for _, a := range args {
			ev.escape(s, a, ev.where(caller, line)+": "+why)
		}
		return value{why: ev.where(caller, line) + ": " + why}
	}
	env := map[string]value{}
	params := fn.params
	if method && len(params) > 0 {
		env[params[0]] = self
		params = params[1:]
	}
	pos := 0
	for i, a := range args {
		switch {
		case i < len(kw) && kw[i] != "":
			env[kw[i]] = a
		case pos < len(params):
			env[params[pos]] = a
			pos++
		}
	}
	cs := &flowState{env: env, heap: s.heap}
	fr := &flowFrame{fn: fn}
	ev.stack = append(ev.stack, fn)
	ev.block(cs, fn.body, fr)
	ev.stack = ev.stack[:len(ev.stack)-1]
	if !cs.dead {
		cs.env[retName] = value{kind: vNone}
		fr.returns = ev.join(fr.returns, cs, joinPlain)
	}
	if fr.returns == nil || fr.returns.dead {
		s.dead = true
		return value{}
	}
	s.heap = fr.returns.heap
	return fr.returns.env[retName]
}

func (ev *flowEval) block(s *flowState, stmts []*stmt, fr *flowFrame) {
	for _, st := range stmts {
		if s.dead || ev.failed {
			return
		}
		ev.steps++
		if ev.total++; ev.steps > maxFlowSteps || ev.total > 3*maxFlowSteps {
			ev.failed = true
			return
		}
		ev.stmt(s, st, fr)
	}
}

func (ev *flowEval) stmt(s *flowState, st *stmt, fr *flowFrame) {
	switch st.kind {
	case 'a':
		v := ev.eval(s, st.value, fr, st.line)
		switch {
		case len(st.targets) == 1 && !st.tuple:
			ev.bind(s, st.targets[0], v, fr, st.line)
		case v.kind == vTuple && len(v.elems) == len(st.targets):
			for i, t := range st.targets {
				ev.bind(s, t, v.elems[i], fr, st.line)
			}
		default:
			why := v.why
			if v.kind != vUnknown {
				why = ev.where(fr, st.line) + ": unpacked in a way this reader does not follow"
				ev.escape(s, v, why)
			}
			for _, t := range st.targets {
				ev.bind(s, t, value{why: why}, fr, st.line)
			}
		}
	case 'e':
		ev.eval(s, st.value, fr, st.line)
	case 'r':
		v := value{kind: vNone}
		if st.value != nil {
			v = ev.eval(s, st.value, fr, st.line)
		}
		if s.dead {
			return
		}
		r := &flowState{env: s.env, heap: s.heap}
		r.env[retName] = v
		fr.returns = ev.join(fr.returns, r, joinPlain)
		s.dead = true
	case 'i':
		c := ev.cond(s, st.value, fr, st.line)
		switch c {
		case condTrue:
			ev.block(s, st.body, fr)
		case condFalse:
			ev.block(s, st.orelse, fr)
		default:
			t := s.clone()
			ev.block(t, st.body, fr)
			ev.block(s, st.orelse, fr)
			mode := joinPlain
			switch c {
			case condTraining:
				mode = joinFirstTraining
			case condNotTraining:
				mode = joinSecondTraining
			}
			*s = *ev.join(t, s, mode)
		}
	case 'f', 'w', 'x':
		var covers []int
		if st.kind == 'w' && ev.cond(s, st.value, fr, st.line) == condFalse {
			return
		}
		if st.kind == 'x' {
			for _, n := range st.names {
				if v, ok := s.env[n]; ok {
					ev.escape(s, v, ev.where(fr, st.line)+": a statement this reader does not follow")
				}
			}
			if len(st.body) == 0 {
				return
			}
		}
		pre := s.clone()
		if st.kind == 'f' {
			it := ev.eval(s, st.value, fr, st.line)
			v := value{}
			if it.kind == vLen {
				covers = it.lists
				v = value{kind: vIndex, lists: covers}
			}
			ev.bind(s, st.loopVar, v, fr, st.line)
			pre = s.clone()
		}
		fr.loops = append(fr.loops, nil)
		ev.block(s, st.body, fr)
		brk := fr.loops[len(fr.loops)-1]
		fr.loops = fr.loops[:len(fr.loops)-1]
		end := ev.join(s.clone(), brk, joinPlain)
		out := ev.join(pre, end, joinPlain)
		if out != end && !end.dead {
			// A loop over every element of a list gives each the keys its
			// body sets on the element it visits.
			for _, l := range covers {
				po, eo := pre.heap[l], end.heap[l]
				if po != nil && eo != nil && po.elem != 0 && po.elem == eo.elem && end.heap[eo.elem] != nil {
					out.heap[eo.elem] = end.heap[eo.elem]
				}
			}
		}
		*s = *out
	case 'b':
		if n := len(fr.loops); n > 0 {
			fr.loops[n-1] = ev.join(fr.loops[n-1], s.clone(), joinPlain)
		}
		s.dead = true
	}
}

func (ev *flowEval) bind(s *flowState, name string, v value, fr *flowFrame, line int) {
	if name == "" {
		ev.escape(s, v, ev.where(fr, line)+": stored in an attribute or an item")
		return
	}
	s.env[name] = v
}

type condValue uint8

const (
	condUnknown condValue = iota
	condTrue
	condFalse
	condTraining    // true in training: the first branch is not taken in inference
	condNotTraining // false in training
)

func (ev *flowEval) cond(s *flowState, e *expr, fr *flowFrame, line int) condValue {
	v := ev.eval(s, e, fr, line)
	if v.kind != vBool {
		return condUnknown
	}
	switch {
	case v.training && v.b:
		return condTraining
	case v.training:
		return condNotTraining
	case v.b:
		return condTrue
	}
	return condFalse
}

// eval evaluates e on the path s.
func (ev *flowEval) eval(s *flowState, e *expr, fr *flowFrame, line int) value {
	if e == nil || s.dead {
		return value{}
	}
	switch e.kind {
	case 'k':
		if e.text == "None" {
			return value{kind: vNone}
		}
		return value{kind: vBool, b: e.text == "True"}
	case 's':
		return value{kind: vStr, name: e.text}
	case 'i':
		return value{kind: vInt, name: e.text}
	case 'n':
		return ev.name(s, e.text)
	case 'a':
		return ev.attr(ev.eval(s, e.fn, fr, line), e.text)
	case 't':
		v := value{kind: vTuple}
		for _, a := range e.args {
			v.elems = append(v.elems, ev.eval(s, a, fr, line))
		}
		return v
	case 'l':
		var elems []value
		dicts := false
		for _, a := range e.args {
			x := ev.eval(s, a, fr, line)
			elems = append(elems, x)
			dicts = dicts || x.kind == vObj
		}
		if !dicts && len(elems) > 0 {
			return value{kind: vSeq, elems: elems}
		}
		l := value{kind: vObj, obj: ev.alloc(s, &object{list: true})}
		for _, x := range elems {
			ev.append(s, l, x, fr, line)
		}
		return l
	case 'd':
		o := &object{}
		for i, k := range e.keys {
			kv := ev.eval(s, k, fr, line)
			ev.escape(s, ev.eval(s, e.args[i], fr, line), ev.where(fr, line)+": the value of a dict's key")
			switch {
			case kv.kind != vStr:
				o.unknown, o.why = true, ev.where(fr, line)+": a dict literal with a key computed at run time"
			case !slices.ContainsFunc(o.keys, func(x keyState) bool { return x.name == kv.name }):
				o.keys = append(o.keys, keyState{kv.name, true})
			}
		}
		return value{kind: vObj, obj: ev.alloc(s, o)}
	case 'x':
		base := ev.eval(s, e.fn, fr, line)
		idx := ev.eval(s, e.args[0], fr, line)
		switch base.kind {
		case vObj:
			o := s.heap[base.obj]
			if o == nil || !o.list || o.elem == 0 {
				return value{}
			}
			return value{kind: vObj, obj: o.elem, partial: !(idx.kind == vIndex && slices.Contains(idx.lists, base.obj))}
		case vTuple:
			if i, err := strconv.Atoi(idx.name); err == nil && idx.kind == vInt && i >= 0 && i < len(base.elems) {
				return base.elems[i]
			}
			ev.escape(s, base, ev.where(fr, line)+": a tuple indexed at run time")
		}
		return value{}
	case 'c':
		return ev.call(s, e, fr, line)
	}
	// an operator, a slice, a conditional expression: nothing it computes
	// is followed, and it changes no dict.
	for _, a := range e.args {
		ev.eval(s, a, fr, line)
	}
	return value{}
}

// name reads a name: a local, a module's attribute (self.training,
// self.roi_heads), or a function of the archive's code.
func (ev *flowEval) name(s *flowState, n string) value {
	if v, ok := s.env[n]; ok {
		return v
	}
	head, rest, dotted := strings.Cut(n, ".")
	if v, ok := s.env[head]; ok && dotted {
		for _, a := range strings.Split(rest, ".") {
			v = ev.attr(v, a)
		}
		return v
	}
	if strings.HasPrefix(n, "__torch__.") {
		return value{kind: vFunc, name: n}
	}
	return value{}
}

func (ev *flowEval) attr(v value, name string) value {
	if v.kind != vModule {
		return value{}
	}
	if name == "training" {
		return value{kind: vBool, b: true, training: true}
	}
	c := ev.class(v.name)
	if c == nil {
		return value{}
	}
	switch t := c.attrs[name]; {
	case t == "NoneType":
		return value{kind: vNone}
	case strings.HasPrefix(t, "__torch__."):
		return value{kind: vModule, name: t}
	}
	return value{}
}

// call evaluates a call: of a method of a module, of a function of the
// archive, or of a builtin.
func (ev *flowEval) call(s *flowState, e *expr, fr *flowFrame, line int) value {
	var recv value
	method := ""
	switch f := e.fn; {
	case f.kind == 'a':
		recv, method = ev.eval(s, f.fn, fr, line), f.text
	case f.kind == 'n':
		if head, name, ok := cutLast(f.text, "."); ok {
			if h, _, _ := strings.Cut(head, "."); s.env[h].kind != vUnknown {
				recv, method = ev.name(s, head), name
			}
		}
		if method == "" {
			if v, ok := s.env[f.text]; ok {
				recv = v
			} else if !strings.HasPrefix(f.text, "__torch__.") {
				return ev.builtin(s, f.text, e, fr, line)
			} else {
				recv = value{kind: vFunc, name: f.text}
			}
		}
	default:
		recv = ev.eval(s, f, fr, line)
	}
	args := make([]value, len(e.args))
	for i, a := range e.args {
		args[i] = ev.eval(s, a, fr, line)
	}
	var fn *funcDef
	what := ""
	switch {
	case method != "" && recv.kind == vModule:
		if c := ev.class(recv.name); c != nil {
			fn = c.methods[method]
		}
		what = recv.name + "." + method
	case method == "" && recv.kind == vFunc:
		fn = ev.function(recv.name)
		what = recv.name
	default:
		what = "a value's method " + method
	}
	if fn == nil {
		why := ev.where(fr, line) + ": passed to " + what + ", whose code this reader does not follow"
		for _, a := range args {
			ev.escape(s, a, why)
		}
		return value{why: why}
	}
	return ev.invoke(s, fn, recv, method != "", args, e.kw, line, fr, false)
}

// readOnly are the builtins that change no dict or list they are given.
var readOnly = map[string]bool{
	"torch.len": true, "torch.format": true, "torch.warn": true, "torch.keys": true, "torch.values": true,
	"torch.items": true, "torch.__getitem__": true, "isinstance": true, "torch.eq": true, "torch.ne": true,
	"str": true, "torch.str": true, "torch.__contains__": true, "torch.__is__": true, "torch.__isnot__": true,
	"print": true,
}

func (ev *flowEval) builtin(s *flowState, name string, e *expr, fr *flowFrame, line int) value {
	if name == "annotate" && len(e.args) == 2 {
		if v := e.args[1]; (v.kind == 'd' || v.kind == 'l') && len(v.args) == 0 {
			if v.kind == 'l' && !strings.Contains(e.args[0].src, "Dict") {
				return value{} // a list of something other than dicts
			}
			return value{kind: vObj, obj: ev.alloc(s, &object{list: v.kind == 'l'})}
		}
	}
	args := make([]value, len(e.args))
	for i, a := range e.args {
		args[i] = ev.eval(s, a, fr, line)
	}
	arg := func(i int) value {
		if i < len(args) {
			return args[i]
		}
		return value{}
	}
	switch name {
	case "annotate", "unchecked_cast":
		return arg(1)
	case "bool":
		return arg(0)
	case "ops.prim.RaiseException":
		s.dead = true
		return value{}
	case "torch.append":
		ev.append(s, arg(0), arg(1), fr, line)
		return value{}
	case "torch._set_item":
		ev.setItem(s, arg(0), arg(1), arg(2), fr, line)
		return value{}
	case "torch.update":
		ev.update(s, arg(0), arg(1), fr, line)
		return value{}
	case "torch.copy":
		if v := arg(0); v.kind == vObj && s.heap[v.obj] != nil && !s.heap[v.obj].list {
			c := *s.heap[v.obj]
			c.keys = slices.Clone(c.keys)
			return value{kind: vObj, obj: ev.alloc(s, &c)}
		}
	case "torch.len":
		if v := arg(0); v.kind == vObj {
			return value{kind: vLen, lists: []int{v.obj}}
		}
		return value{kind: vLen}
	case "ops.prim.min":
		if v := arg(0); len(args) == 1 && v.kind == vSeq {
			out := value{kind: vLen}
			for _, x := range v.elems {
				switch x.kind {
				case vLen:
					out.lists = append(out.lists, x.lists...)
				case vInt:
				default:
					return value{}
				}
			}
			return out
		}
	case "range":
		if len(args) == 1 {
			return arg(0)
		}
	case "torch.__not__":
		if v := arg(0); v.kind == vBool {
			v.b = !v.b
			return v
		}
	case "torch.__contains__":
		if d, k := arg(0), arg(1); d.kind == vObj && k.kind == vStr && s.heap[d.obj] != nil && !s.heap[d.obj].list {
			o := s.heap[d.obj]
			i := slices.IndexFunc(o.keys, func(x keyState) bool { return x.name == k.name })
			switch {
			case i >= 0 && o.keys[i].always:
				return value{kind: vBool, b: true}
			case i < 0 && !o.unknown:
				return value{kind: vBool, b: false}
			}
		}
	case "torch.__is__", "torch.__isnot__":
		if arg(1).kind == vNone {
			switch v := arg(0); v.kind {
			case vNone:
				return value{kind: vBool, b: name == "torch.__is__"}
			case vObj, vTuple:
				return value{kind: vBool, b: name != "torch.__is__"}
			}
		}
	case "getattr":
		if m, a := arg(0), arg(1); m.kind == vModule && a.kind == vStr {
			return ev.attr(m, a.name)
		}
	default:
		if !readOnly[name] {
			why := ev.where(fr, line) + ": passed to " + name + ", which this reader does not follow"
			for _, a := range args {
				ev.escape(s, a, why)
			}
			return value{why: why}
		}
	}
	return value{}
}

// dict returns the dict object v refers to, or nil.
func dictOf(s *flowState, v value) *object {
	if v.kind != vObj {
		return nil
	}
	if o := s.heap[v.obj]; o != nil && !o.list {
		return o
	}
	return nil
}

// setKey sets key k on the dict v on this path: always, unless v is one
// element of a list (then the list's other dicts may lack it).
func (ev *flowEval) setKey(s *flowState, v value, k string, always bool) {
	m := s.mut(v.obj)
	i := slices.IndexFunc(m.keys, func(x keyState) bool { return x.name == k })
	always = always && !v.partial
	switch {
	case i >= 0:
		m.keys[i].always = m.keys[i].always || always
	case len(m.keys) < MaxReturnKeys:
		m.keys = append(m.keys, keyState{k, always})
	default:
		m.unknown, m.why = true, "more keys than this reader keeps"
	}
}

func (ev *flowEval) setItem(s *flowState, d, k, v value, fr *flowFrame, line int) {
	if d.kind == vObj && s.heap[d.obj] != nil && s.heap[d.obj].list {
		// L[i] = v: one of the list's elements is replaced
		ev.append(s, d, v, fr, line)
		return
	}
	ev.escape(s, v, ev.where(fr, line)+": stored in a dict or list")
	if dictOf(s, d) == nil {
		return
	}
	if k.kind != vStr {
		m := s.mut(d.obj)
		m.unknown, m.why = true, ev.where(fr, line)+": an item assigned with a key computed at run time"
		return
	}
	ev.setKey(s, d, k.name, true)
}

func (ev *flowEval) update(s *flowState, d, src value, fr *flowFrame, line int) {
	if dictOf(s, d) == nil {
		ev.escape(s, src, ev.where(fr, line)+": passed to torch.update")
		return
	}
	o := dictOf(s, src)
	if o == nil {
		why := src.why
		if why == "" {
			why = ev.where(fr, line) + ": updated from a dict this reader does not follow"
		}
		m := s.mut(d.obj)
		m.unknown, m.why = true, why
		return
	}
	for _, k := range o.keys {
		ev.setKey(s, d, k.name, k.always)
	}
	if o.unknown {
		m := s.mut(d.obj)
		m.unknown, m.why = true, o.why
	}
}

func (ev *flowEval) append(s *flowState, l, v value, fr *flowFrame, line int) {
	if l.kind != vObj || s.heap[l.obj] == nil || !s.heap[l.obj].list {
		ev.escape(s, v, ev.where(fr, line)+": added to a list this reader does not follow")
		return
	}
	if dictOf(s, v) == nil {
		if v.kind != vObj {
			m := s.mut(l.obj)
			if !m.unknown {
				m.unknown, m.why = true, ev.where(fr, line)+": given a value this reader does not follow"
			}
		} else {
			ev.escape(s, v, ev.where(fr, line)+": a list added to a list")
		}
		return
	}
	m := s.mut(l.obj)
	switch {
	case m.elem == 0:
		m.elem = v.obj
	case m.elem != v.obj:
		j := &joiner{ev: ev, a: s, b: s, out: s, memo: map[[2]int]int{}}
		m.elem = j.ref(m.elem, v.obj)
	}
}

// joinMode says how two paths join: plainly (a key is always set when
// both set it), or with one of them a training branch (its keys are kept,
// optional, and the other decides what is always set).
type joinMode uint8

const (
	joinPlain joinMode = iota
	joinFirstTraining
	joinSecondTraining
)

type joiner struct {
	ev        *flowEval
	a, b, out *flowState
	mode      joinMode
	memo      map[[2]int]int
}

// join joins the paths a and b (either may be nil or dead) into one.
func (ev *flowEval) join(a, b *flowState, mode joinMode) *flowState {
	switch {
	case a == nil || a.dead && b != nil:
		return b
	case b == nil || b.dead:
		return a
	}
	out := &flowState{env: map[string]value{}, heap: make(map[int]*object, len(a.heap))}
	j := &joiner{ev: ev, a: a, b: b, out: out, mode: mode, memo: map[[2]int]int{}}
	for id, oa := range a.heap {
		if ob, ok := b.heap[id]; ok && ob != oa {
			out.heap[id] = j.object(oa, ob)
		} else {
			out.heap[id] = oa
		}
	}
	for id, ob := range b.heap {
		if _, ok := a.heap[id]; !ok {
			out.heap[id] = ob
		}
	}
	for n, va := range a.env {
		if vb, ok := b.env[n]; ok {
			out.env[n] = j.value(va, vb)
		}
	}
	return out
}

// ref joins object ids ea (of path a) and eb (of b): a list's dicts.
func (j *joiner) ref(ea, eb int) int {
	switch {
	case ea == 0 || ea == eb:
		return eb
	case eb == 0:
		return ea
	}
	if id, ok := j.memo[[2]int{ea, eb}]; ok {
		return id
	}
	oa, ob := j.a.heap[ea], j.b.heap[eb]
	if oa == nil || ob == nil {
		return j.ev.alloc(j.out, &object{unknown: true, why: "lost"})
	}
	id := j.ev.alloc(j.out, &object{})
	j.memo[[2]int{ea, eb}] = id
	j.out.heap[id] = j.object(oa, ob)
	return id
}

func (j *joiner) object(oa, ob *object) *object {
	if oa.list != ob.list {
		return &object{unknown: true, why: "a dict on one path, a list on another"}
	}
	o := &object{list: oa.list}
	switch j.mode {
	case joinFirstTraining:
		o.unknown, o.why = ob.unknown, ob.why
	case joinSecondTraining:
		o.unknown, o.why = oa.unknown, oa.why
	default:
		o.unknown = oa.unknown || ob.unknown
		o.why = oa.why
		if !oa.unknown {
			o.why = ob.why
		}
	}
	if o.list {
		o.elem = j.ref(oa.elem, ob.elem)
		return o
	}
	in := func(ks []keyState, k string) (bool, bool) {
		for _, x := range ks {
			if x.name == k {
				return true, x.always
			}
		}
		return false, false
	}
	add := func(k string) {
		_, aa := in(oa.keys, k)
		_, ba := in(ob.keys, k)
		always := aa && ba
		switch j.mode {
		case joinFirstTraining:
			always = ba
		case joinSecondTraining:
			always = aa
		}
		o.keys = append(o.keys, keyState{k, always})
	}
	for _, k := range oa.keys {
		add(k.name)
	}
	for _, k := range ob.keys {
		if ok, _ := in(oa.keys, k.name); !ok {
			add(k.name)
		}
	}
	return o
}

func (j *joiner) value(va, vb value) value {
	switch {
	case va.kind == vNone:
		return vb
	case vb.kind == vNone:
		return va
	case va.kind != vb.kind:
		return value{why: cmp.Or(va.why, vb.why)}
	}
	switch va.kind {
	case vObj:
		return value{kind: vObj, obj: j.ref(va.obj, vb.obj), partial: va.partial || vb.partial}
	case vTuple:
		if len(va.elems) != len(vb.elems) {
			return value{}
		}
		v := value{kind: vTuple, elems: make([]value, len(va.elems))}
		for i := range va.elems {
			v.elems[i] = j.value(va.elems[i], vb.elems[i])
		}
		return v
	case vBool:
		if va.b == vb.b && va.training == vb.training {
			return va
		}
		return value{}
	case vLen, vIndex:
		if slices.Equal(va.lists, vb.lists) {
			return va
		}
		return value{kind: va.kind}
	case vStr, vInt, vModule, vFunc:
		if va.name == vb.name {
			return va
		}
		return value{}
	}
	return value{why: va.why}
}
