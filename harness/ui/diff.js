// A line diff: the longest common subsequence of lines after the common prefix and
// suffix are set aside. Past `maxCells` (lines × lines) it gives up on alignment and
// shows the middle as removed then added.

// Returns [{op: ' ' | '-' | '+', text}] for every line of `a` and `b`.
export function diffLines(a, b, maxCells = 4_000_000) {
  const x = splitLines(a);
  const y = splitLines(b);
  let start = 0;
  while (start < x.length && start < y.length && x[start] === y[start]) start++;
  let endX = x.length;
  let endY = y.length;
  while (endX > start && endY > start && x[endX - 1] === y[endY - 1]) {
    endX--;
    endY--;
  }
  const out = x.slice(0, start).map((text) => ({op: ' ', text}));
  const mx = x.slice(start, endX);
  const my = y.slice(start, endY);
  if (mx.length * my.length > maxCells) {
    for (const text of mx) out.push({op: '-', text});
    for (const text of my) out.push({op: '+', text});
  } else {
    out.push(...lcs(mx, my));
  }
  for (const text of x.slice(endX)) out.push({op: ' ', text});
  return out;
}

function splitLines(s) {
  if (s === '') return [];
  const lines = String(s).split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

function lcs(x, y) {
  const n = x.length;
  const m = y.length;
  // table[i][j]: LCS length of x[i..] and y[j..], one flat array.
  const w = m + 1;
  const table = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      table[i * w + j] = x[i] === y[j] ? table[(i + 1) * w + j + 1] + 1
        : Math.max(table[(i + 1) * w + j], table[i * w + j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) {
      out.push({op: ' ', text: x[i]});
      i++;
      j++;
    } else if (table[(i + 1) * w + j] >= table[i * w + j + 1]) {
      out.push({op: '-', text: x[i++]});
    } else {
      out.push({op: '+', text: y[j++]});
    }
  }
  while (i < n) out.push({op: '-', text: x[i++]});
  while (j < m) out.push({op: '+', text: y[j++]});
  return out;
}

// Collapses runs of unchanged lines longer than 2 × context into a {op: '…', count}.
export function withContext(lines, context = 3) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    if (lines[i].op !== ' ') {
      out.push(lines[i++]);
      continue;
    }
    let j = i;
    while (j < lines.length && lines[j].op === ' ') j++;
    const run = j - i;
    const head = i === 0 ? 0 : context;
    const tail = j === lines.length ? 0 : context;
    if (run > head + tail + 1) {
      out.push(...lines.slice(i, i + head));
      out.push({op: '…', count: run - head - tail});
      out.push(...lines.slice(j - tail, j));
    } else {
      out.push(...lines.slice(i, j));
    }
    i = j;
  }
  return out;
}
