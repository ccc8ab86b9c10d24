import { describe, expect, it } from "vitest";
import { mergePatchBetween } from "./vars-patch.js";

describe("mergePatchBetween", () => {
  it("sets changed keys, nulls removed ones and leaves the rest out", () => {
    expect(mergePatchBetween({ turns: 2, topic: "a", keep: true }, { turns: 3, keep: true, focus: "b" })).toEqual({ topic: null, turns: 3, focus: "b" });
  });

  it("patches nested objects key by key and replaces arrays whole", () => {
    expect(mergePatchBetween({ plan: { a: 1, b: 2 }, list: [1, 2] }, { plan: { a: 1, b: 3 }, list: [1] })).toEqual({ plan: { b: 3 }, list: [1] });
  });

  it("is empty when nothing changed", () => {
    expect(mergePatchBetween({ a: { b: [1] } }, { a: { b: [1] } })).toEqual({});
  });
});
