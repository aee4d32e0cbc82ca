// Runs a model with ONNX Runtime (the reference) on .npy inputs; writes output_<i>.npy and prints timings as JSON.
// usage: node run_ort.js MODEL INPUT_DIR OUTPUT_DIR ITERS [THREADS] [SPINNING] [NAME=V[,V...]...]
//   THREADS: intra-op threads (default 1); SPINNING: 1 lets ORT's threads spin-wait (its default), 0 (default here)
//   turns that off (session.intra_op.allow_spinning), which keeps 2-thread timings sane on a busy 2-core machine.
//   NAME=V[,V...]: input NAME holds these values (one fills every element of its declared static shape), as ctxgen
//   --set binds it; the other inputs are read in order from INPUT_DIR, as the compiled model, which lacks NAME, saves them.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');
const { readNpy: readNpyArray, writeNpy } = require('./npy');

const TYPES = { '<f4': 'float32', '<f8': 'float64', '<i8': 'int64', '<i4': 'int32', '|u1': 'uint8', '|i1': 'int8',
  '|b1': 'bool', '<f2': 'float16' };

function readNpy(file) {
  const { descr, shape, data } = readNpyArray(file);
  const type = TYPES[descr];
  return new ort.Tensor(type, type === 'bool' ? Uint8Array.from(data, v => v !== 0) : data, shape);
}

// A tensor for a NAME=V[,V...] binding of an input with static declared shape.
function boundTensor(meta, values) {
  const shape = meta.shape;
  if (shape.some(d => typeof d !== 'number')) throw new Error(`input '${meta.name}' has a dynamic shape: it cannot be bound`);
  const count = shape.reduce((a, b) => a * b, 1);
  if (values.length !== 1 && values.length !== count)
    throw new Error(`input '${meta.name}' has ${count} elements but ${values.length} values are given`);
  const all = Array.from({ length: count }, (_, i) => values.length === 1 ? values[0] : values[i]);
  const make = { float32: Float32Array, float64: Float64Array, int32: Int32Array, int8: Int8Array, uint8: Uint8Array,
    bool: Uint8Array }[meta.type];
  if (meta.type === 'int64') return new ort.Tensor('int64', BigInt64Array.from(all, v => BigInt(v)), shape);
  if (!make) throw new Error(`input '${meta.name}' is ${meta.type}, which a binding does not fill`);
  return new ort.Tensor(meta.type, make.from(all), shape);
}

async function main() {
  const [model, inputDir, outputDir, itersText, threadsText, spinText, ...bindings] = process.argv.slice(2);
  const iters = Number(itersText || 20);
  const threads = Number(threadsText || 1);
  const spinning = spinText === '1' ? '1' : '0';
  // ORT_GRAPH_OPTIMIZATION (disabled, basic, extended, all; default all, ORT's own default): a lower level keeps ORT
  // from rewriting a model into approximations of it (its extended level runs a float MatMul on a DequantizeLinear
  // weight as an integer product on its input rounded to 8 bits).
  const options = { graphOptimizationLevel: process.env.ORT_GRAPH_OPTIMIZATION || 'all',
    intraOpNumThreads: threads, interOpNumThreads: 1,
    extra: { session: { intra_op: { allow_spinning: spinning } } } };
  let t = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(model, options);
  const loadMs = Number(process.hrtime.bigint() - t) / 1e6;
  const feeds = {};
  for (const b of bindings) {
    const eq = b.indexOf('=');
    const meta = session.inputMetadata.find(m => m.name === b.slice(0, eq));
    if (eq <= 0 || !meta) throw new Error(`binding '${b}': no such input (inputs: ${session.inputNames.join(', ')})`);
    const values = b.slice(eq + 1).split(',').map(v => v.trim() === '' ? NaN : Number(v));
    if (values.some(Number.isNaN)) throw new Error(`binding '${b}': expected NAME=NUMBER[,NUMBER...]`);
    feeds[meta.name] = boundTensor(meta, values);
  }
  let next = 0;
  for (const name of session.inputNames)
    if (!feeds[name]) feeds[name] = readNpy(path.join(inputDir, `input_${next++}.npy`));
  const firstCpu = process.cpuUsage();
  t = process.hrtime.bigint();
  const outputs = await session.run(feeds);
  const firstMs = Number(process.hrtime.bigint() - t) / 1e6;
  const firstUsed = process.cpuUsage(firstCpu);
  // CPU time of the whole process per run (every ORT thread included), beside the wall clock: on a busy machine it
  // compares with ctxrun's median_cpu_ms where wall-clock times do not.
  const times = [];
  const cpuTimes = [];
  for (let i = 1; i < iters; ++i) {
    const cpu = process.cpuUsage();
    t = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
    const used = process.cpuUsage(cpu);
    cpuTimes.push((used.user + used.system) / 1e3);
  }
  times.sort((a, b) => a - b);
  cpuTimes.sort((a, b) => a - b);
  fs.mkdirSync(outputDir, { recursive: true });
  session.outputNames.forEach((name, i) => writeNpy(path.join(outputDir, `output_${i}.npy`), outputs[name]));
  const pick = q => times.length ? times[Math.min(times.length - 1, Math.floor(times.length * q))] : firstMs;
  const medianCpu = cpuTimes.length ? cpuTimes[Math.floor(cpuTimes.length * 0.5)] : null;
  console.log(JSON.stringify({ load_ms: loadMs, first_run_ms: firstMs, median_ms: pick(0.5), p90_ms: pick(0.9),
    first_run_cpu_ms: (firstUsed.user + firstUsed.system) / 1e3, median_cpu_ms: medianCpu }));
}
main().catch(e => { console.error(`run_ort: ${e.message}`); process.exit(1); });
