import assert from "node:assert/strict";
import { test } from "node:test";
import { range, rangeLength } from "../src/range.js";

test("range includes both ends", () => {
  assert.deepEqual(range(1, 3), [1, 2, 3]);
});

test("range steps", () => {
  assert.deepEqual(range(0, 4, 2), [0, 2, 4]);
});

test("rangeLength counts the range", () => {
  assert.equal(rangeLength(1, 3), 3);
});
