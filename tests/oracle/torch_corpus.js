// Helpers of torch_corpus.sh: reads the corpus' meta.json and the tools' JSON reports, and compares detections.
// usage: node torch_corpus.js graphs CORPUS_DIR            every graph as NAME or NAME/GRAPH, one a line
//        node torch_corpus.js args CORPUS_DIR GRAPH        its ctxgen/ctxrun binding arguments, one a line
//        node torch_corpus.js compare CORPUS_DIR GRAPH     "tensors" or "detections"
//        node torch_corpus.js hash CORPUS_DIR GRAPH        the export script hash recorded with it
//        node torch_corpus.js gen CTXGEN_JSON              nodes compiled fallback folded partitions
//        node torch_corpus.js diff CTXRUN_JSON             max |diff| over the outputs, or the mismatch messages
//        node torch_corpus.js detections OURS ORT RTOL ATOL
//        node torch_corpus.js atol ORT ORT_PLAIN ATOL    the absolute tolerance for tensors: ATOL, or twice ONNX
//                                                        Runtime's own max |diff| between its optimized and its
//                                                        unoptimized run (output_<i>.npy of both) when larger, at
//                                                        most 1e-4
// `detections` compares boxes, scores and labels (output_0..2.npy) as sets: each ONNX Runtime detection must have
// one of ours with the same label and score and box within tolerance. Exit 1 (with the reason) when not.
'use strict';
const fs = require('fs');
const path = require('path');
const { readNpy } = require(path.join(__dirname, '../../bench/npy'));

const [cmd, ...args] = process.argv.slice(2);
const json = file => JSON.parse(fs.readFileSync(file, 'utf8'));
const splitGraph = g => (g.includes('/') ? g.split('/') : [g, 'model']);
const graphMeta = (dir, g) => {
  const [name, graph] = splitGraph(g);
  const meta = json(path.join(dir, name, 'meta.json'));
  return { meta, graph: meta.graphs[graph] };
};

function detections(ours, ort, rtol, atol) {
  const load = dir => [0, 1, 2].map(i => readNpy(path.join(dir, `output_${i}.npy`)));
  const [a, e] = [load(ours), load(ort)];
  const n = e[1].shape[0];
  if (a[1].shape[0] !== n) return { ok: false, message: `${a[1].shape[0]} detections but ONNX Runtime finds ${n}` };
  const close = (x, y) => Math.abs(x - y) <= atol + rtol * Math.abs(y);
  const used = new Uint8Array(n);
  let maxBox = 0, maxScore = 0, moved = 0;
  for (let i = 0; i < n; ++i) {
    let found = -1;
    for (let j = 0; j < n && found < 0; ++j) {
      if (used[j] || a[2].data[j] !== e[2].data[i] || !close(a[1].data[j], e[1].data[i])) continue;
      let same = true;
      for (let k = 0; k < 4; ++k) same = same && close(a[0].data[4 * j + k], e[0].data[4 * i + k]);
      if (same) found = j;
    }
    if (found < 0) {
      const box = Array.from(e[0].data.subarray(4 * i, 4 * i + 4));
      return { ok: false, message: `ONNX Runtime's detection ${i} (label ${e[2].data[i]}, score ${e[1].data[i]}, box ` +
        `${box.join(',')}) has no match among ours` };
    }
    used[found] = 1;
    if (found !== i) ++moved;
    maxScore = Math.max(maxScore, Math.abs(a[1].data[found] - e[1].data[i]));
    for (let k = 0; k < 4; ++k) maxBox = Math.max(maxBox, Math.abs(a[0].data[4 * found + k] - e[0].data[4 * i + k]));
  }
  return { ok: true, max: Math.max(maxBox, maxScore), moved, n };
}

switch (cmd) {
  case 'graphs':
    for (const name of fs.readdirSync(args[0]).sort()) {
      const file = path.join(args[0], name, 'meta.json');
      if (name.startsWith('.') || !fs.existsSync(file)) continue;
      const graphs = Object.keys(json(file).graphs);
      for (const g of graphs) console.log(g === 'model' && graphs.length === 1 ? name : `${name}/${g}`);
    }
    break;
  case 'args':
    for (const a of graphMeta(args[0], args[1]).graph.args) console.log(a);
    break;
  case 'compare': console.log(graphMeta(args[0], args[1]).graph.compare || 'tensors'); break;
  case 'hash': console.log(graphMeta(args[0], args[1]).meta.script_hash); break;
  case 'gen': {
    const m = json(args[0]).models[0];
    console.log(m.nodes, m.compiled_nodes, m.fallback_nodes, m.folded_nodes, m.partitions.length);
    break;
  }
  case 'diff': {
    const r = json(args[0]);
    const bad = (r.comparison || []).filter(c => !c.match);
    if (bad.length) console.log(bad.map(c => `${c.output}: ${c.message}`).join('; '));
    else console.log(Math.max(...r.comparison.map(c => c.max_abs_error)).toExponential(2));
    break;
  }
  case 'detections': {
    const r = detections(args[0], args[1], Number(args[2]), Number(args[3]));
    if (!r.ok) { console.log(r.message); process.exit(1); }
    console.log(`${r.max.toExponential(2)} (${r.n} detections${r.moved ? `, ${r.moved} in another order` : ''})`);
    break;
  }
  case 'atol': {
    let noise = 0;
    for (let i = 0; fs.existsSync(path.join(args[0], `output_${i}.npy`)); ++i) {
      const [a, b] = [args[0], args[1]].map(d => readNpy(path.join(d, `output_${i}.npy`)).data);
      if (a.length !== b.length) { console.error(`output ${i}: ${a.length} vs ${b.length} elements`); process.exit(1); }
      for (let k = 0; k < a.length; ++k) noise = Math.max(noise, Math.abs(Number(a[k]) - Number(b[k])));
    }
    // At most 1e-4: a reference that differs from itself more than that says nothing about fp32 accuracy.
    console.log(Math.min(1e-4, Math.max(Number(args[2]), 2 * noise)).toExponential(2));
    break;
  }
  default: console.error(`torch_corpus.js: unknown command '${cmd}'`); process.exit(2);
}
