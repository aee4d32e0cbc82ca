// Compares a `ctxrun --generate --json --output-dir OURS` run with bench/generate_ort.js's on the same pair and prompt:
// every token equal, every step's logits_<i>.npy within |a - e| <= atol + rtol * |e|. Prints one line (the tokens
// matched, the max |diff| of the logits, both runs' time to first token and decode tokens/s) and exits 1 on a
// difference, saying where.
// usage: node generate_compare.js OURS_JSON OURS_DIR ORT_JSON ORT_DIR RTOL ATOL
'use strict';
const fs = require('fs');
const path = require('path');
const { readNpy } = require(path.join(__dirname, '../../bench/npy'));

const [oursJson, oursDir, ortJson, ortDir, rtolText, atolText] = process.argv.slice(2);
const ours = JSON.parse(fs.readFileSync(oursJson, 'utf8'));
const ort = JSON.parse(fs.readFileSync(ortJson, 'utf8'));
const rtol = Number(rtolText), atol = Number(atolText);
const problems = [];
const n = ort.tokens.length;
if (!ours.ok) problems.push(`ctxrun failed: ${ours.error}`);
const tokens = ours.tokens || [];
if (tokens.length !== n) problems.push(`ctxrun generated ${tokens.length} tokens, ONNX Runtime ${n}`);
let matched = 0;
while (matched < Math.min(n, tokens.length) && tokens[matched] === ort.tokens[matched]) ++matched;
if (matched < Math.min(n, tokens.length))
  problems.push(`token ${matched} is ${tokens[matched]}, ONNX Runtime's ${ort.tokens[matched]} (ours: ` +
    `${tokens.join(' ')}; ONNX Runtime: ${ort.tokens.join(' ')})`);
let maxDiff = 0;
for (let i = 0; i < Math.min(n, tokens.length); ++i) {
  const a = readNpy(path.join(oursDir, `logits_${i}.npy`)), e = readNpy(path.join(ortDir, `logits_${i}.npy`));
  if (a.shape.join('x') !== e.shape.join('x')) {
    problems.push(`logits_${i}.npy is [${a.shape}], ONNX Runtime's [${e.shape}]`);
    continue;
  }
  let worst = -1;
  for (let k = 0; k < e.data.length; ++k) {
    const d = Math.abs(a.data[k] - e.data[k]);
    maxDiff = Math.max(maxDiff, d);
    if (!(d <= atol + rtol * Math.abs(e.data[k])) && worst < 0) worst = k;
  }
  if (worst >= 0) problems.push(`logits_${i}.npy element ${worst} is ${a.data[worst]}, ONNX Runtime's ${e.data[worst]}`);
}
const fmt = (x, d) => (typeof x === 'number' ? x.toFixed(d) : '?');
console.log(`${matched} of ${n} tokens match, logits max |diff| ${maxDiff.toExponential(2)}; ` +
  `ctxkit: ttft ${fmt(ours.ttft_ms, 2)} ms, ${fmt(ours.tokens_per_s, 0)} tokens/s, ${ours.presents_in_place} of ` +
  `${n - 1} presents in place; ONNX Runtime: ttft ${fmt(ort.ttft_ms, 2)} ms, ${fmt(ort.tokens_per_s, 0)} tokens/s`);
if (problems.length) {
  for (const p of problems) console.log(`FAIL ${p}`);
  process.exit(1);
}
