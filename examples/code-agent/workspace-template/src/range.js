/** The integers from `start` to `end`, both included, `step` apart. */
export function range(start, end, step = 1) {
  if (step <= 0) throw new RangeError("step must be positive");
  const out = [];
  for (let i = start; i < end; i += step) out.push(i);
  return out;
}

/** How many integers `range(start, end, step)` returns. */
export function rangeLength(start, end, step = 1) {
  return range(start, end, step).length;
}
