// Shape bindings of a compile run (docs/compiler.md#bindings): --dim [STEM:]SYM=V, --shape [STEM:]INPUT=AxB and
// --variant [NAME:]SYM=V[,...], resolved against the models' declared inputs and checked: a binding that matches
// nothing, a shape of the wrong rank or a value contradicting a static dimension is a usage error.
#pragma once

#include "analysis/analysis.h"
#include "ir/graph.h"
#include "support/status.h"

#include <string>
#include <vector>

namespace ctxkit::pipeline {

// One --variant: its name (given, or made from its bindings: `seq=1` -> `seq1`) and its NAME=VALUE items.
struct VariantSpec {
  std::string name;
  std::vector<std::pair<std::string, std::string>> items;
  std::string text;  // as given, for errors
};

// Parses every --variant argument; names must be distinct and made of letters, digits, '-' and '_'.
Expected<std::vector<VariantSpec>> parseVariants(const std::vector<std::string>& args);

// A model of the run as the binding rules see it.
struct BindingModel {
  std::string stem;
  const std::vector<ir::ValueInfo>* inputs;
};

// The bindings for model `model` in variant `variant` (nullptr: no variants): the run-wide --dim/--shape, those
// prefixed with the model's stem (which refine run-wide ones), then the variant's items (an item names an input ->
// a shape, else a symbol). Two arguments of one kind, or a variant item and any other argument, binding one symbol
// or input of the model to different values are a usage error naming both.
// Every argument is checked against all models once, by checkBindings.
Expected<analysis::Bindings> bindingsFor(const BindingModel& model, const std::vector<BindingModel>& all,
                                         const std::vector<std::string>& dims, const std::vector<std::string>& shapes,
                                         const VariantSpec* variant);

// Usage errors for bindings that match nothing in any model of the run (naming the models' inputs and symbols),
// shapes of another rank than declared, and values contradicting a declared static dimension.
Status checkBindings(const std::vector<BindingModel>& models, const std::vector<std::string>& dims,
                     const std::vector<std::string>& shapes, const std::vector<VariantSpec>& variants);

// One --set [STEM:]INPUT=V[,V...] applied to a model: the input becomes this constant for compilation.
struct BoundInput {
  std::string name;
  ir::Tensor value;  // the declared type, in the shape the shape bindings give
  std::string text;  // the values as given: "16000"
};

// The --set values for model `model` (run-wide, then its STEM: ones, which replace them; two of one level giving an
// input different values contradict each other), checked against the
// input's declared type and its shape under `bindings`: a value count that is neither 1 nor the element count, a
// value the type does not hold or a shape that stays dynamic is a usage error naming model, input, declared and given.
Expected<std::vector<BoundInput>> boundInputsFor(const BindingModel& model, const std::vector<BindingModel>& all,
                                                 const std::vector<std::string>& sets,
                                                 const analysis::Bindings& bindings);

// Usage errors for --set arguments that name no input of any model of the run.
Status checkValueBindings(const std::vector<BindingModel>& models, const std::vector<std::string>& sets);

}  // namespace ctxkit::pipeline
