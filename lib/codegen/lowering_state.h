// What the lowering passes (lib/codegen/passes) work on: one partition's ops as the passes rewrite them, the
// constants and layouts they make, and from emit-program on the program being built; with the questions every pass
// asks of them (is this value a constant, who reads it, what shape has it).
#pragma once

#include "codegen/lower.h"
#include "ir/pass.h"
#include "ops/typed_attrs.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ctxkit::codegen {

// One op of the partition as the passes see it.
struct LOp {
  ir::OpKind kind;
  int64_t opset;
  std::string name;
  // The node's attributes as decoded at import (ops::attrsOf), or the defaults (ops::defaultAttrsFor) for an op the
  // lowering makes; passes read and change these, never ONNX attributes.
  ops::OpAttrs typed;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::optional<ops::Epilogue> epilogue;  // fuse-epilogue: what Conv/Gemm/MatMul apply to their results
  ir::Attributes onnx = {};  // ONNX attributes, kept only for families without typed ones (kernels read them)
};

// An op the lowering makes, with its kind's default attributes.
LOp madeOp(ir::OpKind kind, int64_t opset, std::string name, std::vector<std::string> inputs,
           std::vector<std::string> outputs);

struct LoweringState {
  LoweringState(const analysis::GraphFacts& facts, const std::set<std::string>& usedOutside,
                const WeightInterner& intern, const LowerOptions& options)
      : facts(facts), usedOutside(usedOutside), intern(intern), options(options) {}

  const analysis::GraphFacts& facts;
  const std::set<std::string>& usedOutside;  // values read outside the partition or listed as graph outputs
  const WeightInterner& intern;
  const LowerOptions& options;

  std::vector<LOp> ops;                              // in execution order
  std::map<std::string, ir::Tensor> folded;          // constants the passes made
  size_t folds = 0;                                  // fold-batchnorm and fold-affine: numbers the constants they make
  std::map<std::string, cpu::WeightLayout> layouts;  // choose-layouts: constants (and load-time values) stored packed
  // fold-constants: values computed once at load from constants (a weight kept quantized and dequantized at load, and
  // what is computed from it alone), by the ops that produce them (program::TensorKind::LoadTime).
  std::set<std::string> loadTime;
  std::map<std::string, ir::Shape> localShapes;    // values the lowering itself introduces
  std::map<std::string, ir::ElemType> localTypes;  // values the lowering introduces or retypes (widen-float16)
  // widen-float16: constants the passes read as float32 (in `folded`) but emit-program stores as these float16
  // tensors, of which they are the exact widening (weight layout float16-widened: widened when loaded).
  std::map<std::string, ir::Tensor> float16Storage;

  // emit-program and plan-memory: the program, each value's tensor, each tensor's first and last use (op index).
  LoweredPartition result;
  std::map<std::string, int32_t> tensorOf;
  std::vector<size_t> firstUse, lastUse;
  bool emitted = false;

  // The constant value `name` holds (folded here or known to analysis), or null.
  const ir::Tensor* constantOf(const std::string& name) const;
  // Whether `name` is computed once at load (fold-constants' `loadTime`).
  bool isLoadTime(const std::string& name) const { return loadTime.count(name) != 0; }
  std::optional<ir::Shape> shapeOf(const std::string& name) const;
  // The element type of a value: a constant's, the lowering's (localTypes), or what analysis knows.
  ir::ElemType typeOf(const std::string& name) const;
  // The scalar value of a float32 constant with one element, or nothing.
  std::optional<float> scalarOf(const std::string& name) const;
  bool leaves(const std::string& value) const { return usedOutside.count(value) != 0; }
  // How many inputs of the ops read `value`.
  size_t readers(const std::string& value) const;
  // The ops reading `value`, ascending, one entry per input that reads it.
  const std::vector<size_t>& readersOf(const std::string& value) const;
  // The op that alone reads op i's only output (which leaves neither the partition nor the op list), or nothing.
  std::optional<size_t> soleReader(size_t i) const;
  // The op of `kind` producing `name` (its index), or nothing.
  std::optional<size_t> producerOf(const std::string& name, ir::OpKind kind) const;
  // Stores a constant the lowering made; returns its name.
  std::string addConstant(const std::string& name, ir::Tensor t);

  // Edits of the op list. The questions above answer from a use index built from `ops` on the first question; these
  // edits keep it up to date, and a pass that changes an op's inputs or outputs in `ops` itself calls opsChanged()
  // before asking again (the index is then built anew).
  void eraseOp(size_t i);
  void insertOp(size_t i, LOp op);
  void replaceOp(size_t i, LOp op);
  void setInputs(size_t i, std::vector<std::string> inputs);
  void setOutputs(size_t i, std::vector<std::string> outputs);
  void opsChanged() { indexed_ = false; }

  // The partition after `pass`: before emit-program a list of ONNX-level ops, after it the program.
  std::string dump(std::string_view pass) const;

private:
  // Where a value is used: the ops reading it (one entry per input) and the ops producing it, by index, ascending.
  struct Uses {
    std::vector<size_t> readers, producers;
  };
  const Uses* usesOf(const std::string& value) const;
  void unindex(size_t i);  // forgets op i's inputs and outputs
  void index(size_t i);    // records op i's inputs and outputs

  mutable std::unordered_map<std::string, Uses> uses_;
  mutable bool indexed_ = false;
};

}  // namespace ctxkit::codegen
