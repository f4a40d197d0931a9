#!/usr/bin/env python3
"""Export a PyTorch model as an AOTInductor package (.pt2) that wfgen runs.

wfgen's engine runs a package with libtorch's AOTIModelPackageLoader
(libtorch >= 2.6). A compiled model does not check the dtypes and shapes of
what it is given, so wfgen needs them from the export: this script records
the call spec it was exported for (argument names, which arguments were
baked in as constants, dtypes, shapes and the range of every dynamic
dimension) in the package's metadata, under the key "wfgen.call_spec".
A package without it is refused at load. See docs/aoti.md.

As a library, from your own export script:

    import torch
    from export import export_package

    model = MyModel().eval()
    batch = torch.export.Dim("batch", min=1, max=64)
    export_package(model, "model.pt2",
                   args=(torch.randn(2, 32),),
                   dynamic_shapes=({0: batch},))

As a command, for the models the tests and benchmarks use:

    python3 export.py encoder out/encoder.pt2 [--max-batch 16]
        [--reference out/encoder] [--torchscript out/encoder.pt]
    python3 export.py mobilenet_v3_small out/mobilenet.pt2 ...

--reference PREFIX writes a reference call (inputs, and outputs of the
package run from Python and of the eager model) as PREFIX.json plus raw
little-endian PREFIX.<name>.bin files; --torchscript writes the same model as
a TorchScript archive. The command prints a JSON report with the export
costs (seconds, bytes).
"""

import argparse
import inspect
import json
import os
import sys
import time

import torch

KEY = "wfgen.call_spec"
VERSION = 1


def _dtype(dt):
    name = str(dt).removeprefix("torch.")
    known = {"float32", "float16", "bfloat16", "int64", "int32", "uint8", "bool"}
    if name not in known:
        raise ValueError(f"dtype {name} cannot cross wfgen's Go boundary (supported: {', '.join(sorted(known))})")
    return name


def _leaves(spec, what):
    """The children of a tuple/list/dict treespec, each of which must be a leaf."""
    for i, child in enumerate(spec.children_specs):
        if not child.is_leaf():
            raise ValueError(
                f"{what} {i} is a nested {child.type.__name__}: wfgen passes one tensor per argument and "
                "returns one tensor per output; flatten it in forward")
    return spec.children_specs


def _dim_names(leaf_names, dynamic_shapes, vals):
    """Maps shape symbols (s0, ...) to the names of the torch.export.Dim objects."""
    names = {}
    if dynamic_shapes is None:
        return names
    if isinstance(dynamic_shapes, dict):
        specs = [dynamic_shapes.get(n) for n in leaf_names]
    else:
        specs = list(dynamic_shapes) + [None] * (len(leaf_names) - len(dynamic_shapes))
    for spec, val in zip(specs, vals):
        if spec is None or not isinstance(val, torch.Tensor):
            continue
        axes = spec.items() if isinstance(spec, dict) else enumerate(spec)
        for axis, dim in axes:
            name = getattr(dim, "__name__", None)
            size = val.shape[axis]
            if name and isinstance(size, torch.SymInt):
                expr = size.node.expr
                if getattr(expr, "is_Symbol", False):
                    names[str(expr)] = name
    return names


def _shape(val, names):
    out = []
    for d in val.shape:
        if isinstance(d, torch.SymInt):
            expr = d.node.expr
            out.append(names.get(str(expr), str(expr)) if getattr(expr, "is_Symbol", False) else "*")
        else:
            out.append(int(d))
    return out


def call_spec(ep, model, dynamic_shapes=None):
    """The wfgen call spec of an ExportedProgram: engine.CallSpec's JSON form."""
    from torch.export.graph_signature import ConstantArgument, InputKind, OutputKind, TensorArgument

    in_spec = ep.call_spec.in_spec
    args_spec, kwargs_spec = in_spec.children_specs
    params = [p.name for p in inspect.signature(model.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    positional = _leaves(args_spec, "positional argument")
    if len(positional) > len(params):
        raise ValueError(f"{len(positional)} positional arguments, but forward names {len(params)}")
    leaf_names = params[:len(positional)] + list(kwargs_spec.context or [])
    _leaves(kwargs_spec, "keyword argument")

    nodes = {n.name: n for n in ep.graph.nodes}
    user_inputs = [s for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    if len(user_inputs) != len(leaf_names):
        raise ValueError(f"the export has {len(user_inputs)} user inputs for {len(leaf_names)} arguments")
    vals = [nodes[s.arg.name].meta["val"] if isinstance(s.arg, TensorArgument) else None for s in user_inputs]
    names = _dim_names(leaf_names, dynamic_shapes, vals)

    inputs = []
    for i, (name, s, val) in enumerate(zip(leaf_names, user_inputs, vals)):
        entry = {"name": name}
        if i >= len(positional):
            entry["keyword"] = True
        if isinstance(s.arg, ConstantArgument):
            entry["constant"] = True
            entry["value"] = s.arg.value
        elif isinstance(s.arg, TensorArgument):
            entry["dtype"] = _dtype(val.dtype)
            entry["shape"] = _shape(val, names)
        else:
            raise ValueError(f"argument {name} is a {type(s.arg).__name__}: wfgen passes tensors (other values are baked in)")
        inputs.append(entry)

    out_spec = ep.call_spec.out_spec
    if out_spec.is_leaf():
        returns, out_names = "tensor", ["output"]
    elif out_spec.type is dict or out_spec.type.__name__ == "OrderedDict":
        _leaves(out_spec, "output")
        returns, out_names = "dict", [str(k) for k in out_spec.context]
    elif out_spec.type in (tuple, list):
        _leaves(out_spec, "output")
        returns, out_names = "tuple", [f"output{i}" for i in range(out_spec.num_leaves)]
    else:
        raise ValueError(f"forward returns a {out_spec.type.__name__}: return a tensor, a tuple or a dict of tensors")
    user_outputs = [s for s in ep.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT]
    outputs = []
    for name, s in zip(out_names, user_outputs):
        if not isinstance(s.arg, TensorArgument):
            raise ValueError(f"output {name} is not a tensor ({type(s.arg).__name__}); return tensors only")
        val = nodes[s.arg.name].meta["val"]
        outputs.append({"name": name, "dtype": _dtype(val.dtype), "shape": _shape(val, names)})

    dims = {}
    for sym, rng in ep.range_constraints.items():
        name = names.get(str(sym), str(sym))
        d = {"min": int(rng.lower)}
        try:
            d["max"] = int(rng.upper)
        except (TypeError, ValueError, OverflowError):
            pass  # unbounded
        if d.get("max", 0) > 2**62:
            del d["max"]
        dims[name] = d
    return {"version": VERSION, "inputs": inputs, "outputs": outputs, "returns": returns, "dims": dims}


def export_package(model, path, args=(), kwargs=None, dynamic_shapes=None):
    """Exports model (in eval mode) as an AOTInductor package at path with
    wfgen's call spec in its metadata. Returns the call spec and the seconds
    torch.export and the AOTInductor compile took."""
    model = model.eval()
    start = time.perf_counter()
    ep = torch.export.export(model, tuple(args), kwargs or {}, dynamic_shapes=dynamic_shapes)
    exported = time.perf_counter()
    spec = call_spec(ep, model, dynamic_shapes)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    torch._inductor.aoti_compile_and_package(
        ep, package_path=path, inductor_configs={"aot_inductor.metadata": {KEY: json.dumps(spec)}})
    compiled = time.perf_counter()
    return spec, exported - start, compiled - exported


# ---------------------------------------------------------------- the models the tests use


class Encoder(torch.nn.Module):
    """A two-layer encoder: features [N, 32] to unit-norm embeddings [N, 16]
    plus the features' norms [N]. normalize is a flag that the export, given
    it by keyword, bakes in."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(32, 64)
        self.l2 = torch.nn.Linear(64, 16)

    def forward(self, features, normalize: bool = True):
        e = self.l2(torch.relu(self.l1(features)))
        if normalize:
            e = e / e.norm(p=2, dim=1, keepdim=True).clamp_min(1e-6)
        return {"embedding": e, "norm": features.norm(p=2, dim=1)}


def encoder(max_batch):
    torch.manual_seed(0)
    model = Encoder().eval()
    batch = torch.export.Dim("batch", min=2, max=max_batch)
    example = {"features": torch.randn(3, 32)}
    return model, (example["features"],), {"normalize": True}, {"features": {0: batch}, "normalize": None}, example


def mobilenet_v3_small(max_batch):
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small()
    # Random weights with the batch norms' default statistics shrink the
    # activations layer by layer to logits of about 1e-9, where float noise
    # is the whole signal. Calibrating the statistics on random pictures
    # (as training would on real ones) keeps them at a trained model's scale.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = None  # a cumulative average
    with torch.no_grad():
        model.train()
        for _ in range(2):
            model(torch.randn(8, 3, 224, 224))
    model.eval()
    batch = torch.export.Dim("batch", min=1, max=max_batch)
    example = {"x": torch.randn(2, 3, 224, 224)}
    return model, (example["x"],), {}, ({0: batch},), example


MODELS = {"encoder": encoder, "mobilenet_v3_small": mobilenet_v3_small}


def _write_tensor(prefix, name, t):
    t = t.detach().contiguous().cpu()
    file = f"{prefix}.{name}.bin"
    with open(file, "wb") as f:
        f.write(t.numpy().tobytes())
    return {"dtype": _dtype(t.dtype), "shape": list(t.shape), "file": os.path.basename(file)}


def _flat_outputs(out):
    if isinstance(out, dict):
        return {str(k): v for k, v in out.items()}
    if isinstance(out, (tuple, list)):
        return {f"output{i}": v for i, v in enumerate(out)}
    return {"output": out}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=sorted(MODELS))
    p.add_argument("package", help="the .pt2 file to write")
    p.add_argument("--max-batch", type=int, default=16, help="largest batch the package accepts")
    p.add_argument("--reference", metavar="PREFIX", help="write a reference call to PREFIX.json and PREFIX.*.bin")
    p.add_argument("--torchscript", metavar="PATH", help="also write the model as a TorchScript archive")
    a = p.parse_args()

    model, args, kwargs, dynamic_shapes, example = MODELS[a.model](a.max_batch)
    spec, export_s, compile_s = export_package(model, a.package, args, kwargs, dynamic_shapes)
    report = {"model": a.model, "torch": torch.__version__, "export_seconds": round(export_s, 3),
              "compile_seconds": round(compile_s, 3), "package_bytes": os.path.getsize(a.package), "call_spec": spec}

    start = time.perf_counter()
    compiled = torch._inductor.aoti_load_package(a.package)
    report["python_load_seconds"] = round(time.perf_counter() - start, 4)

    if a.torchscript:
        start = time.perf_counter()
        scripted = torch.jit.script(model)
        scripted.save(a.torchscript)
        report["torchscript_seconds"] = round(time.perf_counter() - start, 3)
        report["torchscript_bytes"] = os.path.getsize(a.torchscript)

    if a.reference:
        with torch.inference_mode():
            got = _flat_outputs(compiled(*args, **kwargs))
            eager = _flat_outputs(model(*args, **kwargs))
        ref = {"inputs": {k: _write_tensor(a.reference, "in." + k, v) for k, v in example.items()},
               "kwargs": {k: v for k, v in kwargs.items()},
               "outputs": {k: _write_tensor(a.reference, "out." + k, v) for k, v in got.items()},
               "eager": {k: _write_tensor(a.reference, "eager." + k, v) for k, v in eager.items()}}
        with open(a.reference + ".json", "w") as f:
            json.dump(ref, f, indent=1)

    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
