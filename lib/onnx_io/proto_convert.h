// Private to onnx_io (included only by its .cpp files): conversions between onnx protobuf messages and ir.
#pragma once

#include "ir/graph.h"
#include "support/file_io.h"
#include "support/status.h"

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace ctxkit::onnx_io::detail {

// Subgraphs (If/Loop/Scan bodies) nested deeper than this are rejected (docs/bad-input.md#loader-rules, rule 15).
inline constexpr int kMaxGraphDepth = 64;

// Everything one load shares: where external data resolves, the files mapped so far, and the owner of the
// parsed message whose raw_data strings tensors view.
struct LoadContext {
  std::optional<std::filesystem::path> baseDir;  // nullopt: external data is not allowed
  bool resolveExternalData = true;               // false: record initializers' external locations only
  std::shared_ptr<const void> owner;
  std::map<std::filesystem::path, std::shared_ptr<const MappedFile>> mappings;  // one per file per load
  std::map<std::string, int64_t> opsets;                                        // model's opset_import; "" for ai.onnx
  std::set<std::pair<std::string, std::string>> localFunctions;                 // (domain, name) of model functions
};

// Parses a message from bytes of any size protobuf accepts (up to 2 GiB), with recursion deep enough for
// kMaxGraphDepth nested subgraphs; never throws. When protobuf refuses the bytes, the error says why, `what`
// ("ONNX protobuf") naming the data: cut short or malformed (which field, at which byte), or nested too deep.
Status parseMessage(google::protobuf::Message& message, std::span<const std::byte> bytes, std::string_view what);

// A tensor from its proto: raw_data is viewed (owned by ctx.owner), typed fields are copied, and external
// data is mapped from ctx.baseDir. Errors carry no tensor name; callers add it.
Expected<ir::Tensor> tensorFromProto(const onnx::TensorProto& proto, LoadContext& ctx);

// A whole graph, recursively; `depth` counts enclosing graphs.
Expected<ir::Graph> graphFromProto(const onnx::GraphProto& proto, LoadContext& ctx, int depth);

// Library boundary: protobuf and allocation failures become errors carrying `where`, never exceptions.
template <typename F> auto guarded(std::string_view where, F&& body) -> decltype(body()) {
  try {
    auto result = body();
    result.addContext(where);
    return result;
  } catch (const std::bad_alloc&) {
    return makeError(ErrorCode::Internal, "{}: out of memory", where);
  } catch (const std::exception& e) {
    return makeError(ErrorCode::Internal, "{}: {}", where, e.what());
  }
}

inline std::filesystem::path folderOf(const std::filesystem::path& file) {
  std::filesystem::path folder = file.parent_path();
  return folder.empty() ? std::filesystem::path(".") : folder;
}

// Embeds a tensor (raw_data, or string_data for strings).
Status tensorToProto(const ir::Tensor& tensor, const std::string& name, onnx::TensorProto* proto);

}  // namespace ctxkit::onnx_io::detail
