import { describe, expect, expectTypeOf, it } from "vitest";
import { TetherClient } from "../../src/client/tether-client.js";
import { Runtime } from "../../src/engine/runtime.js";

/** The public methods of a class (private ones are not in `keyof`). */
type Methods<T> = { [K in keyof T]-?: T[K] extends (...args: never[]) => unknown ? K : never }[keyof T];

/** One name per operation: what both the library and the HTTP client do is called the same. */
const shared = [
  "agents",
  "start",
  "list",
  "get",
  "journal",
  "state",
  "cancelPreview",
  "pause",
  "resume",
  "cancel",
  "editState",
  "say",
  "approve",
  "reject",
  "fork",
  "halt",
  "unhalt",
  "halts",
  "storage",
  "prune",
] as const;

/** Only in-process: running runs, and what reads the store directly. */
const libraryOnly = [
  "startWorker",
  "stopWorker",
  "close",
  "effects",
  "commands",
  "expireApprovals",
  "subscribe",
  "waitFor",
  "isExecuting",
  "settled",
  "editPaused", // deprecated alias of editState
] as const;

/** Only over HTTP: the server's health, paging and event streams. */
const clientOnly = ["health", "journalAll", "events", "runChanges"] as const;

type Shared = (typeof shared)[number];

describe("the library and the HTTP client name their methods alike", () => {
  it("every public method is shared or listed as one side's own", () => {
    expectTypeOf<Methods<Runtime> & Methods<TetherClient>>().toEqualTypeOf<Shared>();
    expectTypeOf<Exclude<Methods<Runtime>, Shared>>().toEqualTypeOf<(typeof libraryOnly)[number]>();
    expectTypeOf<Exclude<Methods<TetherClient>, Shared>>().toEqualTypeOf<(typeof clientOnly)[number]>();
  });

  it("both classes have each shared method, and the client's has none the library lacks", () => {
    const runtimeMethods = new Set(Object.getOwnPropertyNames(Runtime.prototype));
    const clientMethods = new Set(Object.getOwnPropertyNames(TetherClient.prototype));
    for (const name of shared) {
      expect(typeof (Runtime.prototype as unknown as Record<string, unknown>)[name], `Runtime.${name}`).toBe("function");
      expect(typeof (TetherClient.prototype as unknown as Record<string, unknown>)[name], `TetherClient.${name}`).toBe("function");
    }
    for (const name of clientOnly) expect(runtimeMethods.has(name), `Runtime.${name}`).toBe(false);
    for (const name of libraryOnly) expect(clientMethods.has(name), `TetherClient.${name}`).toBe(false);
  });

  it("what the client's options say, the library's options take under the same names", () => {
    type Options<F> = F extends (...args: infer A) => unknown ? A : never;
    // Each client call's arguments (options included) are valid arguments of the library's method of that name.
    expectTypeOf<Options<TetherClient["start"]>>().toExtend<Options<Runtime["start"]>>();
    expectTypeOf<Options<TetherClient["list"]>>().toExtend<Options<Runtime["list"]>>();
    expectTypeOf<Options<TetherClient["get"]>>().toExtend<Options<Runtime["get"]>>();
    expectTypeOf<Options<TetherClient["journal"]>>().toExtend<Options<Runtime["journal"]>>();
    expectTypeOf<Options<TetherClient["state"]>>().toExtend<Options<Runtime["state"]>>();
    expectTypeOf<Options<TetherClient["cancelPreview"]>>().toExtend<Options<Runtime["cancelPreview"]>>();
    expectTypeOf<Options<TetherClient["pause"]>>().toExtend<Options<Runtime["pause"]>>();
    expectTypeOf<Options<TetherClient["resume"]>>().toExtend<Options<Runtime["resume"]>>();
    expectTypeOf<Options<TetherClient["cancel"]>>().toExtend<Options<Runtime["cancel"]>>();
    expectTypeOf<Options<TetherClient["editState"]>>().toExtend<Options<Runtime["editState"]>>();
    expectTypeOf<Options<TetherClient["say"]>>().toExtend<Options<Runtime["say"]>>();
    expectTypeOf<Options<TetherClient["approve"]>>().toExtend<Options<Runtime["approve"]>>();
    expectTypeOf<Options<TetherClient["reject"]>>().toExtend<Options<Runtime["reject"]>>();
    expectTypeOf<Options<TetherClient["fork"]>>().toExtend<Options<Runtime["fork"]>>();
    expectTypeOf<Options<TetherClient["halt"]>>().toExtend<Options<Runtime["halt"]>>();
    expectTypeOf<Options<TetherClient["unhalt"]>>().toExtend<Options<Runtime["unhalt"]>>();
    expectTypeOf<Options<TetherClient["storage"]>>().toExtend<Options<Runtime["storage"]>>();
    expectTypeOf<Options<TetherClient["prune"]>>().toExtend<Options<Runtime["prune"]>>();
  });
});
