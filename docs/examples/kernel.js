// A verification kernel in Node.js speaking specverify's JSON-lines protocol (docs/protocol.md).
//
//   specverify audit --cmd "node docs/examples/kernel.js"
//
// One JSON object per line on stdin, one reply per line on stdout; nothing else may be printed
// on stdout (use stderr for logs). The rule is the standard one: accept draft x with probability
// min(1, p(x)/q(x)); at the first rejection emit a token from (p - q)+ and stop; if every draft is
// accepted, emit a bonus token from the last target row.
"use strict";
const readline = require("readline");

// A small seeded generator (mulberry32): the same seed gives the same tokens.
function mulberry32(seed) {
  let a = seed >>> 0;
  return function () {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Index drawn from unnormalised weights w with one uniform u.
function sample(w, u) {
  let total = 0;
  for (const x of w) total += x;
  const threshold = u * total;
  let acc = 0;
  for (let i = 0; i < w.length; i++) {
    acc += w[i];
    if (acc > threshold && w[i] > 0) return i;
  }
  for (let i = w.length - 1; i >= 0; i--) if (w[i] > 0) return i;
  return w.length - 1;
}

// One round: drafts x[0..g-1], draft rows qs[i] (q(. | prefix + x[:i])), target rows ps[0..g].
function verifyRound(x, qs, ps, rand) {
  const g = x.length;
  const out = [];
  for (let i = 0; i < g; i++) {
    const p = ps[i][x[i]];
    const q = qs[i][x[i]];
    if (rand() < Math.min(1, p / q)) {
      out.push(x[i]);
      continue;
    }
    const residual = ps[i].map((pi, j) => Math.max(0, pi - qs[i][j]));
    out.push(sample(residual, rand()));
    while (out.length < g + 1) out.push(-1); // pad after the emitted tokens
    return out;
  }
  out.push(sample(ps[g], rand()));
  return out;
}

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch (e) {
    console.log(JSON.stringify({ error: "request is not JSON: " + e.message }));
    return;
  }
  if (msg.op === "hello") {
    console.log(JSON.stringify({ name: "node-example-kernel", one_hot: false }));
  } else if (msg.op === "verify") {
    const rand = mulberry32(msg.seed);
    const tokens = msg.draft_tokens.map((x, b) => verifyRound(x, msg.draft_probs[b], msg.target_probs[b], rand));
    console.log(JSON.stringify({ tokens }));
  } else {
    console.log(JSON.stringify({ error: "unknown op " + msg.op }));
  }
});
