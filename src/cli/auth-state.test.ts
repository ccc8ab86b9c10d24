import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const tsxLoader = createRequire(import.meta.url).resolve("tsx");
const authState = fileURLToPath(new URL("./auth-state.ts", import.meta.url));

/** A process that records the auth state of `db` `times` times, its store holding the token `id`. */
function recorder(db: string, id: string, times: number): Promise<{ code: number | null; stderr: string }> {
  const script = `
    const { recordAuthState } = await import(${JSON.stringify(authState)});
    const store = { listTokens: async () => [{ id: ${JSON.stringify(id)}, revokedAt: null }] };
    for (let i = 0; i < ${times}; i++) await recordAuthState(${JSON.stringify(db)}, store);
  `;
  const child = spawn(process.execPath, ["--import", tsxLoader, "--input-type=module", "-e", script], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => child.on("exit", (code) => resolve({ code, stderr })));
}

describe("the auth state record", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it("is written by two processes at once without either failing, and is whole afterwards", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tether-auth-state-"));
    dirs.push(dir);
    const db = join(dir, "tether.db");
    // Two `tether token create` at once: each writes the record after its token.
    const results = await Promise.all([recorder(db, "tok_a", 400), recorder(db, "tok_b", 400)]);
    for (const result of results) expect(result, result.stderr).toMatchObject({ code: 0 });
    const record = JSON.parse(readFileSync(`${db}.auth.json`, "utf8")) as { tokenIds: string[] };
    expect(["tok_a", "tok_b"]).toContain(record.tokenIds[0]);
    // No temporary file is left beside it.
    expect(readdirSync(dir)).toEqual(["tether.db.auth.json"]);
  }, 60_000);

  it("leaves no temporary file behind when the record cannot be written", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tether-auth-state-"));
    dirs.push(dir);
    const db = join(dir, "tether.db");
    // A directory where the record goes: the rename over it fails.
    mkdirSync(`${db}.auth.json`);
    const { recordAuthState } = await import("./auth-state.js");
    await expect(recordAuthState(db, { listTokens: async () => [] })).rejects.toThrow();
    expect(readdirSync(dir)).toEqual(["tether.db.auth.json"]);
  });
});
