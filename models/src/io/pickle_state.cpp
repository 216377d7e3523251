#include "tessera/models/pickle_state.h"

#include <set>
#include <sstream>

namespace tessera::models::pickle {

const char* const kWrapperKeys[7] = {"state_dict", "model_state_dict", "model", "module",
                                     "net",        "network",          "network_weights"};

namespace {

template <typename... Args>
[[noreturn]] void fail(const std::string& source, Args&&... args) {
  fail_format(source, ": ", std::forward<Args>(args)...);
}

constexpr int kMaxDepth = 64;

// Walks the tree with a bound on depth and on the total nodes visited: memo
// references can make a small pickle a deep or exponentially shared graph.
class Walker {
 public:
  Walker(const Tree& tree, const std::string& source)
      : tree_(tree), source_(source), budget_(8 * tree.nodes.size() + 1024) {}

  bool has_tensor(std::size_t i, int depth = 0) {
    const Node& n = visit(i, depth);
    if (n.kind == Kind::Tensor) return true;
    if (!container(n.kind)) return false;
    for (std::size_t k = n.kind == Kind::Dict ? 1 : 0; k < n.items.size(); k += n.kind == Kind::Dict ? 2 : 1)
      if (has_tensor(n.items[k], depth + 1)) return true;
    return false;
  }

  void flatten(std::size_t i, const std::string& name, Selection& out, int depth = 0) {
    const Node& n = visit(i, depth);
    if (n.kind == Kind::Tensor) {
      if (!names_.insert(name).second) fail(source_, "two entries are both named '", name, "' once flattened");
      out.tensors.push_back({name, static_cast<std::size_t>(n.i)});
    } else if (container(n.kind) && has_tensor(i, depth)) {
      const bool dict = n.kind == Kind::Dict;
      for (std::size_t k = 0; k < n.items.size(); k += dict ? 2 : 1) {
        const std::string part = dict ? key_text(n.items[k], name) : std::to_string(k);
        flatten(n.items[dict ? k + 1 : k], name.empty() ? part : name + "." + part, out, depth + 1);
      }
    } else {
      out.skipped.push_back((name.empty() ? std::string("(top level)") : name) + " (" + kind_name(n.kind) + ")");
    }
  }

  std::string key_text(std::size_t i, const std::string& where) const {
    const Node& k = tree_.at(i);
    if (k.kind == Kind::String) return k.s;
    if (k.kind == Kind::Int) return std::to_string(k.i);  // e.g. optimizer state {0: {...}}
    fail(source_, "a dict key under '", where, "' is a ", kind_name(k.kind), ", not a string");
  }

 private:
  static bool container(Kind k) { return k == Kind::Dict || k == Kind::List || k == Kind::Tuple; }
  const Node& visit(std::size_t i, int depth) {
    if (depth > kMaxDepth) fail(source_, "data nests deeper than ", kMaxDepth, " levels");
    if (budget_-- == 0) fail(source_, "data shares objects too often to flatten (a hostile pickle?)");
    return tree_.at(i);
  }

  const Tree& tree_;
  const std::string& source_;
  std::size_t budget_;
  std::set<std::string> names_;
};

// The value under `key` in a dict node, or npos.
std::size_t lookup(const Tree& tree, const Node& dict, const std::string& key) {
  for (std::size_t k = 0; k + 1 < dict.items.size(); k += 2) {
    const Node& n = tree.at(dict.items[k]);
    if ((n.kind == Kind::String && n.s == key) || (n.kind == Kind::Int && std::to_string(n.i) == key))
      return dict.items[k + 1];
  }
  return std::string::npos;
}

std::string keys_of(const Tree& tree, const Node& dict, Walker& w) {
  std::ostringstream os;
  for (std::size_t k = 0; k < dict.items.size() && k < 16; k += 2) os << (k ? ", " : "") << w.key_text(dict.items[k], "");
  if (dict.items.size() > 16) os << ", ...";
  return os.str();
}

// Follows a '.'-path; a dict key may itself contain dots, so the longest match wins at each level.
std::size_t follow(const Tree& tree, std::size_t at, const std::string& key, Walker& w, const std::string& source) {
  std::string rest = key, walked;
  while (!rest.empty()) {
    const Node& n = tree.at(at);
    if (n.kind != Kind::Dict) fail(source, "'", walked, "' is a ", kind_name(n.kind), ", not a dict: no key '", key, "'");
    std::size_t found = std::string::npos, used = rest.size();
    for (std::size_t cut = rest.size(); cut != std::string::npos && found == std::string::npos;) {
      found = lookup(tree, n, rest.substr(0, cut));
      used = cut;
      cut = cut == 0 ? std::string::npos : rest.rfind('.', cut - 1);
    }
    if (found == std::string::npos)
      fail(source, "no entry '", rest, "'", walked.empty() ? " at the top level" : " under '" + walked + "'",
           " (keys: ", keys_of(tree, n, w), ")");
    walked += (walked.empty() ? "" : ".") + rest.substr(0, used);
    rest = used < rest.size() ? rest.substr(used + 1) : "";
    at = found;
  }
  return at;
}

}  // namespace

Selection select_tensors(const Tree& tree, const std::string& key, bool unwrap, const std::string& source) {
  Walker w(tree, source);
  const Node& root = tree.at(tree.root);
  if (root.kind == Kind::Tensor) fail(source, "holds a single tensor, not a dict of named tensors");
  if (root.kind != Kind::Dict) fail(source, "top level is a ", kind_name(root.kind), ", not a dict of tensors");
  Selection out;
  std::size_t at = tree.root;
  if (!key.empty()) {
    at = follow(tree, tree.root, key, w, source);
    out.key = key;
  } else if (unwrap) {
    bool flat = false;  // a state dict itself: tensors right at the top
    for (std::size_t k = 1; k < root.items.size() && !flat; k += 2) flat = tree.at(root.items[k]).kind == Kind::Tensor;
    std::vector<std::string> wrappers;
    for (const char* name : kWrapperKeys) {
      const std::size_t v = flat ? std::string::npos : lookup(tree, root, name);
      if (v != std::string::npos && tree.at(v).kind == Kind::Dict && w.has_tensor(v)) wrappers.push_back(name), at = v;
    }
    if (wrappers.size() > 1)
      fail(source, "several entries hold a state dict (", wrappers[0], ", ", wrappers[1],
           "): choose one with a key (tessera convert --key NAME)");
    if (wrappers.empty()) at = tree.root;
    else out.key = wrappers[0], out.from_unwrap = true;
  }
  if (tree.at(at).kind != Kind::Dict) fail(source, "'", key, "' is a ", kind_name(tree.at(at).kind), ", not a dict");
  if (at != tree.root) {  // what else the file holds, one line per top-level entry
    const std::string top = out.key.substr(0, out.key.find('.'));
    for (std::size_t k = 0; k + 1 < root.items.size(); k += 2) {
      const std::string name = w.key_text(root.items[k], "");
      if (name != top) out.skipped.push_back(name + " (" + kind_name(tree.at(root.items[k + 1]).kind) + ")");
    }
  }
  w.flatten(at, "", out);
  if (out.tensors.empty())
    fail(source, key.empty() ? std::string("holds no tensors") : "'" + key + "' holds no tensors",
         out.skipped.empty() ? "" : " (entries: " + out.skipped.front() + (out.skipped.size() > 1 ? ", ...)" : ")"));
  return out;
}

void check_extent(const Tree& tree, const Tensor& t, const std::string& where) {
  const Storage& s = tree.storages.at(t.storage);
  constexpr uint64_t kLimit = uint64_t{1} << 62;
  for (int64_t size : t.sizes)
    if (size == 0) return;  // no elements: nothing to read, any strides will do
  if (t.offset >= kLimit) fail(where, "storage offset overflows");
  uint64_t numel = 1, last = t.offset;
  for (std::size_t d = 0; d < t.sizes.size(); ++d) {
    const auto size = static_cast<uint64_t>(t.sizes[d]), stride = static_cast<uint64_t>(t.strides[d]);
    if (size > kLimit / numel) fail(where, "tensor sizes overflow");
    numel *= size;
    if (stride && size - 1 > (kLimit - last) / stride) fail(where, "tensor strides overflow");
    last += (size - 1) * stride;
  }
  if (last >= s.numel)
    fail(where, "tensor reaches element ", last, " of storage '", s.key, "', which holds ", s.numel,
         " (offset ", t.offset, ")");
}

}  // namespace tessera::models::pickle
