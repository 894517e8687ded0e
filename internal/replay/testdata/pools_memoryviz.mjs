// Writes testdata/pools_memoryviz.jsonl: PyTorch's own process_alloc_data
// (include_private_inactive=true, max_entries 15000) on every snapshot, per
// device, from MemoryViz.js and process_alloc_data.js read at run time.
//
// usage: node pools_memoryviz.mjs REF_DIR SNAPSHOT... > pools_memoryviz.jsonl
// REF_DIR holds MemoryViz.js and process_alloc_data.js as read from
// pytorch/pytorch (torch/utils/viz/); they are read at run time, never stored.
import fs from 'fs';
import os from 'os';
import path from 'path';
import {pathToFileURL} from 'url';

const [refDir] = process.argv.slice(2);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mvbench-'));
fs.copyFileSync(path.join(refDir, 'process_alloc_data.js'), path.join(tmp, 'process_alloc_data.js'));
let src = fs.readFileSync(path.join(refDir, 'MemoryViz.js'), 'utf8');
src = src.replace(/^import .*cdn\.jsdelivr.*$/mg, '');
// keep only top-level helpers we need: unpickle, unpickleData, annotate_snapshot and deps
const need = ['version_space', 'unpickle', 'unpickleData', 'annotate_snapshot', 'decode_base64'];
// take each top-level function up to the next top-level declaration
const lines = src.split('\n');
let body = '';
for (const name of need) {
  const start = lines.findIndex(l => l.startsWith('function ' + name + '('));
  if (start < 0) continue;
  let end = start + 1;
  while (end < lines.length && !/^(function |export |const |let |class |async function )/.test(lines[end])) end++;
  body += lines.slice(start, end).join('\n') + '\n';
}
const mod = `import {process_alloc_data} from "./process_alloc_data.js";\n${body}\nexport {unpickle, annotate_snapshot, process_alloc_data};\n`;
fs.writeFileSync(path.join(tmp, 'mv.mjs'), mod);
const mv = await import(pathToFileURL(path.join(tmp, 'mv.mjs')).href);

const origLog = console.log;
for (const snap of process.argv.slice(3)) {
  const buf = fs.readFileSync(snap);
  console.log = () => {};
  let out = {file: path.basename(snap), devices: {}};
  try {
    const data = mv.unpickle(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
    mv.annotate_snapshot(data);
    const nd = Math.max((data.device_traces || []).length, 1);
    for (let d = 0; d < nd; d++) {
      const r = mv.process_alloc_data(data, d, false, 15000, true);
      let mx = 0; for (const v of r.max_at_time) if (v > mx) mx = v;
      out.devices[d] = {peak_bytes: mx, elements: r.elements_length, timesteps: r.max_at_time.length};
    }
  } catch (e) { out.error = String(e); }
  console.log = origLog;
  console.log(JSON.stringify(out));
}
fs.rmSync(tmp, {recursive: true});
