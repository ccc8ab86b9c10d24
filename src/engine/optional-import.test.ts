import { describe, expect, it } from "vitest";
import { TetherError } from "./errors.js";
import { installSpec, optionalImport, optionalRequire, packageNameOf, requireInstalled } from "./optional-import.js";

const missing = "tether-test-no-such-package";

describe("optional peers", () => {
  it("names the package of a specifier, scoped or not", () => {
    expect(packageNameOf("@modelcontextprotocol/sdk/client/index.js")).toBe("@modelcontextprotocol/sdk");
    expect(packageNameOf("tsx/esm/api")).toBe("tsx");
    expect(packageNameOf("ai")).toBe("ai");
  });

  it("asks for the major version Tether is tested with", () => {
    expect(installSpec("@ai-sdk/openai")).toBe("@ai-sdk/openai@3");
    expect(installSpec("@modelcontextprotocol/sdk")).toBe("@modelcontextprotocol/sdk@1");
    expect(installSpec(missing)).toBe(missing);
  });

  it("a missing package is missing_dependency, naming the feature and the npm install", async () => {
    const error = await optionalImport(`${missing}/sub/path.js`, "the frobnicator").then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(TetherError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ code: "missing_dependency", details: { package: missing, feature: "the frobnicator", install: `npm install ${missing}` } });
    expect((error as Error).message).toBe(`the frobnicator needs the package ${missing}, which is not installed: run \`npm install ${missing}\``);
    expect(() => optionalRequire(missing, "the frobnicator")).toThrow(expect.objectContaining({ code: "missing_dependency" }));
    expect(() => requireInstalled(missing, "the frobnicator")).toThrow(expect.objectContaining({ code: "missing_dependency" }));
  });

  it("an installed package loads", async () => {
    expect(typeof (await optionalImport<{ z: unknown }>("zod", "x")).z).toBe("object");
    expect(typeof optionalRequire<{ z: unknown }>("zod", "x").z).toBe("object");
    expect(() => requireInstalled("zod", "x")).not.toThrow();
  });
});
