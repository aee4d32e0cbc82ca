// .npy files (format version 1/2, little-endian, C order) as { descr, shape, data }: the reader run_ort.js and the
// test helpers share.
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

module.exports = { readNpy };
