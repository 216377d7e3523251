#include "tessera/models/pickle.h"

#include <cstring>
#include <sstream>
#include <unordered_map>

namespace tessera::models::pickle {
namespace {

using safetensors::DType;

constexpr const char* kRefusal =
    "only tensor state dicts are read and nothing in a file is ever run (if you trust this file, re-save its "
    "tensors in Python: torch.save(model.state_dict(), 'weights.pt'))";

// torch.<Name>Storage in persistent ids -> element type.
constexpr std::pair<const char*, DType> kStorages[] = {
    {"torch.FloatStorage", DType::F32},    {"torch.DoubleStorage", DType::F64}, {"torch.HalfStorage", DType::F16},
    {"torch.BFloat16Storage", DType::BF16}, {"torch.LongStorage", DType::I64},   {"torch.IntStorage", DType::I32},
    {"torch.ShortStorage", DType::I16},    {"torch.CharStorage", DType::I8},    {"torch.ByteStorage", DType::U8},
    {"torch.BoolStorage", DType::BOOL}};

// Values, never called: torch dtypes stored beside the weights (e.g. a config's dtype).
constexpr const char* kDTypeGlobals[] = {"torch.float32", "torch.float64", "torch.float16", "torch.bfloat16",
                                         "torch.int64",   "torch.int32",   "torch.int16",   "torch.int8",
                                         "torch.uint8",   "torch.bool"};

constexpr std::size_t kMaxDims = 64;  // PyTorch's own limit on a tensor's rank

constexpr const char* kOrderedDict = "collections.OrderedDict";
constexpr const char* kRebuildTensor = "torch._utils._rebuild_tensor_v2";
constexpr const char* kRebuildParameter = "torch._utils._rebuild_parameter";
constexpr const char* kRebuildParameterWithState = "torch._utils._rebuild_parameter_with_state";

bool allowed_global(const std::string& name) {
  if (name == kOrderedDict || name == kRebuildTensor || name == kRebuildParameter || name == kRebuildParameterWithState)
    return true;
  for (const auto& [n, t] : kStorages)
    if (name == n) return true;
  for (const char* n : kDTypeGlobals)
    if (name == n) return true;
  return false;
}

std::string shown(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 80)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return s.size() > 80 ? out + "..." : out;
}

class Parser {
 public:
  Parser(const unsigned char* data, std::size_t size, const std::string& source)
      : p_(data), size_(size), source_(source) {}

  Tree run() {
    while (true) {
      op_at_ = pos_;
      if (pos_ == size_) fail("the pickle ends without STOP (truncated?)");
      const unsigned char op = u8();
      if (op == '.') break;  // STOP
      step(op);
    }
    if (stack_.empty()) fail("STOP with an empty stack");
    if (!marks_.empty()) fail("STOP inside an unclosed MARK");
    tree_.root = stack_.back();
    return std::move(tree_);
  }

 private:
  template <typename... Args>
  [[noreturn]] void fail(Args&&... args) const {
    std::ostringstream os;
    os << source_ << ": byte " << op_at_ << ": ";
    (os << ... << args);
    throw FormatError(os.str());
  }

  // ---- input ----
  const unsigned char* take(uint64_t n) {
    if (n > size_ - pos_) fail("a length of ", n, " runs past the end of the ", size_, "-byte pickle (truncated?)");
    const unsigned char* at = p_ + pos_;
    pos_ += static_cast<std::size_t>(n);
    return at;
  }
  uint64_t le(int bytes) {
    const unsigned char* b = take(static_cast<uint64_t>(bytes));
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | b[i];
    return v;
  }
  unsigned char u8() { return static_cast<unsigned char>(le(1)); }
  std::string line() {  // GLOBAL's "module\n" and "name\n"
    const void* nl = std::memchr(p_ + pos_, '\n', size_ - pos_);
    if (!nl) fail("GLOBAL name without a newline (truncated?)");
    const auto n = static_cast<std::size_t>(static_cast<const unsigned char*>(nl) - (p_ + pos_));
    std::string s(reinterpret_cast<const char*>(take(n)), n);
    take(1);
    return s;
  }

  // ---- values ----
  std::size_t push_node(Node n) {
    if (tree_.nodes.size() >= kMaxNodes) fail("more than ", kMaxNodes, " objects");
    tree_.nodes.push_back(std::move(n));
    stack_.push_back(tree_.nodes.size() - 1);
    return tree_.nodes.size() - 1;
  }
  std::size_t push(Kind k) {
    Node n;
    n.kind = k;
    return push_node(std::move(n));
  }
  std::size_t push_int(Kind k, int64_t v) {
    Node n;
    n.kind = k;
    n.i = v;
    return push_node(std::move(n));
  }
  std::size_t push_string(Kind k, std::string s) {
    Node n;
    n.kind = k;
    n.s = std::move(s);
    return push_node(std::move(n));
  }
  Node& node(std::size_t i) { return tree_.nodes[i]; }
  std::size_t pop(const char* op) {
    if (stack_.size() <= floor()) fail(op, " on an empty stack");
    const std::size_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  std::size_t top(const char* op) {
    if (stack_.size() <= floor()) fail(op, " on an empty stack");
    return stack_.back();
  }
  // Items above the innermost MARK (which is removed).
  std::vector<std::size_t> pop_mark(const char* op) {
    if (marks_.empty()) fail(op, " without a MARK");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<std::size_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  // Opcodes must not reach below the innermost MARK.
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }

  std::size_t tuple(std::vector<std::size_t> items) {
    const std::size_t t = push(Kind::Tuple);
    node(t).items = std::move(items);
    return t;
  }
  // Keys are kept as written (a repeated key is the flattener's error, not a quadratic search here).
  void set_items(std::size_t dict, const std::vector<std::size_t>& kv, const char* op) {
    if (node(dict).kind != Kind::Dict) fail(op, " on a ", kind_name(node(dict).kind), ", not a dict");
    if (kv.size() % 2) fail(op, " with an odd number of items");
    auto& items = node(dict).items;
    items.insert(items.end(), kv.begin(), kv.end());
  }
  void append(std::size_t list, const std::vector<std::size_t>& values, const char* op) {
    if (node(list).kind != Kind::List) fail(op, " on a ", kind_name(node(list).kind), ", not a list");
    auto& items = node(list).items;
    items.insert(items.end(), values.begin(), values.end());
  }

  void memo_put(uint64_t index) { memo_[index] = top("PUT"); }
  void memo_get(uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail("GET of memo entry ", index, ", which was never PUT");
    stack_.push_back(it->second);
  }

  void global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    if (!allowed_global(full)) fail("refusing to call ", shown(full), ": ", kRefusal);
    push_string(Kind::Global, full);
  }

  // ---- torch ----
  int64_t as_int(std::size_t i, const char* what) {
    if (node(i).kind != Kind::Int) fail(what, " must be an int, got ", kind_name(node(i).kind));
    return node(i).i;
  }
  std::vector<int64_t> ints(std::size_t i, const char* what) {
    if (node(i).kind != Kind::Tuple && node(i).kind != Kind::List)
      fail(what, " must be a tuple of ints, got ", kind_name(node(i).kind));
    if (node(i).items.size() > kMaxDims) fail(what, " has ", node(i).items.size(), " dimensions (at most ", kMaxDims, ")");
    std::vector<int64_t> out;
    for (std::size_t item : node(i).items) {
      out.push_back(as_int(item, what));
      if (out.back() < 0) fail(what, " has a negative entry ", out.back());
    }
    return out;
  }

  // ('storage', torch.FloatStorage, key, location, numel) -> a Storage.
  void persistent_id() {
    const std::size_t pid = pop("BINPERSID");
    const Node& t = node(pid);
    if (t.kind != Kind::Tuple || t.items.size() != 5 || node(t.items[0]).kind != Kind::String ||
        node(t.items[0]).s != "storage")
      fail("persistent id is not a ('storage', type, key, location, numel) tuple");
    const Node& type = node(t.items[1]);
    Storage s;
    bool known = false;
    for (const auto& [n, dt] : kStorages)
      if (type.kind == Kind::Global && type.s == n) s.dtype = dt, known = true;
    if (!known) fail("persistent id names an unsupported storage type ", shown(type.s));
    if (node(t.items[2]).kind != Kind::String || node(t.items[3]).kind != Kind::String)
      fail("persistent id's storage key and location must be strings");
    s.key = node(t.items[2]).s;
    s.location = node(t.items[3]).s;
    const int64_t numel = as_int(t.items[4], "storage numel");
    if (numel < 0) fail("storage numel is negative (", numel, ")");
    s.numel = static_cast<uint64_t>(numel);
    tree_.storages.push_back(std::move(s));
    push_int(Kind::Storage, static_cast<int64_t>(tree_.storages.size() - 1));
  }

  void reduce() {
    const std::size_t args = pop("REDUCE");
    const std::size_t fn = pop("REDUCE");
    if (node(fn).kind != Kind::Global) fail("REDUCE of a ", kind_name(node(fn).kind), ", not a callable");
    if (node(args).kind != Kind::Tuple) fail("REDUCE with ", kind_name(node(args).kind), " arguments, not a tuple");
    const std::string name = node(fn).s;
    // Copied (pushes may move the nodes), so its size is checked first: a memoised huge tuple costs nothing.
    if (node(args).items.size() > 7) fail(name, " with ", node(args).items.size(), " arguments");
    const std::vector<std::size_t> a = node(args).items;
    if (name == kOrderedDict) {  // OrderedDict(): torch pickles the items with SETITEMS after it
      if (node(args).items.size() != 0) fail("OrderedDict with ", node(args).items.size(), " arguments");
      push(Kind::Dict);
    } else if (name == kRebuildTensor) {
      // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
      if (a.size() != 6 && a.size() != 7) fail(name, " with ", a.size(), " arguments (expected 6 or 7)");
      if (node(a[0]).kind != Kind::Storage) fail(name, ": first argument is a ", kind_name(node(a[0]).kind));
      Tensor t;
      t.storage = static_cast<std::size_t>(node(a[0]).i);
      const int64_t offset = as_int(a[1], "storage offset");
      if (offset < 0) fail("negative storage offset ", offset);
      t.offset = static_cast<uint64_t>(offset);
      t.sizes = ints(a[2], "tensor size");
      t.strides = ints(a[3], "tensor stride");
      if (t.sizes.size() != t.strides.size())
        fail("tensor has ", t.sizes.size(), " sizes but ", t.strides.size(), " strides");
      if (node(a[5]).kind != Kind::Dict || !node(a[5]).items.empty()) fail("tensor with backward hooks");
      tree_.tensors.push_back(std::move(t));
      push_int(Kind::Tensor, static_cast<int64_t>(tree_.tensors.size() - 1));
    } else if (name == kRebuildParameter || name == kRebuildParameterWithState) {
      // (data, requires_grad, backward_hooks[, state]): a Parameter is its tensor here.
      const std::size_t n = name == kRebuildParameter ? 3 : 4;
      if (a.size() != n) fail(name, " with ", a.size(), " arguments (expected ", n, ")");
      if (node(a[0]).kind != Kind::Tensor) fail(name, " of a ", kind_name(node(a[0]).kind), ", not a tensor");
      stack_.push_back(a[0]);
    } else {
      fail("refusing to call ", shown(name), ": ", kRefusal);
    }
  }

  // BUILD sets an object's state: an OrderedDict's __dict__ (state_dict()'s
  // _metadata) or a parameter's extra attributes. Neither is a weight: dropped.
  void build() {
    pop("BUILD");
    const Kind k = node(top("BUILD")).kind;
    if (k != Kind::Dict && k != Kind::Tensor) fail("BUILD on a ", kind_name(k));
  }

  void step(unsigned char op) {
    switch (op) {
      case 0x80: u8(); break;       // PROTO
      case 0x95: le(8); break;      // FRAME: a read-ahead hint
      case '(': marks_.push_back(stack_.size()); break;
      case '}': push(Kind::Dict); break;
      case ']': push(Kind::List); break;
      case ')': tuple({}); break;
      case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
        std::vector<std::size_t> items(op - 0x84);
        for (auto it = items.rbegin(); it != items.rend(); ++it) *it = pop("TUPLEn");
        tuple(std::move(items));
        break;
      }
      case 't': tuple(pop_mark("TUPLE")); break;
      case 's': {  // SETITEM
        const std::size_t v = pop("SETITEM"), k = pop("SETITEM");
        set_items(top("SETITEM"), {k, v}, "SETITEM");
        break;
      }
      case 'u': { const auto kv = pop_mark("SETITEMS"); set_items(top("SETITEMS"), kv, "SETITEMS"); break; }
      case 'a': { const std::size_t v = pop("APPEND"); append(top("APPEND"), {v}, "APPEND"); break; }
      case 'e': { const auto vs = pop_mark("APPENDS"); append(top("APPENDS"), vs, "APPENDS"); break; }
      case 'J': push_int(Kind::Int, static_cast<int32_t>(le(4))); break;  // BININT
      case 'K': push_int(Kind::Int, static_cast<int64_t>(le(1))); break;  // BININT1
      case 'M': push_int(Kind::Int, static_cast<int64_t>(le(2))); break;  // BININT2
      case 0x8a: {  // LONG1: little-endian two's complement of n bytes
        const unsigned n = u8();
        if (n > 8) fail("integer of ", n, " bytes (only 64-bit integers are read)");
        uint64_t v = n ? le(static_cast<int>(n)) : 0;
        if (n && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign-extend
        push_int(Kind::Int, static_cast<int64_t>(v));
        break;
      }
      case 'G': {  // BINFLOAT: big-endian double
        uint64_t bits = 0;
        for (const unsigned char* b = take(8); b != p_ + pos_; ++b) bits = (bits << 8) | *b;
        Node n;
        n.kind = Kind::Float;
        std::memcpy(&n.f, &bits, 8);
        push_node(std::move(n));
        break;
      }
      case 'N': push(Kind::None); break;
      case 0x88: push_int(Kind::Bool, 1); break;  // NEWTRUE
      case 0x89: push_int(Kind::Bool, 0); break;  // NEWFALSE
      case 'X': case 0x8c: case 0x8d: {  // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
        const uint64_t n = le(op == 'X' ? 4 : op == 0x8c ? 1 : 8);
        push_string(Kind::String, std::string(reinterpret_cast<const char*>(take(n)), static_cast<std::size_t>(n)));
        break;
      }
      case 'q': memo_put(le(1)); break;  // BINPUT
      case 'r': memo_put(le(4)); break;  // LONG_BINPUT
      case 0x94: memo_put(memo_.size()); break;  // MEMOIZE
      case 'h': memo_get(le(1)); break;  // BINGET
      case 'j': memo_get(le(4)); break;  // LONG_BINGET
      case '0': pop("POP"); break;
      case '1': pop_mark("POP_MARK"); break;
      case '2': stack_.push_back(top("DUP")); break;
      case 'c': {  // GLOBAL
        const std::string module = line();
        global(module, line());
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        const std::size_t name = pop("STACK_GLOBAL"), module = pop("STACK_GLOBAL");
        if (node(name).kind != Kind::String || node(module).kind != Kind::String)
          fail("STACK_GLOBAL of non-string names");
        global(node(module).s, node(name).s);
        break;
      }
      case 'Q': persistent_id(); break;  // BINPERSID
      case 'R': reduce(); break;
      case 'b': build(); break;
      default: unsupported(op);
    }
  }

  [[noreturn]] void unsupported(unsigned char op) const {
    const char* name = nullptr;
    switch (op) {
      case 'i': name = "INST"; break;
      case 'o': name = "OBJ"; break;
      case 0x81: name = "NEWOBJ"; break;
      case 0x92: name = "NEWOBJ_EX"; break;
      case 0x82: case 0x83: case 0x84: name = "EXT"; break;
      case 'P': name = "PERSID"; break;
      case 'I': case 'L': case 'F': case 'S': case 'V': case 'p': case 'g': name = "a protocol-0 text opcode"; break;
    }
    if (name) fail("refusing opcode ", name, ": ", kRefusal);
    std::ostringstream hex;
    hex << "0x" << std::hex << static_cast<int>(op);
    fail("unsupported pickle opcode ", hex.str(), " (not used by tensor state dicts)");
  }

  const unsigned char* p_;
  std::size_t size_, pos_ = 0, op_at_ = 0;
  const std::string& source_;
  Tree tree_;
  std::vector<std::size_t> stack_, marks_;
  std::unordered_map<uint64_t, std::size_t> memo_;
};

}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
    case Kind::Global: return "global";
    case Kind::Storage: return "storage";
    case Kind::Tensor: return "tensor";
  }
  return "?";
}

Tree parse(const unsigned char* data, std::size_t size, const std::string& source) {
  return Parser(data, size, source).run();
}

}  // namespace tessera::models::pickle
