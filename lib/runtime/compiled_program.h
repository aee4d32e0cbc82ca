// A program from a context binary, validated and bound to its weights, ready to execute with the CPU kernels.
#pragma once

#include "format/container.h"
#include "kernels/kernels.h"
#include "program/program.h"

#include <memory>
#include <string>
#include <vector>

namespace ctxkit::runtime {

class CompiledProgram {
public:
  // Validates the program against the container (every weight reference resolves, with the recorded type
  // and shape) and against the kernels' shape rules, then binds weights and the arena.
  static Expected<std::unique_ptr<CompiledProgram>> create(program::Program program,
                                                           std::shared_ptr<const format::ContainerView> container,
                                                           std::string name);

  size_t inputCount() const { return program_.inputs.size(); }
  size_t outputCount() const { return program_.outputs.size(); }
  const program::TensorDesc& inputDesc(size_t i) const { return program_.tensors[program_.inputs[i]]; }
  const program::TensorDesc& outputDesc(size_t i) const { return program_.tensors[program_.outputs[i]]; }
  const std::string& name() const { return name_; }
  uint64_t arenaBytes() const { return program_.arenaSize; }

  // Inputs must match the program's static types and shapes; outputs are allocated here.
  Expected<std::vector<ir::Tensor>> run(std::span<const ir::Tensor* const> inputs, kernels::ThreadPool* pool);

private:
  CompiledProgram() = default;
  program::Program program_;
  std::shared_ptr<const format::ContainerView> container_;
  std::string name_;
  std::shared_ptr<std::byte> arena_;
  std::vector<ir::Tensor> bound_;  // one per program tensor; inputs, outputs and their views rebound per run
};

}  // namespace ctxkit::runtime
