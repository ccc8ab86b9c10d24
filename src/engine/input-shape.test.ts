import { describe, expect, it } from "vitest";
import { z } from "zod";
import { describeShape } from "./input-shape.js";

describe("describeShape", () => {
  it("describes what an agent's input schema accepts, as a person would write it", () => {
    expect(describeShape(z.union([z.string().min(1), z.object({ prompt: z.string() }).strict()]))).toBe("string | { prompt: string }");
    expect(describeShape(z.object({ topic: z.string(), depth: z.number().int().optional(), tags: z.array(z.string()) }))).toBe("{ topic: string; depth?: integer; tags: string[] }");
    expect(describeShape(z.enum(["fast", "deep"]))).toBe('"fast" | "deep"');
    expect(describeShape(z.array(z.union([z.string(), z.number()])))).toBe("(string | number)[]");
  });
});
