// What the lowering passes (lib/codegen/passes) work on: one partition's ops as the passes rewrite them, over a table
// of the partition's values by dense id (with the constants, types, shapes and layouts the passes give them), and from
// emit-program on the program being built; with the questions every pass asks of them (is this value a constant, who
// reads it, what shape has it).
#pragma once

#include "codegen/lower.h"
#include "cpu/kernel_choice.h"
#include "ir/pass.h"
#include "ir/value_table.h"
#include "ops/typed_attrs.h"

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ctxkit::codegen {

// A value of the partition, numbered densely from 0 as the lowering meets it (the ops' inputs and outputs in order,
// then the values the passes make): ir's id type and its kNoValue for an absent optional input or output, but the
// partition's own numbering, not the graph's (ir::ValueTable) that analysis facts are kept by.
using ValueId = ir::ValueId;
using ir::kNoValue;

// What the lowering knows of one value. Names are kept for dumps, errors and the program's tensor names; nothing is
// looked up by them past the partition boundary.
struct ValueRecord {
  std::string name;
  ir::ElemType type = ir::ElemType::Undefined;  // analysis's, or the lowering's (widen-float16 retypes float16 values)
  std::optional<ir::Shape> shape;               // analysis's, or the lowering's for the values it makes
  // A value-dependent shape (no `shape`): analysis's upper bound and lower bound (ValueFacts::bound, low); a dimension
  // where they differ is bounded in the program (TensorDesc::bounded), the others exact.
  std::optional<ir::Shape> bound, low;
  const ir::Tensor* sourceConstant = nullptr;  // the constant analysis knows, if any
  // A constant the passes made (folded), or the float32 widening of a float16 constant (widen-float16); it takes
  // precedence over sourceConstant. Held by pointer so that it keeps its address.
  std::unique_ptr<ir::Tensor> made;
  // widen-float16: the float16 tensor a constant read as float32 (`made`) is stored as, of which it is the exact
  // widening (weight layout float16-widened: widened when loaded).
  std::unique_ptr<ir::Tensor> float16Storage;
  std::optional<cpu::WeightLayout> layout;  // choose-layouts: a constant (or load-time value) stored packed
  // fold-constants: computed once at load from constants (a weight kept quantized and dequantized at load, and what is
  // computed from it alone), by the ops that produce it (program::TensorKind::LoadTime).
  bool loadTime = false;
  bool leaves = false;  // read outside the partition or listed as a graph output
  int32_t tensor = -1;  // emit-program: the value's program tensor
};

// One op of the partition as the passes see it.
struct LOp {
  ir::OpKind kind;
  int64_t opset;
  std::string name;
  // The node's attributes as decoded at import (ops::attrsOf), or the defaults (ops::defaultAttrsFor) for an op the
  // lowering makes; passes read and change these, never ONNX attributes.
  ops::OpAttrs typed;
  std::vector<ValueId> inputs;            // kNoValue for an absent optional input
  std::vector<ValueId> outputs;           // kNoValue for an absent optional output
  std::optional<ops::Epilogue> epilogue;  // fuse-epilogue: what Conv/Gemm/MatMul apply to their results
  ir::Attributes onnx = {};       // ONNX attributes, kept only for families without typed ones (kernels read them)
  cpu::KernelChoice kernel = {};  // choose-kernels: a float32 Conv's algorithm
};

// An op the lowering makes, with its kind's default attributes.
LOp madeOp(ir::OpKind kind, int64_t opset, std::string name, std::vector<ValueId> inputs, std::vector<ValueId> outputs);

struct LoweringState {
  LoweringState(const analysis::GraphFacts& facts, std::span<const ir::ValueId> usedOutside,
                const WeightInterner& intern, const LowerOptions& options)
      : facts(facts), usedOutside(usedOutside), intern(intern), options(options),
        fromGraph_(facts.table.size(), kNoValue) {}

  const analysis::GraphFacts& facts;
  // The graph values (ids of facts.table, ascending) read outside the partition or listed as graph outputs.
  std::span<const ir::ValueId> usedOutside;
  const WeightInterner& intern;
  const LowerOptions& options;

  std::vector<LOp> ops;  // in execution order
  // A weightless context's constants computed by exact ops (codegen::exactRecipes) and the ops computing them, in
  // order, outside `ops`: emit-program computes at load each such constant the program still reads unchanged.
  std::vector<LOp> exactRecipeOps;
  std::vector<ValueId> exactRecipeValues;
  size_t folds = 0;  // fold-batchnorm and fold-affine: numbers the constants they make

  // emit-program and plan-memory: the program.
  LoweredPartition result;
  bool emitted = false;

  // The partition boundary: the lowering's id of the graph's value `graphValue` (an id of facts.table, or kNoValue),
  // its record made on first use from what analysis knows of it and whether it leaves the partition.
  ValueId fromGraph(ir::ValueId graphValue);
  // The id of the value named `name`: a graph value's as fromGraph gives it; the lowering's own values get their (new)
  // names here too.
  ValueId value(const std::string& name);
  // The id of the value named `name`, if it has one (a pass making a fresh name asks).
  std::optional<ValueId> findValue(const std::string& name) const;
  size_t valueCount() const { return values_.size(); }
  ValueRecord& record(ValueId v) { return values_[v]; }
  const ValueRecord& record(ValueId v) const { return values_[v]; }
  // The value's name; empty for kNoValue.
  const std::string& nameOf(ValueId v) const;

  // The constant value `v` holds (made here or known to analysis), or null.
  const ir::Tensor* constantOf(ValueId v) const;
  // Whether `v` is computed once at load (fold-constants).
  bool isLoadTime(ValueId v) const { return v != kNoValue && values_[v].loadTime; }
  std::optional<ir::Shape> shapeOf(ValueId v) const;
  // Whether `v`'s shape is only bounded (ValueRecord::bound), and whether op i reads or writes such a value: passes
  // that rewrite by shapes leave such ops alone, emit-program takes their outputs from the analysis.
  bool isBounded(ValueId v) const { return v != kNoValue && !values_[v].shape && values_[v].bound.has_value(); }
  bool touchesBounded(const LOp& op) const;
  // The element type of a value: a constant's, else the lowering's or analysis's.
  ir::ElemType typeOf(ValueId v) const;
  // The scalar value of a float32 constant with one element, or nothing.
  std::optional<float> scalarOf(ValueId v) const;
  bool leaves(ValueId v) const { return v != kNoValue && values_[v].leaves; }
  // How many inputs of the ops read `v`.
  size_t readers(ValueId v) const;
  // The ops reading `v`, ascending, one entry per input that reads it.
  const std::vector<size_t>& readersOf(ValueId v) const;
  // The op that alone reads op i's only output (which leaves neither the partition nor the op list), or nothing;
  // nothing when either op touches a bounded value (fusions leave those ops as they are).
  std::optional<size_t> soleReader(size_t i) const;
  // The op of `kind` producing `v` (its index), or nothing.
  std::optional<size_t> producerOf(ValueId v, ir::OpKind kind) const;
  // Makes `v` a constant the lowering computed (unless it already holds one it made), of t's shape; returns `v`.
  ValueId addConstant(ValueId v, ir::Tensor t);
  // The same for the value named `name`, made if new.
  ValueId addConstant(const std::string& name, ir::Tensor t) { return addConstant(value(name), std::move(t)); }

  // Edits of the op list. The questions above answer from per-value use lists built from `ops` on the first question;
  // these edits keep them up to date, and a pass that changes an op's inputs or outputs in `ops` itself calls
  // opsChanged() before asking again (the lists are then built anew).
  void eraseOp(size_t i);
  void insertOp(size_t i, LOp op);
  void replaceOp(size_t i, LOp op);
  void setInputs(size_t i, std::vector<ValueId> inputs);
  void setOutputs(size_t i, std::vector<ValueId> outputs);
  void opsChanged() { indexed_ = false; }

  // The partition after `pass`: before emit-program a list of ONNX-level ops, after it the program.
  std::string dump(std::string_view pass) const;

private:
  // Where a value is used: the ops reading it (one entry per input) and the ops producing it, by index, ascending.
  struct Uses {
    std::vector<size_t> readers, producers;
  };
  const Uses* usesOf(ValueId v) const;
  Uses& usesAt(ValueId v);
  void unindex(size_t i);  // forgets op i's inputs and outputs
  void index(size_t i);    // records op i's inputs and outputs

  std::deque<ValueRecord> values_;  // by id; a deque, so that records keep their addresses as values are added
  std::vector<ValueId> fromGraph_;  // by facts.table id: the lowering's id, once met
  std::unordered_map<std::string, ValueId> byName_;  // names to ids, for the names passes make
  mutable std::vector<Uses> uses_;                   // by id
  mutable bool indexed_ = false;
};

}  // namespace ctxkit::codegen
