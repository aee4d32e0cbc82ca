# Sourced by bench/suite.sh and bench/ort_ep.sh: where the npm models are, and the bundled samples and npm models both
# benchmarks run, with the input bindings each needs. Needs $build and $cache.
ocr="$cache/models/ocr-models-1.4.2/package/assets"
vad="$cache/models/silero-vad-1.0.3/package/weights"
oww="$cache/models/openwakeword-js-0.1.27/package/models"
vadWeb="$cache/models/vad-web-0.0.31/package/dist"

# each_sample_model FN: calls `FN NAME MODEL [--shape INPUT=AxB ...]` once per model.
each_sample_model() {
  local fn=$1 samples="$build/samples" m
  for m in tiny_prefill tiny_decode tiny_cnn tiny_qdq_cnn; do "$fn" "$m" "$samples/$m.onnx"; done
  "$fn" ppocr_cls "$ocr/ch_ppocr_mobile_v2.0_cls_infer.onnx" --shape x=1x3x48x192
  "$fn" ppocrv4_rec "$ocr/ch_PP-OCRv4_rec_infer.onnx" --shape x=1x3x48x320
  "$fn" ppocrv4_det "$ocr/ch_PP-OCRv4_det_infer.onnx" --shape x=1x3x640x640
  # The other silero variants take a sample rate input whose value picks the branch (suite.sh binds it).
  "$fn" silero_vad_half "$vad/silero_vad_half.onnx" --shape input=1x512 --shape state=2x1x128
  for m in hello_deepa hello_deepa_old namaste_deepa; do "$fn" "$m" "$oww/$m.onnx"; done
}
