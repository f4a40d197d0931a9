// shim.cpp — the libtorch side of wfgen's engine. Kept small and stable so
// Go's build cache keeps the compiled object; all policy lives in Go.
//
// Value blob format (little-endian; the Go side is runtime/torch/value.go):
//   value  = tag:u8 body
//   0 None | 1 Bool u8 | 2 Int i64 | 3 Float f64 | 4 Str u64 len, bytes
//   5 Tensor u8 dtype, u32 ndim, i64 dims[ndim], then
//        input:  u32 pointer index, u64 nbytes
//        output: u64 nbytes, bytes
//   6 List u64 n, values | 7 Tuple u64 n, values
//   8 Dict u64 n, n x (u64 klen, key bytes, value)
#include "shim.h"

// libtorch's headers: <torch/script.h> is in libtorch's include directory,
// <torch/all.h> in its include/torch/csrc/api/include. Without them every
// include below fails with a message that names some ATen header; say what
// is missing and where the fix is instead.
#if !__has_include(<torch/script.h>) || !__has_include(<torch/all.h>) || !__has_include(<torch/version.h>)
#error "wfgen: libtorch headers not found (torch/script.h in libtorch's include directory, torch/all.h in include/torch/csrc/api/include). Install Debian's libtorch-dev, or build with -tags libtorch_custom and CGO_CXXFLAGS/CGO_LDFLAGS pointing at your libtorch (scripts/libtorch-pc.sh writes them as a libtorch.pc): see docs/engine.md, \"Finding libtorch\"."
#endif

#include <ATen/EmptyTensor.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/passes/frozen_conv_add_relu_fusion.h>
#include <torch/csrc/jit/passes/frozen_linear_transpose.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/script.h>
#include <torch/version.h>

#include "aoti.h"
#include "hook.h"

// The TorchScript fuser switches (torch/csrc/jit/codegen/fuser/interface.h,
// exported by libtorch_cpu since 1.x; Debian's libtorch-dev lacks the header).
#if __has_include(<torch/csrc/jit/codegen/fuser/interface.h>)
#include <torch/csrc/jit/codegen/fuser/interface.h>
#else
namespace torch {
namespace jit {
TORCH_API bool canFuseOnCPU();
TORCH_API void overrideCanFuseOnCPU(bool value);
}  // namespace jit
}  // namespace torch
#endif

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

enum Tag : uint8_t {
  kNone = 0, kBool = 1, kInt = 2, kFloat = 3, kStr = 4, kTensor = 5, kList = 6, kTuple = 7, kDict = 8,
};

constexpr int kMaxDepth = 64;
constexpr uint32_t kMaxDims = 64;

// BadInput is thrown for malformed blobs and wrong argument values.
struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool dtype_from_code(int32_t code, at::ScalarType* st) {
  switch (code) {
    case 1: *st = at::kFloat; return true;
    case 2: *st = at::kHalf; return true;
    case 3: *st = at::kBFloat16; return true;
    case 4: *st = at::kLong; return true;
    case 5: *st = at::kInt; return true;
    case 6: *st = at::kByte; return true;
    case 7: *st = at::kBool; return true;
  }
  return false;
}

int32_t dtype_code(at::ScalarType st) {
  switch (st) {
    case at::kFloat: return 1;
    case at::kHalf: return 2;
    case at::kBFloat16: return 3;
    case at::kLong: return 4;
    case at::kInt: return 5;
    case at::kByte: return 6;
    case at::kBool: return 7;
    default: return 0;
  }
}

// ---------------------------------------------------------------- reading

struct Reader {
  const char* p;
  size_t n;
  size_t off = 0;

  void need(size_t k) {
    if (k > n - off) throw BadInput("malformed value blob: truncated");
  }
  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, p + off, sizeof(T));
    off += sizeof(T);
    return v;
  }
  std::string str() {
    uint64_t len = get<uint64_t>();
    need(len);
    std::string s(p + off, len);
    off += len;
    return s;
  }
};

struct Inputs {
  void* const* ptrs;
  int64_t nptrs;
  c10::Device device = c10::Device(c10::kCPU);
  c10::optional<at::ScalarType> float_dtype;  // cast floating inputs to this
};

int64_t checked_numel(const std::vector<int64_t>& dims) {
  int64_t numel = 1;
  for (int64_t d : dims) {
    if (d < 0) throw BadInput("tensor has a negative dimension");
    if (d != 0 && numel > INT64_MAX / d) throw BadInput("tensor shape overflows");
    numel *= d;
  }
  return numel;
}

// Reads an input tensor (after its tag) and copies it into libtorch memory on
// the target device and dtype; the caller's buffer is not referenced after.
at::Tensor read_tensor(Reader& r, const Inputs& in) {
  at::ScalarType st;
  int32_t code = r.get<uint8_t>();
  if (!dtype_from_code(code, &st)) throw BadInput("tensor has unknown dtype code " + std::to_string(code));
  uint32_t ndim = r.get<uint32_t>();
  if (ndim > kMaxDims) throw BadInput("tensor has too many dimensions");
  std::vector<int64_t> dims(ndim);
  for (auto& d : dims) d = r.get<int64_t>();
  uint32_t idx = r.get<uint32_t>();
  uint64_t nbytes = r.get<uint64_t>();
  int64_t numel = checked_numel(dims);
  int64_t esize = static_cast<int64_t>(c10::elementSize(st));
  if (numel > INT64_MAX / esize || static_cast<uint64_t>(numel * esize) != nbytes)
    throw BadInput("tensor data length does not match its shape and dtype");
  if (static_cast<int64_t>(idx) >= in.nptrs) throw BadInput("tensor data index out of range");
  const void* src = in.ptrs[idx];
  if (nbytes > 0 && src == nullptr) throw BadInput("tensor data pointer is null");
  auto opts = at::TensorOptions().dtype(st);
  bool cast = in.float_dtype && at::isFloatingType(st) && *in.float_dtype != st;
  if (!in.device.is_cpu() || cast) {
    // from_blob + to() copies; the result never aliases caller memory.
    at::Tensor view = at::from_blob(const_cast<void*>(src), dims, opts);
    at::Tensor t = view.to(in.device, cast ? *in.float_dtype : st, /*non_blocking=*/false, /*copy=*/true);
    return t;
  }
  // empty_cpu allocates without a dispatcher round trip.
  at::Tensor t(at::detail::empty_cpu(dims, st));
  if (nbytes > 0) std::memcpy(t.data_ptr(), src, nbytes);
  return t;
}

c10::IValue read_value(Reader& r, const c10::TypePtr& want, const Inputs& in, int depth);

// read_untyped infers the TorchScript value from the tag alone (Any, Union).
c10::IValue read_untyped(Reader& r, uint8_t tag, const Inputs& in, int depth) {
  switch (tag) {
    case kNone: return c10::IValue();
    case kBool: return c10::IValue(r.get<uint8_t>() != 0);
    case kInt: return c10::IValue(r.get<int64_t>());
    case kFloat: return c10::IValue(r.get<double>());
    case kStr: return c10::IValue(r.str());
    case kTensor: return c10::IValue(read_tensor(r, in));
    case kList: {
      uint64_t n = r.get<uint64_t>();
      c10::impl::GenericList list(c10::AnyType::get());
      for (uint64_t i = 0; i < n; i++) list.push_back(read_value(r, c10::AnyType::get(), in, depth + 1));
      return c10::IValue(list);
    }
    case kTuple: {
      uint64_t n = r.get<uint64_t>();
      std::vector<c10::IValue> elems;
      for (uint64_t i = 0; i < n; i++) elems.push_back(read_value(r, c10::AnyType::get(), in, depth + 1));
      return c10::ivalue::Tuple::create(std::move(elems));
    }
    case kDict: {
      uint64_t n = r.get<uint64_t>();
      c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
      for (uint64_t i = 0; i < n; i++) {
        std::string k = r.str();
        d.insert_or_assign(c10::IValue(std::move(k)), read_value(r, c10::AnyType::get(), in, depth + 1));
      }
      return c10::IValue(d);
    }
  }
  throw BadInput("malformed value blob: unknown tag " + std::to_string(tag));
}

const char* tag_name(uint8_t tag) {
  switch (tag) {
    case kNone: return "None";
    case kBool: return "bool";
    case kInt: return "int";
    case kFloat: return "float";
    case kStr: return "str";
    case kTensor: return "Tensor";
    case kList: return "list";
    case kTuple: return "tuple";
    case kDict: return "dict";
  }
  return "unknown";
}

[[noreturn]] void type_mismatch(const c10::TypePtr& want, uint8_t tag) {
  throw BadInput(std::string("expected a value of type ") + want->annotation_str() + ", found " + tag_name(tag));
}

// read_value converts the next value to the TorchScript type `want`.
c10::IValue read_value(Reader& r, const c10::TypePtr& want, const Inputs& in, int depth) {
  if (depth > kMaxDepth) throw BadInput("value nests too deeply");
  uint8_t tag = r.get<uint8_t>();
  switch (want->kind()) {
    case c10::TypeKind::AnyType:
    case c10::TypeKind::UnionType:
      return read_untyped(r, tag, in, depth);
    case c10::TypeKind::OptionalType:
      if (tag == kNone) return c10::IValue();
      // Re-read with the element type: step back over the tag.
      r.off -= 1;
      return read_value(r, want->expectRef<c10::OptionalType>().getElementType(), in, depth);
    case c10::TypeKind::NoneType:
      if (tag != kNone) type_mismatch(want, tag);
      return c10::IValue();
    case c10::TypeKind::BoolType:
      if (tag != kBool) type_mismatch(want, tag);
      return c10::IValue(r.get<uint8_t>() != 0);
    case c10::TypeKind::IntType:
      if (tag != kInt) type_mismatch(want, tag);
      return c10::IValue(r.get<int64_t>());
    case c10::TypeKind::FloatType:
      if (tag == kInt) return c10::IValue(static_cast<double>(r.get<int64_t>()));
      if (tag != kFloat) type_mismatch(want, tag);
      return c10::IValue(r.get<double>());
    case c10::TypeKind::NumberType:
      if (tag == kInt) return c10::IValue(r.get<int64_t>());
      if (tag == kFloat) return c10::IValue(r.get<double>());
      if (tag == kBool) return c10::IValue(r.get<uint8_t>() != 0);
      type_mismatch(want, tag);
    case c10::TypeKind::StringType:
      if (tag != kStr) type_mismatch(want, tag);
      return c10::IValue(r.str());
    case c10::TypeKind::DeviceObjType:
      if (tag != kStr) type_mismatch(want, tag);
      return c10::IValue(c10::Device(r.str()));
    case c10::TypeKind::TensorType:
      if (tag != kTensor) type_mismatch(want, tag);
      return c10::IValue(read_tensor(r, in));
    case c10::TypeKind::ListType: {
      if (tag != kList && tag != kTuple) type_mismatch(want, tag);
      const auto& elem = want->expectRef<c10::ListType>().getElementType();
      uint64_t n = r.get<uint64_t>();
      c10::impl::GenericList list(elem);
      list.reserve(n < 1024 ? n : 1024);
      for (uint64_t i = 0; i < n; i++) list.push_back(read_value(r, elem, in, depth + 1));
      return c10::IValue(list);
    }
    case c10::TypeKind::TupleType: {
      if (tag != kList && tag != kTuple) type_mismatch(want, tag);
      const auto& elems = want->expectRef<c10::TupleType>().elements();
      uint64_t n = r.get<uint64_t>();
      if (n != elems.size())
        throw BadInput("expected a tuple of " + std::to_string(elems.size()) + " values, found " + std::to_string(n));
      std::vector<c10::IValue> vals;
      for (uint64_t i = 0; i < n; i++) vals.push_back(read_value(r, elems[i], in, depth + 1));
      return c10::ivalue::Tuple::create(std::move(vals));
    }
    case c10::TypeKind::DictType: {
      if (tag != kDict) type_mismatch(want, tag);
      const auto& dt = want->expectRef<c10::DictType>();
      if (dt.getKeyType()->kind() != c10::TypeKind::StringType)
        throw BadInput("only dicts with str keys can be passed, not " + want->annotation_str());
      uint64_t n = r.get<uint64_t>();
      c10::impl::GenericDict d(dt.getKeyType(), dt.getValueType());
      for (uint64_t i = 0; i < n; i++) {
        std::string k = r.str();
        d.insert_or_assign(c10::IValue(std::move(k)), read_value(r, dt.getValueType(), in, depth + 1));
      }
      return c10::IValue(d);
    }
    default:
      throw BadInput("arguments of type " + want->annotation_str() + " cannot be passed from Go");
  }
}

// ---------------------------------------------------------------- writing

// Writer measures (buf == nullptr) or writes a blob. Output tensors are
// converted to contiguous CPU tensors in the measuring pass and reused.
struct Writer {
  char* buf = nullptr;
  size_t n = 0;
  std::vector<at::Tensor> tensors;
  size_t next_tensor = 0;
  bool lenient = false;  // schema defaults: unknown kinds become their repr string

  void bytes(const void* src, size_t len) {
    if (buf && len) std::memcpy(buf + n, src, len);
    n += len;
  }
  template <typename T>
  void put(T v) { bytes(&v, sizeof(T)); }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
};

at::Tensor host_tensor(const at::Tensor& t0) {
  at::Tensor t = t0;
  if (t.is_sparse()) throw std::runtime_error("sparse tensors cannot be returned to Go; call .to_dense() in the module");
  if (t.is_quantized()) throw std::runtime_error("quantized tensors cannot be returned to Go; dequantize in the module");
  if (t.is_mkldnn()) t = t.to_dense();
  if (dtype_code(t.scalar_type()) == 0)
    throw std::runtime_error(std::string("tensor dtype ") + c10::toString(t.scalar_type()) +
                             " cannot cross the Go boundary (supported: float32, float16, bfloat16, int64, int32, "
                             "uint8, bool); cast it in the module");
  if (!t.device().is_cpu()) t = t.to(c10::kCPU);
  // resolve_conj/resolve_neg go through the dispatcher even when they are
  // no-ops: only call them when a bit is set.
  if (t.is_conj()) t = t.resolve_conj();
  if (t.is_neg()) t = t.resolve_neg();
  return t.contiguous();
}

void write_value(Writer& w, const c10::IValue& v, int depth) {
  if (depth > kMaxDepth) throw std::runtime_error("output value nests too deeply");
  if (v.isNone()) {
    w.put<uint8_t>(kNone);
  } else if (v.isBool()) {
    w.put<uint8_t>(kBool);
    w.put<uint8_t>(v.toBool() ? 1 : 0);
  } else if (v.isInt()) {
    w.put<uint8_t>(kInt);
    w.put<int64_t>(v.toInt());
  } else if (v.isDouble()) {
    w.put<uint8_t>(kFloat);
    w.put<double>(v.toDouble());
  } else if (v.isString()) {
    w.put<uint8_t>(kStr);
    w.str(v.toStringRef());
  } else if (v.isDevice()) {
    w.put<uint8_t>(kStr);
    w.str(v.toDevice().str());
  } else if (v.isTensor()) {
    at::Tensor t;
    if (w.buf == nullptr) {
      t = host_tensor(v.toTensor());
      w.tensors.push_back(t);
    } else {
      t = w.tensors.at(w.next_tensor++);
    }
    w.put<uint8_t>(kTensor);
    w.put<uint8_t>(static_cast<uint8_t>(dtype_code(t.scalar_type())));
    w.put<uint32_t>(static_cast<uint32_t>(t.dim()));
    for (int64_t d : t.sizes()) w.put<int64_t>(d);
    uint64_t nbytes = t.numel() * t.element_size();
    w.put<uint64_t>(nbytes);
    if (nbytes) w.bytes(t.data_ptr(), nbytes);
  } else if (v.isList()) {
    auto items = v.toListRef();
    w.put<uint8_t>(kList);
    w.put<uint64_t>(items.size());
    for (const auto& it : items) write_value(w, it, depth + 1);
  } else if (v.isTuple()) {
    const auto& elems = v.toTupleRef().elements();
    w.put<uint8_t>(kTuple);
    w.put<uint64_t>(elems.size());
    for (const auto& it : elems) write_value(w, it, depth + 1);
  } else if (v.isGenericDict()) {
    auto d = v.toGenericDict();
    if (d.keyType()->kind() != c10::TypeKind::StringType)
      throw std::runtime_error("dicts returned to Go need str keys, not " + d.keyType()->annotation_str());
    w.put<uint8_t>(kDict);
    w.put<uint64_t>(d.size());
    for (const auto& e : d) {
      w.str(e.key().toStringRef());
      write_value(w, e.value(), depth + 1);
    }
  } else if (w.lenient) {
    std::ostringstream ss;
    ss << v;
    w.put<uint8_t>(kStr);
    w.str(ss.str());
  } else {
    throw std::runtime_error(std::string("values of kind ") + v.tagKind() + " cannot be returned to Go");
  }
}

// emit writes a payload produced by fill(Writer&) to out, or to a malloc'd
// overflow block when it does not fit.
template <typename F>
void emit(char* out, int64_t cap, wf_result* res, int32_t status, F fill) {
  Writer w;
  fill(w);
  size_t size = w.n;
  char* dst = out;
  void* overflow = nullptr;
  if (static_cast<int64_t>(size) > cap) {
    overflow = std::malloc(size ? size : 1);
    if (!overflow) throw std::bad_alloc();
    dst = static_cast<char*>(overflow);
  }
  w.buf = dst;
  w.n = 0;
  w.next_tensor = 0;
  fill(w);
  res->status = status;
  res->size = static_cast<int64_t>(size);
  res->overflow = overflow;
}

void emit_message(char* out, int64_t cap, wf_result* res, int32_t status, const char* msg) noexcept {
  size_t len = std::strlen(msg);
  res->status = status;
  res->overflow = nullptr;
  if (static_cast<int64_t>(len) <= cap) {
    std::memcpy(out, msg, len);
    res->size = static_cast<int64_t>(len);
    return;
  }
  void* p = std::malloc(len);
  if (p) {
    std::memcpy(p, msg, len);
    res->overflow = p;
    res->size = static_cast<int64_t>(len);
    return;
  }
  size_t k = cap > 0 ? static_cast<size_t>(cap) : 0;
  if (k) std::memcpy(out, msg, k);
  res->size = static_cast<int64_t>(k);
}

// guarded runs body and turns every exception into a status and message.
template <typename F>
void guarded(char* out, int64_t cap, wf_result* res, F body) noexcept {
  res->status = WF_OK;
  res->size = 0;
  res->overflow = nullptr;
  try {
    body();
    return;
  } catch (const c10::OutOfMemoryError& e) {
    emit_message(out, cap, res, WF_OOM, e.what_without_backtrace());
  } catch (const c10::Error& e) {
    emit_message(out, cap, res, WF_ERROR, e.what_without_backtrace());
  } catch (const std::bad_alloc& e) {
    emit_message(out, cap, res, WF_OOM, "std::bad_alloc: host memory allocation failed");
  } catch (const std::exception& e) {
    emit_message(out, cap, res, WF_ERROR, e.what());
  } catch (...) {
    emit_message(out, cap, res, WF_ERROR, "unknown C++ exception");
  }
}

}  // namespace

// ---------------------------------------------------------------- modules

struct MethodEntry {
  torch::jit::Function* fn;
  std::vector<std::string> names;  // argument names without self
  std::vector<c10::TypePtr> types;
  std::vector<c10::optional<c10::IValue>> defaults;
};

struct wf_module {
  torch::jit::Module module;
  c10::Device device = c10::Device(c10::kCPU);
  c10::optional<at::ScalarType> dtype;
  std::unordered_map<std::string, MethodEntry> methods;
};

namespace {

constexpr const char* kCompiledAttr = "_worldfoundry_core_compiled";

void index_methods(wf_module* h) {
  h->methods.clear();
  for (const auto& m : h->module.get_methods()) {
    MethodEntry e;
    e.fn = &m.function();
    const auto& args = e.fn->getSchema().arguments();
    for (size_t i = 1; i < args.size(); i++) {
      e.names.push_back(args[i].name());
      e.types.push_back(args[i].type());
      e.defaults.push_back(args[i].default_value());
    }
    h->methods.emplace(m.name(), std::move(e));
  }
}

// schema_type_str prints a schema's type in annotation form with every
// NamedTuple class written as the Tuple of its fields' types (the value
// libtorch returns is that tuple): what contract.ReadSignatures prints for
// the same code, so the load's contract check and wfgen validate agree.
std::string schema_type_str(const c10::TypePtr& type) {
  c10::TypePrinter printer;
  printer = [&printer](const c10::Type& t) -> decltype(printer(t)) {
    const auto* tuple = t.castRaw<c10::TupleType>();
    if (tuple == nullptr || !tuple->name()) return {};
    const auto elems = tuple->elements();
    if (elems.empty()) return std::string("Tuple[()]");
    std::string s = "Tuple[";
    for (size_t i = 0; i < elems.size(); i++) {
      if (i > 0) s += ", ";
      s += elems[i]->annotation_str(printer);
    }
    return s + "]";
  };
  return type->annotation_str(printer);
}

void write_info(Writer& w, const wf_module* h) {
  w.lenient = true;
  w.put<uint8_t>(h->module.hasattr(kCompiledAttr) ? 1 : 0);
  w.str(h->device.str());
  std::vector<std::string> names;
  for (const auto& m : h->module.get_methods()) names.push_back(m.name());
  w.put<uint64_t>(names.size());
  for (const auto& name : names) {
    const auto& schema = h->methods.at(name).fn->getSchema();
    w.str(name);
    const auto& args = schema.arguments();
    w.put<uint64_t>(args.empty() ? 0 : args.size() - 1);
    for (size_t i = 1; i < args.size(); i++) {
      w.str(args[i].name());
      w.str(schema_type_str(args[i].type()));
      auto def = args[i].default_value();
      w.put<uint8_t>(def ? 1 : 0);
      if (def) write_value(w, *def, 0);
    }
    w.put<uint64_t>(schema.returns().size());
    for (const auto& ret : schema.returns()) w.str(schema_type_str(ret.type()));
  }
}

c10::Device parse_device(const std::string& s) {
  c10::Device dev(s);
  if (dev.is_cuda()) {
    const auto& hooks = at::detail::getCUDAHooks();
    int n = hooks.hasCUDA() ? hooks.getNumGPUs() : 0;
    if (n == 0) throw BadInput("device " + s + ": CUDA is not available (libtorch is a CPU build or no device is visible)");
    if (!dev.has_index()) {
      dev = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(hooks.current_device()));
    } else if (dev.index() >= n) {
      throw BadInput("device " + s + ": only " + std::to_string(n) + " CUDA devices are visible");
    }
  }
  return dev;
}

// Builds the positional stack (without self, which torch::jit::Method adds)
// for one call from the kwargs blob.
std::vector<c10::IValue> build_stack(const MethodEntry& e, const std::string& method, const char* args,
                                     int64_t args_len, const Inputs& in) {
  Reader r{args, static_cast<size_t>(args_len)};
  size_t nargs = e.names.size();
  std::vector<c10::IValue> stack(nargs);
  std::vector<bool> given(nargs, false);
  uint64_t nkw = r.get<uint64_t>();
  for (uint64_t k = 0; k < nkw; k++) {
    std::string name = r.str();
    size_t i = 0;
    while (i < nargs && e.names[i] != name) i++;
    if (i == nargs) {
      std::string known;
      for (const auto& n : e.names) known += (known.empty() ? "" : ", ") + n;
      throw BadInput(method + "() got an unexpected keyword argument '" + name + "' (arguments: " +
                     (known.empty() ? "none" : known) + ")");
    }
    if (given[i]) throw BadInput(method + "() got argument '" + name + "' twice");
    try {
      stack[i] = read_value(r, e.types[i], in, 0);
    } catch (const BadInput& err) {
      throw BadInput(method + "() argument '" + name + "': " + err.what());
    }
    given[i] = true;
  }
  if (r.off != r.n) throw BadInput("malformed value blob: trailing bytes");
  for (size_t i = 0; i < nargs; i++) {
    if (given[i]) continue;
    if (!e.defaults[i]) throw BadInput(method + "() is missing argument '" + e.names[i] + "' of type " + e.types[i]->annotation_str());
    stack[i] = *e.defaults[i];
  }
  return stack;
}

const MethodEntry& find_method(const wf_module* h, const std::string& name) {
  auto it = h->methods.find(name);
  if (it == h->methods.end()) {
    std::string known;
    for (const auto& m : h->module.get_methods()) known += (known.empty() ? "" : ", ") + m.name();
    throw BadInput("module has no method '" + name + "' (methods: " + (known.empty() ? "none" : known) + ")");
  }
  return it->second;
}

// CUDA autocast state. libtorch 2.4 replaced the per-backend calls
// (is_enabled, set_autocast_gpu_dtype, ...) with ones that take the device
// type, and deprecated the old ones.
#if WF_TORCH_AT_LEAST(2, 4)
bool cuda_autocast_enabled() { return at::autocast::is_autocast_enabled(at::kCUDA); }
void set_cuda_autocast_enabled(bool on) { at::autocast::set_autocast_enabled(at::kCUDA, on); }
at::ScalarType cuda_autocast_dtype() { return at::autocast::get_autocast_dtype(at::kCUDA); }
void set_cuda_autocast_dtype(at::ScalarType st) { at::autocast::set_autocast_dtype(at::kCUDA, st); }
#else
bool cuda_autocast_enabled() { return at::autocast::is_enabled(); }
void set_cuda_autocast_enabled(bool on) { at::autocast::set_enabled(on); }
at::ScalarType cuda_autocast_dtype() { return at::autocast::get_autocast_gpu_dtype(); }
void set_cuda_autocast_dtype(at::ScalarType st) { at::autocast::set_autocast_gpu_dtype(st); }
#endif

// Sets and restores CUDA autocast for one call (no-op when dtype == 0).
struct AutocastScope {
  bool active = false;
  bool prev_enabled = false;
  at::ScalarType prev_dtype = at::kHalf;
  explicit AutocastScope(int32_t code) {
    at::ScalarType st;
    if (code == 0 || !dtype_from_code(code, &st)) return;
    prev_enabled = cuda_autocast_enabled();
    prev_dtype = cuda_autocast_dtype();
    set_cuda_autocast_enabled(true);
    set_cuda_autocast_dtype(st);
    at::autocast::increment_nesting();
    active = true;
  }
  ~AutocastScope() {
    if (!active) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set_cuda_autocast_enabled(prev_enabled);
    set_cuda_autocast_dtype(prev_dtype);
  }
};

}  // namespace

extern "C" {

void wf_init(int32_t threads, int32_t interop_threads, int32_t cpu_fusion, char* out, int64_t cap,
             wf_result* res) {
  guarded(out, cap, res, [&] {
    torch::jit::overrideCanFuseOnCPU(cpu_fusion != 0);
    if (interop_threads > 0) {
      try {
        at::set_num_interop_threads(interop_threads);
      } catch (const c10::Error&) {
        // Already started by an earlier user of the pool; keep its size.
      }
    }
    if (threads > 0) at::set_num_threads(threads);
    std::string info = at::get_parallel_info();
    emit(out, cap, res, WF_OK, [&](Writer& w) { w.bytes(info.data(), info.size()); });
  });
}

const char* wf_version(void) { return TORCH_VERSION; }
int32_t wf_cpu_fusion(void) { return torch::jit::canFuseOnCPU() ? 1 : 0; }

int32_t wf_version_major(void) { return TORCH_VERSION_MAJOR; }
int32_t wf_version_minor(void) { return TORCH_VERSION_MINOR; }
int32_t wf_version_patch(void) { return TORCH_VERSION_PATCH; }

void wf_autocast_probe(int32_t dtype, int32_t state[4]) {
  {
    AutocastScope scope(dtype);
    state[0] = cuda_autocast_enabled() ? 1 : 0;
    state[1] = dtype_code(cuda_autocast_dtype());
  }
  state[2] = cuda_autocast_enabled() ? 1 : 0;
  state[3] = dtype_code(cuda_autocast_dtype());
}

wf_module* wf_load(const char* path, int64_t path_len, const char* device, int64_t device_len, int32_t dtype,
                   char* out, int64_t cap, wf_result* res) {
  wf_module* result = nullptr;
  guarded(out, cap, res, [&] {
    auto h = std::make_unique<wf_module>();
    h->device = parse_device(std::string(device, device_len));
    if (dtype != 0) {
      at::ScalarType st;
      if (!dtype_from_code(dtype, &st)) throw BadInput("unknown dtype code " + std::to_string(dtype));
      if (!at::isFloatingType(st)) throw BadInput(std::string("load dtype must be floating, not ") + c10::toString(st));
      h->dtype = st;
    }
    h->module = torch::jit::load(std::string(path, path_len), h->device);
    h->module.eval();
    if (h->dtype) {
      torch::NoGradGuard no_grad;
      // Only floating parameters and buffers change dtype; integer and bool
      // buffers (indices, counters, masks) keep theirs.
      for (const auto& p : h->module.named_parameters(true)) {
        if (at::isFloatingType(p.value.scalar_type())) p.value.set_data(p.value.to(*h->dtype));
      }
      for (const auto& b : h->module.named_buffers(true)) {
        if (at::isFloatingType(b.value.scalar_type())) b.value.set_data(b.value.to(*h->dtype));
      }
    }
    index_methods(h.get());
    emit(out, cap, res, WF_OK, [&](Writer& w) { write_info(w, h.get()); });
    result = h.release();
  });
  return result;
}

void wf_call(wf_module* m, const char* method, int64_t method_len, const char* args, int64_t args_len,
             void* const* ptrs, int64_t nptrs, void* only_ptr, int32_t autocast_dtype, char* out, int64_t cap,
             wf_result* res) {
  guarded(out, cap, res, [&] {
    if (ptrs == nullptr && nptrs == 1) ptrs = &only_ptr;
    std::string name(method, method_len);
    const MethodEntry& e = find_method(m, name);
    Inputs in{ptrs, nptrs, m->device, m->dtype};
    c10::InferenceMode guard;
    c10::OptionalDeviceGuard device_guard;
    if (!m->device.is_cpu()) device_guard.reset_device(m->device);
    AutocastScope autocast(m->device.is_cuda() ? autocast_dtype : 0);
    std::vector<c10::IValue> stack = build_stack(e, name, args, args_len, in);
    torch::jit::Method call(m->module._ivalue(), e.fn);
    c10::IValue result = call(std::move(stack));
    emit(out, cap, res, WF_OK, [&](Writer& w) { write_value(w, result, 0); });
  });
}

#ifdef WF_BENCH
int64_t wf_bench_raw(wf_module* m, const char* method, int64_t method_len, const char* args, int64_t args_len,
                     void* const* ptrs, int64_t nptrs, int64_t n, char* out, int64_t cap, wf_result* res) {
  int64_t elapsed = -1;
  guarded(out, cap, res, [&] {
    std::string name(method, method_len);
    const MethodEntry& e = find_method(m, name);
    Inputs in{ptrs, nptrs, m->device, m->dtype};
    std::vector<c10::IValue> proto;
    {
      c10::InferenceMode guard;
      proto = build_stack(e, name, args, args_len, in);
    }
    // Tensor arguments are rebuilt from the caller's host buffers each
    // iteration, as a C++ program feeding fresh host data would.
    struct HostArg {
      size_t pos;
      const void* src;
      std::vector<int64_t> dims;
      at::ScalarType st;
      size_t nbytes;
    };
    std::vector<HostArg> host;
    {
      Reader r{args, static_cast<size_t>(args_len)};
      uint64_t nkw = r.get<uint64_t>();
      for (uint64_t k = 0; k < nkw; k++) {
        std::string an = r.str();
        size_t i = 0;
        while (i < e.names.size() && e.names[i] != an) i++;
        uint8_t tag = r.get<uint8_t>();
        if (tag != kTensor) throw BadInput("wf_bench_raw takes tensor arguments only");
        HostArg a;
        a.pos = i;
        dtype_from_code(r.get<uint8_t>(), &a.st);
        uint32_t nd = r.get<uint32_t>();
        a.dims.resize(nd);
        for (auto& d : a.dims) d = r.get<int64_t>();
        a.src = ptrs[r.get<uint32_t>()];
        a.nbytes = r.get<uint64_t>();
        host.push_back(std::move(a));
      }
    }
    auto start = std::chrono::steady_clock::now();
    for (int64_t it = 0; it < n; it++) {
      c10::InferenceMode guard;
      std::vector<c10::IValue> stack = proto;
      for (const auto& a : host) {
        at::Tensor t(at::detail::empty_cpu(a.dims, a.st));
        std::memcpy(t.data_ptr(), a.src, a.nbytes);
        stack[a.pos] = std::move(t);
      }
      torch::jit::Method call(m->module._ivalue(), e.fn);
      c10::IValue result = call(std::move(stack));
      // Copy every output tensor into the host buffer.
      size_t off = 0;
      std::vector<c10::IValue> todo{result};
      while (!todo.empty()) {
        c10::IValue v = std::move(todo.back());
        todo.pop_back();
        if (v.isTensor()) {
          at::Tensor t = v.toTensor().contiguous();
          size_t nb = t.numel() * t.element_size();
          if (off + nb > static_cast<size_t>(cap)) throw BadInput("wf_bench_raw: output buffer too small");
          std::memcpy(out + off, t.data_ptr(), nb);
          off += nb;
        } else if (v.isTuple()) {
          for (const auto& x : v.toTupleRef().elements()) todo.push_back(x);
        } else if (v.isList()) {
          for (const auto& x : v.toListRef()) todo.push_back(x);
        } else if (v.isGenericDict()) {
          for (const auto& x : v.toGenericDict()) todo.push_back(x.value());
        }
      }
    }
    elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  });
  return elapsed;
}

int64_t wf_bench_call(wf_module* m, const char* method, int64_t method_len, const char* args, int64_t args_len,
                      void* const* ptrs, int64_t nptrs, int64_t n, char* out, int64_t cap, wf_result* res) {
  auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; i++) {
    wf_call(m, method, method_len, args, args_len, ptrs, nptrs, nullptr, 0, out, cap, res);
    if (res->status != WF_OK) return -1;
    if (res->overflow) {
      std::free(res->overflow);
      res->overflow = nullptr;
    }
  }
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
}
#endif  // WF_BENCH

void wf_close(wf_module* m) {
  try {
    delete m;
  } catch (...) {
  }
}

void wf_free(void* p) { std::free(p); }

wf_module* wf_compile(wf_module* m, int32_t level, char* out, int64_t cap, wf_result* res) {
  wf_module* result = nullptr;
  guarded(out, cap, res, [&] {
    if (!m->module.find_method("forward")) throw BadInput("freezing needs a forward method");
    if (level < 0 || level > 2) throw BadInput("unknown compile level " + std::to_string(level));
    std::vector<std::string> others;
    for (const auto& meth : m->module.get_methods()) {
      if (meth.name() != "forward") others.push_back(meth.name());
    }
    auto h = std::make_unique<wf_module>();
    h->device = m->device;
    h->dtype = m->dtype;
    // freeze inlines parameters and attributes as constants and runs the
    // frozen-graph optimisations (conv/batch-norm folding, ...) on forward.
    h->module = torch::jit::freeze(m->module, others, /*optimize_numerics=*/true);
    if (level == 1) {
      // optimize_for_inference without its MKLDNN layout conversion, which
      // gives wrong results for some models on libtorch 1.13 (e.g.
      // torchvision's mobilenet_v3_small: relative error 0.26).
      for (const auto& meth : h->module.get_methods()) {
        auto graph = meth.graph();
        torch::jit::FuseFrozenConvAddRelu(graph);
        torch::jit::FrozenLinearTranspose(graph);
      }
    }
    if (!h->module.hasattr(kCompiledAttr)) h->module.register_attribute(kCompiledAttr, c10::BoolType::get(), true);
    index_methods(h.get());
    emit(out, cap, res, WF_OK, [&](Writer& w) { write_info(w, h.get()); });
    result = h.release();
  });
  return result;
}

void wf_save(wf_module* m, const char* path, int64_t path_len, char* out, int64_t cap, wf_result* res) {
  guarded(out, cap, res, [&] { m->module.save(std::string(path, path_len)); });
}

void wf_define(const char* source, int64_t source_len, const char* tensors, int64_t tensors_len,
               void* const* ptrs, int64_t nptrs, const char* path, int64_t path_len, char* out, int64_t cap,
               wf_result* res) {
  guarded(out, cap, res, [&] {
    torch::jit::Module mod("Module");
    Reader r{tensors, static_cast<size_t>(tensors_len)};
    Inputs in{ptrs, nptrs, c10::Device(c10::kCPU), c10::nullopt};
    uint64_t n = r.get<uint64_t>();
    for (uint64_t i = 0; i < n; i++) {
      uint8_t kind = r.get<uint8_t>();
      std::string name = r.str();
      if (r.get<uint8_t>() != kTensor) throw BadInput("define: '" + name + "' is not a tensor");
      at::Tensor t = read_tensor(r, in);
      if (kind == 0) {
        mod.register_parameter(name, t, /*is_buffer=*/false);
      } else {
        mod.register_buffer(name, t);
      }
    }
    mod.define(std::string(source, source_len));
    mod.eval();
    mod.save(std::string(path, path_len));
  });
}

void wf_flags_get(wf_flags* f) {
  auto& ctx = at::globalContext();
  switch (ctx.float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST: f->matmul_precision = 0; break;
    case at::Float32MatmulPrecision::HIGH: f->matmul_precision = 1; break;
    case at::Float32MatmulPrecision::MEDIUM: f->matmul_precision = 2; break;
  }
  f->allow_tf32_cublas = ctx.allowTF32CuBLAS();
  f->allow_tf32_cudnn = ctx.allowTF32CuDNN();
  f->flash_sdp = ctx.userEnabledFlashSDP();
  f->math_sdp = ctx.userEnabledMathSDP();
  f->deterministic = ctx.deterministicAlgorithms();
  f->deterministic_warn_only = ctx.deterministicAlgorithmsWarnOnly();
  f->deterministic_cudnn = ctx.deterministicCuDNN();
  f->benchmark_cudnn = ctx.benchmarkCuDNN();
}

void wf_flags_set(const wf_flags* f, char* out, int64_t cap, wf_result* res) {
  guarded(out, cap, res, [&] {
    auto& ctx = at::globalContext();
    switch (f->matmul_precision) {
      case 0: ctx.setFloat32MatmulPrecision(at::Float32MatmulPrecision::HIGHEST); break;
      case 1: ctx.setFloat32MatmulPrecision(at::Float32MatmulPrecision::HIGH); break;
      case 2: ctx.setFloat32MatmulPrecision(at::Float32MatmulPrecision::MEDIUM); break;
      default: throw BadInput("unknown matmul precision code " + std::to_string(f->matmul_precision));
    }
    ctx.setAllowTF32CuDNN(f->allow_tf32_cudnn != 0);
    ctx.setSDPUseFlash(f->flash_sdp != 0);
    ctx.setSDPUseMath(f->math_sdp != 0);
    ctx.setDeterministicAlgorithms(f->deterministic != 0, f->deterministic_warn_only != 0);
    ctx.setDeterministicCuDNN(f->deterministic_cudnn != 0);
    ctx.setBenchmarkCuDNN(f->benchmark_cudnn != 0);
  });
}

int32_t wf_cuda_available(void) {
  try {
    return at::detail::getCUDAHooks().hasCUDA() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

int32_t wf_cuda_device_count(void) {
  try {
    const auto& hooks = at::detail::getCUDAHooks();
    return hooks.hasCUDA() ? hooks.getNumGPUs() : 0;
  } catch (...) {
    return 0;
  }
}

int64_t wf_cuda_current_device(char* out, int64_t cap, wf_result* res) {
  int64_t idx = -1;
  guarded(out, cap, res, [&] { idx = at::detail::getCUDAHooks().current_device(); });
  return idx;
}

}  // extern "C"

// ---------------------------------------------------------------- CUDA runtime by symbol lookup

struct wf_cudart {
  void* lib = nullptr;
  int (*getDeviceCount)(int*) = nullptr;
  int (*getDevice)(int*) = nullptr;
  int (*setDevice)(int) = nullptr;
  int (*deviceGetAttribute)(int*, int, int) = nullptr;
  int (*memGetInfo)(size_t*, size_t*) = nullptr;
  int (*getDeviceProperties)(void*, int) = nullptr;
  int (*deviceSynchronize)() = nullptr;
  const char* (*getErrorString)(int) = nullptr;
  // libtorch < 2: the free function c10::cuda::CUDACachingAllocator::emptyCache.
  void (*emptyCache)() = nullptr;
  // libtorch 2: the allocator object and the vtable slot of its emptyCache.
  void* const* allocator = nullptr;
  int64_t emptyCacheSlot = -1;
};

namespace {

template <typename T>
void resolve(void* lib, const char* name, T* fn) {
  void* p = dlsym(lib, name);
  *fn = reinterpret_cast<T>(p);
}

// Looks name up in lib, then in the whole process.
void* lookup(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  return p ? p : dlsym(RTLD_DEFAULT, name);
}

// resolve_empty_cache finds how to empty the CUDA caching allocator's cache.
// Up to libtorch 1.x, c10::cuda::CUDACachingAllocator::emptyCache() is an
// exported function in libc10_cuda. In 2.x it is an inline call of the
// virtual CUDAAllocator::emptyCache on the object that
// c10::cuda::CUDACachingAllocator::allocator (an exported
// std::atomic<CUDAAllocator*>) points to, and neither CUDAAllocator's nor the
// built-in allocators' vtables are exported. The slot is found instead in
// the exported vtable of torch::cuda::CUDAPluggableAllocator, a
// CUDAAllocator (single inheritance, so the same slot numbers) whose
// emptyCache override is exported too: the slot holding that function's
// address is emptyCache's slot in every CUDAAllocator. Calling that slot on
// the allocator object is the virtual call the inline function makes.
void resolve_empty_cache(wf_cudart* c, void* lib) {
  resolve(lib, "_ZN3c104cuda20CUDACachingAllocator10emptyCacheEv", &c->emptyCache);
  if (!c->emptyCache) resolve(RTLD_DEFAULT, "_ZN3c104cuda20CUDACachingAllocator10emptyCacheEv", &c->emptyCache);
  if (c->emptyCache) return;
  void* alloc = lookup(lib, "_ZN3c104cuda20CUDACachingAllocator9allocatorE");
  void* vtable = lookup(lib, "_ZTVN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocatorE");
  void* impl = lookup(lib, "_ZN5torch4cuda22CUDAPluggableAllocator22CUDAPluggableAllocator10emptyCacheEv");
  if (!alloc || !vtable || !impl) return;
  Dl_info info;
  void* extra = nullptr;
  if (!dladdr1(vtable, &info, &extra, RTLD_DL_SYMENT) || !extra) return;
  const auto* sym = static_cast<const ElfW(Sym)*>(extra);
  if (sym->st_size == 0) return;
  // A vtable symbol starts with the offset to top and the typeinfo pointer;
  // the virtual function pointers follow.
  auto entries = static_cast<void* const*>(vtable);
  size_t n = sym->st_size / sizeof(void*);
  for (size_t i = 2; i < n; i++) {
    if (entries[i] == impl) {
      c->allocator = static_cast<void* const*>(alloc);
      c->emptyCacheSlot = static_cast<int64_t>(i - 2);
      return;
    }
  }
}

bool resolve_all(wf_cudart* c, void* lib) {
  resolve(lib, "cudaGetDeviceCount", &c->getDeviceCount);
  resolve(lib, "cudaGetDevice", &c->getDevice);
  resolve(lib, "cudaSetDevice", &c->setDevice);
  resolve(lib, "cudaDeviceGetAttribute", &c->deviceGetAttribute);
  resolve(lib, "cudaMemGetInfo", &c->memGetInfo);
  resolve(lib, "cudaGetDeviceProperties", &c->getDeviceProperties);
  resolve(lib, "cudaDeviceSynchronize", &c->deviceSynchronize);
  resolve(lib, "cudaGetErrorString", &c->getErrorString);
  resolve_empty_cache(c, lib);
  return c->getDeviceCount && c->getDevice && c->setDevice && c->deviceGetAttribute && c->memGetInfo &&
         c->deviceSynchronize;
}

// cudaErrorMemoryAllocation: the one CUDA error that is an out-of-memory.
constexpr int kCudaOOM = 2;

// cuda_fail sets res to the failure of a CUDA runtime call (WF_OOM for an
// allocation failure, WF_ERROR otherwise) and returns the CUDA code.
int32_t cuda_fail(wf_cudart* c, int code, const char* what, char* out, int64_t cap, wf_result* res) {
  std::string msg = std::string(what) + " failed with CUDA error " + std::to_string(code);
  if (c->getErrorString) {
    const char* s = c->getErrorString(code);
    if (s) msg += std::string(": ") + s;
  }
  emit_message(out, cap, res, code == kCudaOOM ? WF_OOM : WF_ERROR, msg.c_str());
  return code;
}

// ok sets res to success without a payload.
void ok(wf_result* res) {
  res->status = WF_OK;
  res->size = 0;
  res->overflow = nullptr;
}

// Runs f with `index` as the current device and restores the previous one.
template <typename F>
int32_t on_device(wf_cudart* c, int32_t index, char* out, int64_t cap, wf_result* res, F f) {
  int prev = 0;
  int rc = c->getDevice(&prev);
  if (rc != 0) return cuda_fail(c, rc, "cudaGetDevice", out, cap, res);
  if (prev != index && (rc = c->setDevice(index)) != 0) return cuda_fail(c, rc, "cudaSetDevice", out, cap, res);
  int32_t r = f();
  if (prev != index) c->setDevice(prev);
  return r;
}

}  // namespace

extern "C" {

wf_cudart* wf_cudart_open(const char* path, int64_t path_len, char* out, int64_t cap, wf_result* res) {
  ok(res);
  auto fail = [&](const std::string& msg) { emit_message(out, cap, res, WF_ERROR, msg.c_str()); };
  auto c = new (std::nothrow) wf_cudart();
  if (!c) {
    emit_message(out, cap, res, WF_OOM, "out of memory");
    return nullptr;
  }
  std::string p(path, path_len);
  std::string tried;
  if (!p.empty()) {
    void* lib = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      fail(std::string("dlopen ") + p + ": " + (e ? e : "failed"));
      delete c;
      return nullptr;
    }
    c->lib = lib;
    if (resolve_all(c, lib)) return c;
    fail(p + " lacks the CUDA runtime API (cudaGetDeviceCount, cudaMemGetInfo, ...)");
    dlclose(lib);
    delete c;
    return nullptr;
  }
  if (resolve_all(c, RTLD_DEFAULT)) return c;
  for (const char* name : {"libcudart.so", "libcudart.so.12", "libcudart.so.11.0"}) {
    void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      tried += std::string(tried.empty() ? "" : ", ") + name;
      continue;
    }
    *c = wf_cudart();
    c->lib = lib;
    if (resolve_all(c, lib)) return c;
    dlclose(lib);
  }
  fail("CUDA runtime not found in the process nor as " + tried);
  delete c;
  return nullptr;
}

void wf_cudart_device_count(wf_cudart* c, int32_t* count, char* out, int64_t cap, wf_result* res) {
  ok(res);
  int n = 0;
  int rc = c->getDeviceCount(&n);
  if (rc != 0) {
    cuda_fail(c, rc, "cudaGetDeviceCount", out, cap, res);
    return;
  }
  *count = n;
}

void wf_cudart_current_device(wf_cudart* c, int32_t* index, char* out, int64_t cap, wf_result* res) {
  ok(res);
  int i = 0;
  int rc = c->getDevice(&i);
  if (rc != 0) {
    cuda_fail(c, rc, "cudaGetDevice", out, cap, res);
    return;
  }
  *index = i;
}

void wf_cudart_device(wf_cudart* c, int32_t index, wf_device_info* info, char* out, int64_t cap, wf_result* res) {
  ok(res);
  std::memset(info, 0, sizeof(*info));
  // cudaDevAttrComputeCapabilityMajor = 75, Minor = 76.
  int rc = c->deviceGetAttribute(&info->major, 75, index);
  if (rc != 0) {
    cuda_fail(c, rc, "cudaDeviceGetAttribute(major)", out, cap, res);
    return;
  }
  rc = c->deviceGetAttribute(&info->minor, 76, index);
  if (rc != 0) {
    cuda_fail(c, rc, "cudaDeviceGetAttribute(minor)", out, cap, res);
    return;
  }
  if (c->getDeviceProperties) {
    // cudaDeviceProp starts with `char name[256]` in every CUDA version; the
    // buffer is larger than any version's struct.
    std::vector<char> props(16384, 0);
    if (c->getDeviceProperties(props.data(), index) == 0) {
      std::memcpy(info->name, props.data(), sizeof(info->name) - 1);
    }
  }
  on_device(c, index, out, cap, res, [&]() -> int32_t {
    size_t free_b = 0, total_b = 0;
    int r = c->memGetInfo(&free_b, &total_b);
    if (r != 0) return cuda_fail(c, r, "cudaMemGetInfo", out, cap, res);
    info->free_bytes = free_b;
    info->total_bytes = total_b;
    return 0;
  });
}

void wf_cudart_synchronize(wf_cudart* c, int32_t index, char* out, int64_t cap, wf_result* res) {
  ok(res);
  on_device(c, index, out, cap, res, [&]() -> int32_t {
    int r = c->deviceSynchronize();
    if (r != 0) return cuda_fail(c, r, "cudaDeviceSynchronize", out, cap, res);
    return 0;
  });
}

void wf_cudart_empty_cache(wf_cudart* c, int32_t* called, char* out, int64_t cap, wf_result* res) {
  *called = 0;
  guarded(out, cap, res, [&] {
    if (c->emptyCache) {
      c->emptyCache();
      *called = 1;
      return;
    }
    if (c->emptyCacheSlot < 0) return;
    // std::atomic<CUDAAllocator*> is a plain pointer; an x86-64 or arm64
    // aligned pointer load is atomic.
    void* obj = __atomic_load_n(const_cast<void**>(c->allocator), __ATOMIC_ACQUIRE);
    if (!obj) throw std::runtime_error("c10::cuda::CUDACachingAllocator::allocator is not set");
    auto vptr = *static_cast<void* const* const*>(obj);
    reinterpret_cast<void (*)(void*)>(vptr[c->emptyCacheSlot])(obj);
    *called = 1;
  });
}

}  // extern "C"

// ---------------------------------------------------------------- for the shim's other C++ files (hook.h)

namespace wf_shim {

void guarded(char* out, int64_t cap, wf_result* res, const std::function<void()>& body) noexcept {
  ::guarded(out, cap, res, body);
}

std::vector<at::Tensor> read_tensor_list(const char* args, int64_t args_len, const char* name, void* const* ptrs,
                                         int64_t nptrs, c10::Device device) {
  Reader r{args, static_cast<size_t>(args_len)};
  Inputs in{ptrs, nptrs, device, c10::nullopt};
  if (r.get<uint64_t>() != 1 || r.str() != name) throw BadInput(std::string("malformed call: want one argument, ") + name);
  c10::IValue v = read_value(r, c10::ListType::ofTensors(), in, 0);
  if (r.off != r.n) throw BadInput("malformed value blob: trailing bytes");
  return v.toTensorVector();
}

void emit_value(char* out, int64_t cap, wf_result* res, const c10::IValue& v) {
  emit(out, cap, res, WF_OK, [&](Writer& w) { write_value(w, v, 0); });
}

bool dtype_from_code(int32_t code, at::ScalarType* st) { return ::dtype_from_code(code, st); }

}  // namespace wf_shim
