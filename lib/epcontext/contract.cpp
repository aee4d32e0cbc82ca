// The EPContext contract's functions: source matching, attribute reading and writing, compatibility metadata.
#include "epcontext/contract.h"

#include <array>
#include <charconv>

namespace ctxkit::epcontext {

namespace {

bool equalsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

constexpr std::array kKnownTargets{kNpuSim, kCpu};

constexpr std::string_view kFormatField = "format=";
constexpr std::string_view kVersionField = "version=";
constexpr std::string_view kTargetField = "target=";
constexpr std::string_view kRevisionField = "revision=";

Expected<uint16_t> parseNumber(std::string_view text, std::string_view what, std::string_view whole) {
  uint16_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return makeError(ErrorCode::InvalidArgument, "compatibility info '{}': {} '{}' is not a number from 0 to 65535",
                     whole, what, text);
  return value;
}

}  // namespace

bool isOurSource(std::string_view source) {
  return equalsIgnoringCase(source, kEpName) || equalsIgnoringCase(source, kProducer);
}

bool isOurNode(const ir::Node& node) {
  return node.kind == ir::OpKind::EPContext && isOurSource(node.attrs.getString(attr::kSource));
}

NodeAttributes readNodeAttributes(const ir::Node& node) {
  NodeAttributes a;
  const ir::Attributes& in = node.attrs;
  a.mainContext = in.getInt(attr::kMainContext, kDefaultMainContext);
  a.embedMode = in.getInt(attr::kEmbedMode, kDefaultEmbedMode);
  if (const ir::Attribute* cache = in.find(attr::kEpCacheContext); cache && cache->type == ir::AttrType::String)
    a.cacheContext = std::string_view(cache->s);
  a.sdkVersion = in.getString(attr::kEpSdkVersion);
  a.onnxModelFilename = in.getString(attr::kOnnxModelFilename);
  a.hardwareArchitecture = in.getString(attr::kHardwareArchitecture);
  a.partitionName = in.getString(attr::kPartitionName);
  a.source = in.getString(attr::kSource);
  if (const ir::Attribute* m = in.find(attr::kMaxSize); m && m->type == ir::AttrType::Int) a.maxSize = m->i;
  a.notes = in.getString(attr::kNotes);
  return a;
}

std::string contextGraphName(const ir::Node& node) { return node.attrs.getString(attr::kPartitionName, node.name); }

void writeNodeAttributes(const NodeAttributes& a, ir::Node& node) {
  node.opType = kOpType;
  node.domain = kDomain;
  node.kind = ir::OpKind::EPContext;
  node.opset = kDomainVersion;
  ir::Attributes& out = node.attrs;
  out.set(ir::Attribute::makeInt(attr::kMainContext, a.mainContext));
  if (a.cacheContext) out.set(ir::Attribute::makeString(attr::kEpCacheContext, std::string(*a.cacheContext)));
  out.set(ir::Attribute::makeInt(attr::kEmbedMode, a.embedMode));
  out.set(ir::Attribute::makeString(attr::kEpSdkVersion, a.sdkVersion));
  out.set(ir::Attribute::makeString(attr::kOnnxModelFilename, a.onnxModelFilename));
  out.set(ir::Attribute::makeString(attr::kHardwareArchitecture, a.hardwareArchitecture));
  out.set(ir::Attribute::makeString(attr::kPartitionName, a.partitionName));
  out.set(ir::Attribute::makeString(attr::kSource, a.source));
  if (a.maxSize) out.set(ir::Attribute::makeInt(attr::kMaxSize, *a.maxSize));
  if (!a.notes.empty()) out.set(ir::Attribute::makeString(attr::kNotes, a.notes));
}

NodeAttributes ourNodeAttributes() {
  NodeAttributes a;
  a.sdkVersion = kVersion;
  a.source = kEpName;
  return a;
}

std::span<const KnownTarget> knownTargets() { return kKnownTargets; }

const KnownTarget* findKnownTarget(std::string_view id) {
  for (const KnownTarget& t : kKnownTargets)
    if (id == t.id) return &t;
  return nullptr;
}

std::string compatibilityMetadataKey() { return std::string("ep_compatibility_info.") + kEpName; }

std::string contextChecksumKey(std::string_view cacheContext) {
  return fmt::format("{}.context_checksum:{}", kProducer, cacheContext);
}

std::string formatCompatibilityInfo(const CompatibilityInfo& info) {
  return fmt::format("{};{}{}.{};{}{};{}{};{}{}", info.producer, kFormatField, info.formatMajor, info.formatMinor,
                     kVersionField, info.version, kTargetField, info.targetId, kRevisionField, info.targetRevision);
}

Expected<CompatibilityInfo> parseCompatibilityInfo(std::string_view text) {
  std::vector<std::string_view> fields;
  for (size_t start = 0;;) {
    size_t end = text.find(';', start);
    fields.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  const std::array<std::string_view, 4> keys{kFormatField, kVersionField, kTargetField, kRevisionField};
  if (fields.size() != 1 + keys.size())
    return makeError(
        ErrorCode::InvalidArgument, "compatibility info '{}' has {} fields; expected {} ({}{}...;{}...;{}...;{}...)",
        text, fields.size(), 1 + keys.size(), "PRODUCER;", kFormatField, kVersionField, kTargetField, kRevisionField);
  for (size_t i = 0; i < keys.size(); ++i)
    if (!fields[i + 1].starts_with(keys[i]))
      return makeError(ErrorCode::InvalidArgument,
                       "compatibility info '{}': field {} is '{}'; expected it to start with '{}'", text, i + 2,
                       fields[i + 1], keys[i]);
  CompatibilityInfo info;
  info.producer = fields[0];
  std::string_view format = fields[1].substr(kFormatField.size());
  size_t dot = format.find('.');
  if (dot == std::string_view::npos)
    return makeError(ErrorCode::InvalidArgument, "compatibility info '{}': format '{}' is not MAJOR.MINOR", text,
                     format);
  CTX_ASSIGN_OR_RETURN(info.formatMajor, parseNumber(format.substr(0, dot), "format major", text));
  CTX_ASSIGN_OR_RETURN(info.formatMinor, parseNumber(format.substr(dot + 1), "format minor", text));
  info.version = fields[2].substr(kVersionField.size());
  info.targetId = fields[3].substr(kTargetField.size());
  info.targetRevision = fields[4].substr(kRevisionField.size());
  return info;
}

}  // namespace ctxkit::epcontext
