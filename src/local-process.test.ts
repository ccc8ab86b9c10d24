import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { localProcessProbe } from "./local-process.js";

describe("localProcessProbe", () => {
  it("names this process by host, pid and a nonce shared by every runtime of the process", () => {
    const a = localProcessProbe();
    const b = localProcessProbe();
    expect(a.self.pid).toBe(process.pid);
    expect(a.self).toEqual(b.self);
    // Runtimes of one process never take each other's runs as a dead holder's.
    expect(a.gone(b.self)).toBe(false);
  });

  it("tells a process on this host that exited, and an earlier process that had this pid, from one that lives", async () => {
    const probe = localProcessProbe();
    const child = spawn(process.execPath, ["-e", "setInterval(() => undefined, 1000)"], { stdio: "ignore" });
    const pid = child.pid!;
    const holder = { ...probe.self, pid, nonce: "child" };
    expect(probe.gone(holder)).toBe(false);
    const exited = new Promise((resolve) => child.on("exit", resolve));
    child.kill("SIGKILL");
    await exited;
    expect(probe.gone(holder)).toBe(true);
    expect(probe.gone({ ...probe.self, nonce: "an-earlier-process" })).toBe(true);
  });

  it("never judges a holder on another host (its pids mean nothing here)", () => {
    const probe = localProcessProbe();
    expect(probe.gone({ host: `${probe.self.host}-elsewhere`, pid: 2 ** 22 + 7, nonce: "x" })).toBe(false);
  });
});
