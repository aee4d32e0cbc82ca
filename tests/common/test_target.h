// A test target: the ops most unit tests use, minus one, so that a test can put a node on the fallback path.
#pragma once

#include "partitioner/target.h"

#include <catch2/catch.hpp>

#include <string>

namespace ctxkit::testing {

inline partitioner::Target targetWithout(const std::string& excluded) {
  std::string ops;
  for (const char* op : {"Relu", "Exp", "Add", "MatMul", "Reshape", "Conv", "BatchNormalization", "Sigmoid"})
    if (op != excluded) ops += std::string(ops.empty() ? "" : ",") + "{\"op\":\"" + op + "\"}";
  auto t = partitioner::parseTarget(R"({"name":"test","element_types":["float32"],"ops":[)" + ops + "]}", "test target");
  REQUIRE(t);
  return *t;
}

}  // namespace ctxkit::testing
