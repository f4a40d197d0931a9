package contract

import (
	"archive/zip"
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMethodReturnKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code string
		want []ReturnKey
	}{
		{`def forward(self: __torch__.M,
    x: Tensor,
    opts: Dict[str, int]={"ignored": 1}) -> Dict[str, Tensor]:
    out = {"video": x, "mask": torch.ones([2])}
    if flag:
      _1 = {"video": torch.mul(x, 2), "extra": {"nested": x}["nested"]}
      _0 = _1
    else:
      _0 = out
    return _0`, []ReturnKey{{"video", true}, {"mask", false}, {"extra", false}}},
		{`def forward(self, x: Tensor) -> Dict[str, Tensor]:
    d = annotate(Dict[str, Tensor], {})
    torch._set_item(d, "a\"b", x)
    torch._set_item(d, 'c', x)  # "not": a key
    return d`, []ReturnKey{{"a\"b", true}, {"c", true}}}, // set on every path
		{`def forward(self, x: Tensor, aux: bool) -> Dict[str, Tensor]:
    result = annotate(Dict[str, Tensor], {})
    _0 = torch._set_item(result, "out", x)
    if aux:
      _1 = torch._set_item(result, "aux", x)
    else:
      pass
    return result`, []ReturnKey{{"out", true}, {"aux", false}}}, // a segmentation model's
		{`def forward(self, x: Tensor, early: bool) -> Dict[str, Tensor]:
    result = annotate(Dict[str, Tensor], {})
    if early:
      return result
    else:
      pass
    _0 = torch._set_item(result, "out", x)
    return result`, []ReturnKey{{"out", false}}}, // a path returns before it
		{`def forward(self, x: Tensor) -> Tensor:
    return torch.mul(x, 2)`, nil},
		{`def broken(self, x: Tensor`, nil},
	} {
		got := methodReturnKeys(tc.code)
		if len(got) == 0 {
			got = nil
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("methodReturnKeys(%q) (-want +got):\n%s", tc.code, diff)
		}
	}
}

// Methods as torch.jit.script serializes them (PyTorch 1.13).
func TestMethodReturnsComplete(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		code     string
		keys     []string
		complete bool
	}{
		{"literal", `def forward(self: __torch__.M,
    x: Tensor) -> Dict[str, Tensor]:
    _0 = {"frames": x, "state": torch.add(x, 1)}
    return _0`, []string{"frames", "state"}, true},
		{"branches and items", `def cond(self: __torch__.M,
    x: Tensor,
    flag: bool) -> Dict[str, Tensor]:
    if flag:
      _1 = {"a": x}
    else:
      d = {"a": x, "b": x}
      torch._set_item(d, "c", x)
      _1 = d
    return _1`, []string{"a", "b", "c"}, true},
		{"item through an alias", `def f(self: __torch__.M,
    x: Tensor) -> Dict[str, Tensor]:
    d = {"a": x}
    e = d
    torch._set_item(e, "b", x)
    return d`, []string{"a", "b"}, true},
		{"annotated empty dict", `def empty(self: __torch__.M,
    x: Tensor) -> Dict[str, Tensor]:
    d = annotate(Dict[str, Tensor], {})
    torch._set_item(d, "only", x)
    return d`, []string{"only"}, true},
		{"annotated literal", `def f(self: __torch__.M,
    x: Tensor) -> Dict[str, Tensor]:
    d = annotate(Dict[str, Tensor], {"a": x, "b": torch.mul(x, 2)})
    return d`, []string{"a", "b"}, true},
		{"returned literal", `def nested(self: __torch__.M,
    x: Tensor) -> Dict[str, Tensor]:
    y = (self).forward(x, )
    return {"n": y["frames"]}`, []string{"n"}, true},
		{"item read", `def f(self: __torch__.M,
    x: Tensor) -> Dict[str, Tensor]:
    d = {"a": x}
    y = torch.mul(d["a"], 2)
    torch._set_item(d, "b", y)
    return d`, []string{"a", "b"}, true},
		{"computed keys", `def dyn(self: __torch__.M,
    x: Tensor,
    names: List[str]) -> Dict[str, Tensor]:
    d = annotate(Dict[str, Tensor], {})
    for _2 in range(torch.len(names)):
      n = names[_2]
      torch._set_item(d, n, x)
    return d`, nil, false},
		{"helper", `def viahelper(self: __torch__.M,
    x: Tensor) -> Dict[str, Tensor]:
    d = (self).helper(x, )
    torch._set_item(d, "extra", x)
    return d`, []string{"extra"}, false},
		{"update", `def upd(self: __torch__.M,
    x: Tensor) -> Dict[str, Tensor]:
    d = {"u": x}
    torch.update(d, {"v": x})
    return d`, []string{"u"}, false},
		{"passed to a call", `def f(self: __torch__.M,
    x: Tensor) -> Dict[str, Tensor]:
    d = {"u": x}
    _0 = (self).fill(d, )
    return d`, []string{"u"}, false},
		{"argument", `def ret_arg(self: __torch__.M,
    d: Dict[str, Tensor]) -> Dict[str, Tensor]:
    return d`, nil, false},
		{"reassigned from a call", `def f(self: __torch__.M,
    x: Tensor,
    flag: bool) -> Dict[str, Tensor]:
    d = {"a": x}
    if flag:
      d = (self).helper(x, )
    else:
      pass
    return d`, []string{"a"}, false},
		{"computed key in a literal", `def f(self: __torch__.M,
    x: Tensor,
    k: str) -> Dict[str, Tensor]:
    return {k: x}`, nil, false},
		{"one return not a dict literal", `def f(self: __torch__.M,
    x: Tensor,
    flag: bool) -> Dict[str, Tensor]:
    if flag:
      return {"a": x}
    else:
      return (self).helper(x, )`, []string{"a"}, false},
		{"text", `def text(self: __torch__.M,
    x: Tensor) -> str:
    return "hi"`, nil, false},
		{"tensor", `def forward(self, x: Tensor) -> Tensor:
    return torch.mul(x, 2)`, nil, false},
		{"no body", `def broken(self, x: Tensor`, nil, false},
	} {
		got := methodReturns(tc.code)
		var names []string
		for _, k := range got.Keys {
			names = append(names, k.Name)
		}
		if diff := cmp.Diff(tc.keys, names); diff != "" || got.Complete != tc.complete {
			t.Errorf("%s: complete %v, want %v; keys (-want +got):\n%s", tc.name, got.Complete, tc.complete, diff)
		}
	}
}

// archive writes a zip shaped like a TorchScript archive.
func archive(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, data := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(data))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

const pkl = "\x80\x02c__torch__.pkg\nNet\nq\x00)\x81}"

const netCode = `class Other(Module):
  def forward(self: __torch__.pkg.Other) -> Dict[str, Tensor]:
    return {"wrong": torch.ones([1])}
class Net(Module):
  __parameters__ = []
  sub : __torch__.pkg.Other
  def forward(self: __torch__.pkg.Net,
    x: Tensor) -> Dict[str, Tensor]:
    return {"y": x}
  def step(self: __torch__.pkg.Net) -> Dict[str, Tensor]:
    return {"frames": torch.zeros([1]), "state": torch.zeros([1])}
  def plain(self: __torch__.pkg.Net) -> Tensor:
    return torch.zeros([1])
  def nothing(self: __torch__.pkg.Net) -> Dict[str, Tensor]:
    return annotate(Dict[str, Tensor], {})
`

func TestReadReturns(t *testing.T) {
	t.Parallel()
	data := archive(t, map[string]string{"net/data.pkl": pkl, "net/code/__torch__/pkg.py": netCode, "net/version": "3"})
	got := ReadReturns(bytes.NewReader(data), int64(len(data)))
	want := map[string]MethodReturns{
		"forward": {Keys: []ReturnKey{{"y", true}}, Complete: true},
		"step":    {Keys: []ReturnKey{{"frames", true}, {"state", true}}, Complete: true},
		"nothing": {Complete: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadReturns (-want +got):\n%s", diff)
	}
	keys := ReturnKeys(bytes.NewReader(data), int64(len(data)))
	wantKeys := map[string][]ReturnKey{"forward": {{"y", true}}, "step": {{"frames", true}, {"state", true}}}
	if diff := cmp.Diff(wantKeys, keys); diff != "" {
		t.Errorf("ReturnKeys (-want +got):\n%s", diff)
	}
	for name, files := range map[string]map[string]string{
		"no root":       {"data.pkl": pkl, "code/__torch__/pkg.py": netCode},
		"no code":       {"net/data.pkl": pkl},
		"other pickle":  {"net/data.pkl": "\x80\x04\x95", "net/code/__torch__/pkg.py": netCode},
		"foreign class": {"net/data.pkl": "\x80\x02cos\nsystem\n", "net/code/os.py": netCode},
	} {
		d := archive(t, files)
		if got := ReadReturns(bytes.NewReader(d), int64(len(d))); got != nil {
			t.Errorf("%s: %v, want none", name, got)
		}
	}
	if got := ReadReturns(bytes.NewReader([]byte("not a zip")), 9); got != nil {
		t.Errorf("not a zip: %v", got)
	}
}
