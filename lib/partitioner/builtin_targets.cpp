// The built-in targets, as the same JSON a user would write; their ids, revisions and EP name come from the
// EPContext contract.
#include "partitioner/target.h"

namespace ctxkit::partitioner {

namespace {

// An NPU-like subset: static shapes, float32/float16/int8 with int32 accumulators (float16 arithmetic: every op
// rounds), no control flow.
constexpr const char* kNpuSimBody = R"json(
  "static_shapes_only": true,
  "bounded_shapes": false,
  "max_rank": 6,
  "min_partition_size": 1,
  "weight_alignment": 64,
  "element_types": ["float32", "float16", "int8", "uint8", "int32", "bool"],
  "preferred_layouts": {"gemm": "panels-32", "conv": "oihw"},
  "float16_compute": "float16",
  "ops": [
    {"op": "Conv", "constraints": {"max_rank": 5, "auto_pad": ["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"]}},
    {"op": "MatMul"}, {"op": "Gemm"},
    {"op": "Add"}, {"op": "Sub"}, {"op": "Mul"}, {"op": "Div"}, {"op": "Pow"},
    {"op": "Sqrt"}, {"op": "Erf"}, {"op": "Exp"}, {"op": "Log"}, {"op": "Neg"}, {"op": "Abs"}, {"op": "Reciprocal"},
    {"op": "ConvTranspose", "constraints": {"max_rank": 5}},
    {"op": "Relu"}, {"op": "LeakyRelu"}, {"op": "Sigmoid"}, {"op": "HardSigmoid"}, {"op": "Tanh"}, {"op": "Gelu"},
    {"op": "Clip"}, {"op": "HardSwish"}, {"op": "Max"}, {"op": "Min"},
    {"op": "Softmax"},
    {"op": "MaxPool", "constraints": {"max_rank": 5}}, {"op": "AveragePool", "constraints": {"max_rank": 5}},
    {"op": "GlobalAveragePool"},
    {"op": "BatchNormalization"}, {"op": "LayerNormalization"}, {"op": "SimplifiedLayerNormalization"},
    {"op": "SkipLayerNormalization", "domain": "com.microsoft"},
    {"op": "SkipSimplifiedLayerNormalization", "domain": "com.microsoft"},
    {"op": "Gelu", "domain": "com.microsoft"}, {"op": "BiasGelu", "domain": "com.microsoft"},
    {"op": "FastGelu", "domain": "com.microsoft"}, {"op": "QuickGelu", "domain": "com.microsoft"},
    {"op": "MatMulNBits", "domain": "com.microsoft"}, {"op": "GroupQueryAttention", "domain": "com.microsoft"},
    {"op": "RotaryEmbedding", "domain": "com.microsoft"}, {"op": "MatMulIntegerToFloat", "domain": "com.microsoft"},
    {"op": "DynamicQuantizeMatMul", "domain": "com.microsoft"},
    {"op": "MultiHeadAttention", "domain": "com.microsoft"}, {"op": "Attention", "domain": "com.microsoft"},
    {"op": "EmbedLayerNormalization", "domain": "com.microsoft", "types": ["int32", "float32", "float16"]},
    {"op": "Reshape"}, {"op": "Flatten"}, {"op": "Squeeze"},
    {"op": "Unsqueeze", "types": ["int64", "int32", "float32", "float16", "int8", "uint8", "bool"]}, {"op": "Identity"},
    {"op": "Transpose"}, {"op": "Concat"}, {"op": "Slice"}, {"op": "Gather"}, {"op": "Pad"},
    {"op": "Resize", "constraints": {"max_rank": 4, "mode": ["nearest", "linear"]}},
    {"op": "Upsample", "constraints": {"max_rank": 4, "mode": ["nearest", "linear"]}},
    {"op": "ReduceMean"}, {"op": "ReduceMax"}, {"op": "ReduceSum"}, {"op": "Sum"},
    {"op": "InstanceNormalization"}, {"op": "LRN"},
    {"op": "Cast", "types": ["float32", "float16", "int8", "uint8", "int32", "int64", "bool"]}, {"op": "Split"}, {"op": "Dropout"}, {"op": "ConstantOfShape", "types": ["int64", "float32", "float16", "int8", "uint8"]},
    {"op": "Equal", "types": ["int64", "int32", "float32", "float16", "int8", "uint8", "bool"]}, {"op": "Where"},
    {"op": "Greater", "types": ["int64", "int32", "float32", "float16", "int8", "uint8", "bool"]},
    {"op": "GreaterOrEqual", "types": ["int64", "int32", "float32", "float16", "int8", "uint8", "bool"]},
    {"op": "Less", "types": ["int64", "int32", "float32", "float16", "int8", "uint8", "bool"]},
    {"op": "LessOrEqual", "types": ["int64", "int32", "float32", "float16", "int8", "uint8", "bool"]},
    {"op": "And"}, {"op": "Or"}, {"op": "Not"}, {"op": "Floor"}, {"op": "Ceil"},
    {"op": "ReduceMin"}, {"op": "ReduceProd"}, {"op": "Tile"}, {"op": "GatherND"},
    {"op": "PRelu"}, {"op": "Elu"}, {"op": "Selu"}, {"op": "Softplus"}, {"op": "Mish"}, {"op": "LogSoftmax"},
    {"op": "Sin"}, {"op": "Cos"}, {"op": "Sign"}, {"op": "Round"}, {"op": "Mean"},
    {"op": "GlobalMaxPool"}, {"op": "DepthToSpace"}, {"op": "SpaceToDepth"}, {"op": "GroupNormalization"},
    {"op": "GridSample", "constraints": {"max_rank": 4}}, {"op": "Einsum", "types": ["float32", "float16"]},
    {"op": "ArgMax", "types": ["float32", "float16", "int8", "uint8", "int32", "int64"]},
    {"op": "ArgMin", "types": ["float32", "float16", "int8", "uint8", "int32", "int64"]}, {"op": "Celu"},
    {"op": "LSTM", "types": ["float32", "float16", "int32"]}, {"op": "GRU", "types": ["float32", "float16", "int32"]},
    {"op": "RNN", "types": ["float32", "float16", "int32"]},
    {"op": "Expand", "types": ["int64", "float32", "float16", "int8", "uint8", "bool"]},
    {"op": "DynamicQuantizeLinear", "types": ["float32", "uint8"]},
    {"op": "QuantizeLinear", "types": ["float32", "int8", "uint8"]},
    {"op": "DequantizeLinear", "types": ["int8", "uint8", "int4", "uint4", "int32", "float32"]},
    {"op": "QLinearConv", "types": ["int8", "uint8"], "constraints": {"max_rank": 4}},
    {"op": "QLinearMatMul", "types": ["int8", "uint8"]},
    {"op": "ConvInteger", "types": ["int8", "uint8", "int32"], "constraints": {"max_rank": 4}},
    {"op": "MatMulInteger", "types": ["int8", "uint8", "int32"]}
  ]
})json";

// Every op the runtime executes; used for whole-graph compilation and conformance runs. Float16 graphs compute in
// float32 between ops, as ONNX Runtime's CPU EP does.
constexpr const char* kCpuBody = R"json(
  "static_shapes_only": true,
  "bounded_shapes": true,
  "max_rank": 8,
  "min_partition_size": 1,
  "weight_alignment": 64,
  "preferred_layouts": {"gemm": "panels-32"},
  "float16_compute": "float32",
  "ops": "all-kernels"
})json";

// The fields that name a built-in target, then its body.
std::string targetJson(const epcontext::KnownTarget& t, std::string_view body) {
  return fmt::format("{{\n  \"name\": \"{}\",\n  \"ep\": \"{}\",\n  \"hardware_architecture\": \"{}\",\n"
                     "  \"revision\": \"{}\",{}",
                     t.id, epcontext::kEpName, t.id, t.revision, body);
}

}  // namespace

std::vector<std::string> builtinTargetNames() {
  std::vector<std::string> names;
  for (const auto& t : epcontext::knownTargets()) names.emplace_back(t.id);
  return names;
}

std::optional<std::string> builtinTargetJson(std::string_view name) {
  if (name == epcontext::kNpuSim.id) return targetJson(epcontext::kNpuSim, kNpuSimBody);
  if (name == epcontext::kCpu.id) return targetJson(epcontext::kCpu, kCpuBody);
  return std::nullopt;
}

}  // namespace ctxkit::partitioner
