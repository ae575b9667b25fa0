// A verification kernel in Node.js speaking specverify's JSON-lines protocol (full rule).
// Usage: node verify_kernel.js [--bug always_accept]
const readline = require("readline");
const bug = process.argv.includes("--bug") ? process.argv[process.argv.indexOf("--bug") + 1] : null;

function mulberry32(a) {
  return function () {
    a |= 0; a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
function sample(w, u) {
  let total = 0; for (const x of w) total += x;
  let acc = 0; const thr = u * total;
  for (let i = 0; i < w.length; i++) { acc += w[i]; if (acc > thr && w[i] > 0) return i; }
  for (let i = w.length - 1; i >= 0; i--) if (w[i] > 0) return i;
  return w.length - 1;
}
function verifyRound(x, qs, ps, rand) {
  const g = x.length, out = [];
  for (let i = 0; i < g; i++) {
    const p = ps[i][x[i]], q = qs[i][x[i]];
    if (bug === "always_accept" || rand() < p / q) { out.push(x[i]); continue; }
    let r = ps[i].map((pi, j) => Math.max(0, pi - qs[i][j]));
    if (!r.some((v) => v > 0)) r = ps[i];
    out.push(sample(r, rand()));
    while (out.length < g + 1) out.push(-1);
    return out;
  }
  out.push(sample(ps[g], rand()));
  return out;
}
const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  const msg = JSON.parse(line);
  if (msg.op === "hello") { console.log(JSON.stringify({ name: "node-kernel" + (bug ? "-" + bug : ""), one_hot: false })); return; }
  if (msg.op !== "verify") { console.log(JSON.stringify({ error: "unknown op " + msg.op })); return; }
  const rand = mulberry32(msg.seed);
  const tokens = msg.draft_tokens.map((x, b) => verifyRound(x, msg.draft_probs[b], msg.target_probs[b], rand));
  console.log(JSON.stringify({ tokens }));
});
