// .npy files (format version 1/2, little-endian, C order) as { descr, shape, data }: the reader and writer run_ort.js,
// generate_ort.js and the test helpers share.
'use strict';
const fs = require('fs');

const ARRAYS = { '<f4': Float32Array, '<f8': Float64Array, '<i8': BigInt64Array, '<i4': Int32Array, '|u1': Uint8Array,
  '|i1': Int8Array, '|b1': Uint8Array, '<f2': Uint16Array };

function readNpy(file) {
  const buf = fs.readFileSync(file);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const Ctor = ARRAYS[descr];
  if (!Ctor) throw new Error(`${file}: element type '${descr}' is not read here`);
  const bytes = buf.subarray(start + headerLen);
  const copy = new Uint8Array(bytes.length); copy.set(bytes);
  return { descr, shape, data: new Ctor(copy.buffer, 0, bytes.length / Ctor.BYTES_PER_ELEMENT) };
}

// Writes { type, dims, data } (an onnxruntime-node Tensor, say; type as ONNX Runtime names it) as a version 1 .npy.
function writeNpy(file, tensor) {
  const descr = { float32: '<f4', float64: '<f8', int64: '<i8', int32: '<i4', uint8: '|u1', int8: '|i1', bool: '|b1',
    float16: '<f2' }[tensor.type];
  if (!descr) throw new Error(`${file}: element type '${tensor.type}' is not written here`);
  const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1'); head[6] = 1; head[7] = 0; head.writeUInt16LE(header.length, 8);
  const data = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), data]));
}

module.exports = { readNpy, writeNpy };
