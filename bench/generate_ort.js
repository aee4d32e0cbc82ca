// The greedy generate loop of `ctxrun --generate` (lib/runtime/generate.cpp) on ONNX Runtime, the reference: the prompt
// through the prefill model, then each token through the decode model with the presents fed back as the past.
// usage: node generate_ort.js PREFILL DECODE PROMPT.npy N OUT_DIR [THREADS] [ITERS]
//   Writes OUT_DIR/logits_<i>.npy (each step's last-position logits, [1, vocab]) and prints JSON: tokens, ttft_ms,
//   tokens_per_s (decode: tokens after the first per second of decode steps), token_ms (each step, the first is the
//   time to first token) and load_ms. ITERS (default 1) repeats the whole generation; times are then the medians.
//   Values are found by the names ctxrun uses: input_ids, logits, each decode input whose name with "past_key_values"
//   or "past" made "present" is a decode output; attention_mask (ones) and position_ids when a model has them.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');
const { readNpy, writeNpy } = require('./npy');

const presentOf = (past, outputs) => ['past_key_values', 'past'].map(from => past.includes(from) ?
  past.replace(from, 'present') : null).find(name => name && outputs.includes(name));

function int64(shape, at) {
  const n = shape.reduce((a, b) => a * b, 1);
  return new ort.Tensor('int64', BigInt64Array.from({ length: n }, (_, i) => BigInt(at(i))), shape);
}

const median = v => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

async function generate(prefill, decode, kv, prompt, count) {
  const tokens = [], tokenMs = [], logits = [];
  let past = null;
  const S = prompt.dims[1];
  for (let step = 0; step < count; ++step) {
    const session = step === 0 ? prefill : decode;
    const ids = step === 0 ? prompt : int64([1, 1], () => tokens[tokens.length - 1]);
    const pastLength = step === 0 ? 0 : S + step - 1;
    const feeds = { input_ids: ids };
    if (session.inputNames.includes('attention_mask'))
      feeds.attention_mask = int64([1, pastLength + ids.dims[1]], () => 1);
    if (session.inputNames.includes('position_ids')) feeds.position_ids = int64([1, ids.dims[1]], i => pastLength + i);
    if (step > 0) kv.forEach(([p, q]) => { feeds[p] = past[q]; });
    const start = process.hrtime.bigint();
    const out = await session.run(feeds);
    const l = out.logits;
    const vocab = l.dims[l.dims.length - 1];
    const row = l.data.subarray(l.data.length - vocab);
    let best = 0;
    for (let i = 1; i < vocab; ++i) if (row[i] > row[best]) best = i;
    tokenMs.push(Number(process.hrtime.bigint() - start) / 1e6);
    tokens.push(best);
    logits.push(Float32Array.from(row));
    past = out;
  }
  return { tokens, tokenMs, logits };
}

async function main() {
  const [prefillPath, decodePath, promptPath, countText, outDir, threadsText, itersText] = process.argv.slice(2);
  const count = Number(countText), threads = Number(threadsText || 1), iters = Number(itersText || 1);
  const options = { intraOpNumThreads: threads, interOpNumThreads: 1,
    extra: { session: { intra_op: { allow_spinning: '0' } } } };
  const t = process.hrtime.bigint();
  const prefill = await ort.InferenceSession.create(prefillPath, options);
  const decode = await ort.InferenceSession.create(decodePath, options);
  const loadMs = Number(process.hrtime.bigint() - t) / 1e6;
  const kv = decode.inputNames.map(p => [p, presentOf(p, decode.outputNames)]).filter(([, q]) => q);
  if (!kv.length) throw new Error(`${decodePath}: no past input with a present output of the matching name`);
  const p = readNpy(promptPath);
  if (p.descr !== '<i8' || p.shape.length !== 2 || p.shape[0] !== 1)
    throw new Error(`${promptPath}: the prompt must be int64 [1, S], not ${p.descr} [${p.shape}]`);
  const prompt = new ort.Tensor('int64', p.data, p.shape);
  const runs = [];
  for (let i = 0; i < Math.max(1, iters); ++i) runs.push(await generate(prefill, decode, kv, prompt, count));
  const last = runs[runs.length - 1];
  fs.mkdirSync(outDir, { recursive: true });
  last.logits.forEach((row, i) => writeNpy(path.join(outDir, `logits_${i}.npy`),
    { type: 'float32', dims: [1, row.length], data: row }));
  const tps = r => r.tokenMs.length < 2 ? 0 : 1000 * (r.tokenMs.length - 1) / r.tokenMs.slice(1).reduce((a, b) => a + b);
  console.log(JSON.stringify({ tokens: last.tokens, ttft_ms: median(runs.map(r => r.tokenMs[0])),
    tokens_per_s: median(runs.map(tps)), token_ms: last.tokenMs, load_ms: loadMs, runs: runs.length }));
}
main().catch(e => { console.error(`generate_ort: ${e.message}`); process.exit(1); });
