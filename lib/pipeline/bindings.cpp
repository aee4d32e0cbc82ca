// Resolving and checking --dim, --shape and --variant against the models of a run.
#include "pipeline/bindings.h"

#include "cli/cli_util.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

namespace ctxkit::pipeline {

namespace {

// "STEM:rest" when STEM is a model of the run (input names may contain ':' themselves), else nothing.
const BindingModel* stemPrefix(const std::string& text, const std::vector<BindingModel>& models, std::string& rest) {
  const auto colon = text.find(':');
  const auto eq = text.find('=');
  if (colon == std::string::npos || (eq != std::string::npos && eq < colon)) return nullptr;
  const std::string stem = text.substr(0, colon);
  for (const auto& m : models)
    if (m.stem == stem) {
      rest = text.substr(colon + 1);
      return &m;
    }
  return nullptr;
}

const ir::ValueInfo* findInput(const BindingModel& m, const std::string& name) {
  for (const auto& in : *m.inputs)
    if (in.name == name) return &in;
  return nullptr;
}

bool hasSymbol(const BindingModel& m, const std::string& symbol) {
  for (const auto& in : *m.inputs)
    if (in.shape)
      for (const auto& d : *in.shape)
        if (!d.isKnown() && d.symbol == symbol) return true;
  return false;
}

std::string declaredText(const ir::ValueInfo& in) { return in.shape ? ir::dimsToString(in.shape) : "(no shape)"; }

// What the models offer, for "matches nothing" errors.
std::string inventory(const std::vector<BindingModel>& models) {
  std::vector<std::string> parts;
  for (const auto& m : models) {
    std::vector<std::string> inputs;
    for (const auto& in : *m.inputs) inputs.push_back(fmt::format("{} {}", in.name, declaredText(in)));
    parts.push_back(fmt::format("{}: {}", m.stem, fmt::join(inputs, ", ")));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

// A shape for `in` of model `m`: the right rank and every static dimension kept.
Status checkShape(const BindingModel& m, const ir::ValueInfo& in, const ir::Shape& given, const std::string& arg) {
  if (!in.shape) return Status::ok();
  if (in.shape->size() != given.size())
    return makeError(ErrorCode::InvalidArgument,
                     "{}: model '{}' input '{}' is declared {} (rank {}) but the shape given is {} (rank {})", arg,
                     m.stem, in.name, declaredText(in), in.shape->size(), ir::shapeToString(given), given.size());
  for (size_t d = 0; d < given.size(); ++d)
    if ((*in.shape)[d].isKnown() && (*in.shape)[d].value != given[d])
      return makeError(ErrorCode::InvalidArgument,
                       "{}: model '{}' input '{}' is declared {}, whose dimension {} is {}, but the shape given is {}",
                       arg, m.stem, in.name, declaredText(in), d, (*in.shape)[d].value, ir::shapeToString(given));
  return Status::ok();
}

// Applies one NAME=VALUE (dim or shape) to `out` for model `m` when it concerns it. Returns whether it matched.
Expected<bool> apply(const BindingModel& m, const std::string& key, const std::string& value, bool asShape,
                     const std::string& arg, analysis::Bindings& out) {
  if (asShape) {
    const ir::ValueInfo* in = findInput(m, key);
    if (!in) return false;
    ir::ShapeBindings parsed;
    CTX_RETURN_IF_ERROR(cli::parseShapeBinding(key + "=" + value, parsed).addContext(arg));
    CTX_RETURN_IF_ERROR(checkShape(m, *in, parsed.shapes.begin()->second, arg));
    out.shapes[key] = parsed.shapes.begin()->second;
    return true;
  }
  if (!hasSymbol(m, key)) return false;
  ir::ShapeBindings parsed;
  CTX_RETURN_IF_ERROR(cli::parseDimBinding(key + "=" + value, parsed).addContext(arg));
  out.dims[key] = parsed.dims.begin()->second;
  return true;
}

struct Split {
  const BindingModel* only = nullptr;  // STEM: prefix
  std::string key, value;
};

Expected<Split> splitArg(const std::string& text, const std::vector<BindingModel>& models, const char* option) {
  Split s;
  std::string rest = text;
  s.only = stemPrefix(text, models, rest);
  const auto eq = rest.rfind('=');
  if (eq == std::string::npos || eq == 0)
    return makeError(ErrorCode::InvalidArgument, "{} '{}': expected [STEM:]NAME=VALUE", option, text);
  s.key = rest.substr(0, eq);
  s.value = rest.substr(eq + 1);
  return s;
}

}  // namespace

Expected<std::vector<VariantSpec>> parseVariants(const std::vector<std::string>& args) {
  std::vector<VariantSpec> out;
  std::set<std::string> names;
  for (const auto& arg : args) {
    VariantSpec v;
    v.text = arg;
    std::string body = arg;
    const auto colon = arg.find(':'), eq = arg.find('=');
    if (colon != std::string::npos && (eq == std::string::npos || colon < eq)) {
      v.name = arg.substr(0, colon);
      body = arg.substr(colon + 1);
    }
    std::string autoName;
    size_t start = 0;
    while (start <= body.size()) {
      const auto comma = body.find(',', start);
      const std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      const auto e = item.rfind('=');
      if (e == std::string::npos || e == 0 || e + 1 == item.size())
        return makeError(ErrorCode::InvalidArgument, "--variant '{}': item '{}' is not NAME=VALUE", arg, item);
      v.items.emplace_back(item.substr(0, e), item.substr(e + 1));
      autoName += (autoName.empty() ? "" : "_") + item.substr(0, e) + item.substr(e + 1);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (v.name.empty()) v.name = autoName;
    for (char& c : v.name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
        if (colon != std::string::npos && colon < eq)
          return makeError(ErrorCode::InvalidArgument,
                           "--variant '{}': name '{}' may hold letters, digits, '-' and '_' only", arg, v.name);
        c = '_';
      }
    if (!names.insert(v.name).second)
      return makeError(ErrorCode::InvalidArgument, "--variant '{}': a variant named '{}' is given twice", arg, v.name);
    out.push_back(std::move(v));
  }
  return out;
}

Expected<analysis::Bindings> bindingsFor(const BindingModel& model, const std::vector<BindingModel>& all,
                                         const std::vector<std::string>& dims, const std::vector<std::string>& shapes,
                                         const VariantSpec* variant) {
  analysis::Bindings out;
  // Which argument bound each symbol or input, and how specific it is: 0 run-wide, 1 STEM:, 2 a variant. A model's
  // own binding refines a run-wide one; two bindings of one level, or a variant against any other, that give
  // different values contradict each other.
  struct Source {
    std::string arg;
    int level = 0;
  };
  std::map<std::pair<bool, std::string>, Source> sources;
  auto bind = [&](int level, const std::string& key, const std::string& value, bool asShape,
                  const std::string& arg) -> Status {
    analysis::Bindings one;
    CTX_ASSIGN_OR_RETURN(bool hit, apply(model, key, value, asShape, arg, one));
    if (!hit) return Status::ok();
    const bool differs = asShape ? out.shapes.count(key) && out.shapes[key] != one.shapes[key]
                                 : out.dims.count(key) && out.dims[key] != one.dims[key];
    auto [it, fresh] = sources.try_emplace({asShape, key}, Source{arg, level});
    if (!fresh && differs && (it->second.level == level || level == 2))
      return makeError(ErrorCode::InvalidArgument, "{} contradicts {}: both bind {} '{}' of model '{}'{}", arg,
                       it->second.arg, asShape ? "input" : "symbolic dimension", key, model.stem,
                       level == 2 ? " (--dim and --shape hold for every variant: give the variant the same value, or "
                                    "bind it in the variants only)"
                                  : "");
    it->second = Source{arg, level};
    if (asShape) out.shapes[key] = one.shapes[key];
    else out.dims[key] = one.dims[key];
    return Status::ok();
  };
  for (int pass = 0; pass < 2; ++pass)  // run-wide first, then the model's own
    for (bool asShape : {false, true})
      for (const auto& arg : asShape ? shapes : dims) {
        CTX_ASSIGN_OR_RETURN(Split s, splitArg(arg, all, asShape ? "--shape" : "--dim"));
        if ((pass == 0) != (s.only == nullptr) || (s.only && s.only->stem != model.stem)) continue;
        CTX_RETURN_IF_ERROR(
            bind(pass, s.key, s.value, asShape, fmt::format("--{} '{}'", asShape ? "shape" : "dim", arg)));
      }
  if (variant)
    for (const auto& [key, value] : variant->items)
      CTX_RETURN_IF_ERROR(
          bind(2, key, value, findInput(model, key) != nullptr, fmt::format("--variant '{}'", variant->text)));
  // A shape for an input must also agree with the symbols bound for its dimensions.
  for (const auto& [name, shape] : out.shapes) {
    const ir::ValueInfo* in = findInput(model, name);
    for (size_t d = 0; in && in->shape && d < in->shape->size() && d < shape.size(); ++d) {
      const ir::Dim& dim = (*in->shape)[d];
      auto bound = dim.symbol.empty() || dim.isKnown() ? out.dims.end() : out.dims.find(dim.symbol);
      if (bound != out.dims.end() && bound->second != shape[d])
        return makeError(
            ErrorCode::InvalidArgument,
            "{} contradicts {}: input '{}' of model '{}' is declared {}, and one gives '{}' {}, the other {}",
            sources[{true, name}].arg, sources[{false, dim.symbol}].arg, name, model.stem, declaredText(*in),
            dim.symbol, shape[d], bound->second);
    }
  }
  return out;
}

Status checkBindings(const std::vector<BindingModel>& models, const std::vector<std::string>& dims,
                     const std::vector<std::string>& shapes, const std::vector<VariantSpec>& variants) {
  for (bool asShape : {false, true})
    for (const auto& arg : asShape ? shapes : dims) {
      const char* option = asShape ? "--shape" : "--dim";
      CTX_ASSIGN_OR_RETURN(Split s, splitArg(arg, models, option));
      bool matched = false;
      for (const auto& m : models) {
        if (s.only && s.only->stem != m.stem) continue;
        analysis::Bindings scratch;
        CTX_ASSIGN_OR_RETURN(bool hit, apply(m, s.key, s.value, asShape, fmt::format("{} '{}'", option, arg), scratch));
        matched = matched || hit;
      }
      if (!matched) {
        // "x:seq=4" where x is no model of the run reads as a symbol named "x:seq": say what was probably meant.
        const auto colon = s.key.find(':');
        const std::string hint =
            !s.only && colon != std::string::npos
                ? fmt::format("; '{}' is not the stem of a model of this run", s.key.substr(0, colon))
                : "";
        return makeError(ErrorCode::InvalidArgument, "{} '{}': no {} '{}' in {} (inputs: {}){}", option, arg,
                         asShape ? "input" : "symbolic dimension", s.key,
                         s.only ? fmt::format("model '{}'", s.only->stem) : std::string("any model"), inventory(models),
                         hint);
      }
    }
  for (const auto& v : variants)
    for (const auto& [key, value] : v.items) {
      bool matched = false;
      for (const auto& m : models) {
        const bool asShape = findInput(m, key) != nullptr;
        analysis::Bindings scratch;
        CTX_ASSIGN_OR_RETURN(bool hit, apply(m, key, value, asShape, fmt::format("--variant '{}'", v.text), scratch));
        matched = matched || hit;
      }
      if (!matched)
        return makeError(ErrorCode::InvalidArgument,
                         "--variant '{}': '{}' is no input or symbolic dimension of any model "
                         "(inputs: {})",
                         v.text, key, inventory(models));
    }
  return Status::ok();
}

Expected<std::vector<BoundInput>> boundInputsFor(const BindingModel& model, const std::vector<BindingModel>& all,
                                                 const std::vector<std::string>& sets,
                                                 const analysis::Bindings& bindings) {
  std::vector<BoundInput> out;
  std::vector<std::pair<std::string, int>> givenBy;  // per entry of out: the argument and its level
  for (int pass = 0; pass < 2; ++pass)               // run-wide first, then the model's own
    for (const auto& arg : sets) {
      std::string rest = arg;
      const BindingModel* only = stemPrefix(arg, all, rest);
      if ((pass == 0) != (only == nullptr) || (only && only->stem != model.stem)) continue;
      CTX_ASSIGN_OR_RETURN(cli::ValueAssignment a, cli::parseValueAssignment(rest));
      const ir::ValueInfo* in = findInput(model, a.name);
      if (!in) continue;
      const std::string what = fmt::format("--set '{}': model '{}' input '{}' (declared {} {})", arg, model.stem,
                                           in->name, ir::elemTypeName(in->type), declaredText(*in));
      std::string blocker;
      auto shape = analysis::bindShape(*in, bindings, &blocker);
      if (!shape) return makeError(ErrorCode::InvalidArgument, "{}: its shape is not static: {}", what, blocker);
      CTX_ASSIGN_OR_RETURN(ir::Tensor value, cli::valueTensor(in->type, *shape, a.values, what));
      const std::string text = rest.substr(rest.find('=') + 1);
      auto same = std::find_if(out.begin(), out.end(), [&](const BoundInput& b) { return b.name == in->name; });
      if (same == out.end()) {
        out.push_back(BoundInput{in->name, std::move(value), text});
        givenBy.push_back({arg, pass});
        continue;
      }
      auto& [earlier, level] = givenBy[static_cast<size_t>(same - out.begin())];
      if (level == pass && same->text != text)
        return makeError(ErrorCode::InvalidArgument,
                         "--set '{}' contradicts --set '{}': both bind input '{}' of model '{}'", arg, earlier,
                         in->name, model.stem);
      *same = BoundInput{in->name, std::move(value), text};  // the model's own binding refines a run-wide one
      givenBy[static_cast<size_t>(same - out.begin())] = {arg, pass};
    }
  return out;
}

Status checkValueBindings(const std::vector<BindingModel>& models, const std::vector<std::string>& sets) {
  for (const auto& arg : sets) {
    std::string rest = arg;
    const BindingModel* only = stemPrefix(arg, models, rest);
    CTX_ASSIGN_OR_RETURN(cli::ValueAssignment a, cli::parseValueAssignment(rest));
    bool matched = false;
    for (const auto& m : models) matched = matched || ((!only || only == &m) && findInput(m, a.name));
    if (!matched)
      return makeError(ErrorCode::InvalidArgument, "--set '{}': no input '{}' in {} (inputs: {})", arg, a.name,
                       only ? fmt::format("model '{}'", only->stem) : std::string("any model"), inventory(models));
  }
  return Status::ok();
}

}  // namespace ctxkit::pipeline
