// The one parser of ONNX Runtime's EPContext session options, which ctxgen's -C and the plugin EP both use.
#include "epcontext/contract.h"
#include "epcontext/session_options.h"

#include <catch2/catch.hpp>

using namespace ctxkit;
using namespace ctxkit::epcontext;

TEST_CASE("session options: every key sets what it names, flags take 0 or 1 only, unknown keys are refused",
          "[epcontext]") {
  ContextSessionOptions o;
  CHECK(applyContextOption(option::kContextEnable, "1", o).isOk());
  CHECK(applyContextOption(option::kContextEmbedMode, "1", o).isOk());
  CHECK(applyContextOption(option::kContextNodeNamePrefix, "p_", o).isOk());
  CHECK(applyContextOption(option::kContextFilePath, "out/m_ctx.onnx", o).isOk());
  CHECK(applyContextOption(option::kContextExternalInitializersFileName, "w.data", o).isOk());
  CHECK(applyContextOption(option::kStopShareEpContexts, "1", o).isOk());
  CHECK(applyContextOption(option::kEnableWeightlessDeprecated, "1", o).isOk());
  CHECK(applyContextOption(option::kEnableWeightless, "0", o).isOk());  // either spelling turns it on
  CHECK(o.contextEnable);
  CHECK(o.embedMode == 1);
  CHECK(o.nodeNamePrefix == "p_");
  CHECK(o.contextFilePath == "out/m_ctx.onnx");
  CHECK(o.externalInitializersFile == "w.data");
  CHECK(o.stopShareContexts);
  CHECK(o.weightless);
  CHECK(checkContextOptions(o).isOk());
  CHECK(applyContextOption(option::kShareEpContexts, "1", o).isOk());
  Status both = checkContextOptions(o);
  REQUIRE(!both.isOk());
  CHECK(both.error().message() == "ep.share_ep_contexts=1 with ep.context_embed_mode=1: sharing a context needs a file");

  Status bad = applyContextOption(option::kContextEmbedMode, "2", o);
  REQUIRE(!bad.isOk());
  CHECK(bad.error().message() == "ep.context_embed_mode: expected 0 or 1, got '2'");
  CHECK(!applyContextOption(option::kShareEpContexts, "yes", o).isOk());
  CHECK(!applyContextOption("ep.no_such_key", "1", o).isOk());
  CHECK(!isContextOptionKey("ep.no_such_key"));
  for (const char* key : contextOptionKeys()) CHECK(isContextOptionKey(key));
}
