import { describe, expect, it } from "vitest";
import { livingProcesses, waitUntil } from "../testing/index.js";
import { runCommand } from "./command.js";

/** A `sleep` duration no other process on the machine uses, to find this test's processes in the table. */
let serial = 0;
function uniqueSleep(): string {
  serial += 1;
  return `300.${process.pid}${serial}`;
}

const sleeping = (duration: string) => livingProcesses((row) => row.args === `sleep ${duration}`);

describe("runCommand", () => {
  it("stops the whole process group on abort: sh -c 'sleep & sleep' leaves no process alive", async () => {
    const duration = uniqueSleep();
    const abort = new AbortController();
    let pgid = 0;
    const running = runCommand({ shell: `sleep ${duration} & sleep ${duration}`, signal: abort.signal, onSpawn: (pid) => (pgid = pid) });
    const before = await waitUntil(() => (pgid && sleeping(duration).length === 2 ? sleeping(duration) : undefined), { what: "both sleeps to run" });
    expect(before.map((row) => row.pgid)).toEqual([pgid, pgid]);

    abort.abort("pause");
    const result = await running;
    expect(result).toMatchObject({ aborted: true, killed: false, exitCode: null });
    expect(result.signal).toBe("SIGTERM");
    expect(sleeping(duration)).toEqual([]);
    expect(livingProcesses((row) => row.pgid === pgid)).toEqual([]);
  });

  it("SIGKILLs a group that ignores SIGTERM once the grace period is over", async () => {
    const abort = new AbortController();
    let pgid = 0;
    let output = "";
    const running = runCommand({
      shell: "trap 'echo got-term' TERM; echo ready; while :; do sleep 0.05; done",
      signal: abort.signal,
      graceMs: 1000,
      onSpawn: (pid) => (pgid = pid),
      onOutput: (_stream, text) => (output += text),
    });
    await waitUntil(() => output.includes("ready"), { what: "the shell to start" });
    abort.abort("cancel");
    const result = await running;
    // It got SIGTERM first and lived on (its trap printed), then SIGKILL ended it.
    expect(result.stdout).toContain("got-term");
    expect(result).toMatchObject({ aborted: true, killed: true, signal: "SIGKILL", exitCode: null });
    expect(livingProcesses((row) => row.pgid === pgid)).toEqual([]);
  });

  it("stops what a command left running in its group when it exits by itself", async () => {
    const duration = uniqueSleep();
    let pgid = 0;
    const result = await runCommand({ shell: `sleep ${duration} & echo started`, onSpawn: (pid) => (pgid = pid) });
    expect(result).toMatchObject({ exitCode: 0, signal: null, aborted: false, killed: false, stdout: "started\n" });
    expect(sleeping(duration)).toEqual([]);
    expect(livingProcesses((row) => row.pgid === pgid)).toEqual([]);
  });

  it("streams output as it comes and keeps the last maxOutputBytes of each stream", async () => {
    const streamed = { stdout: "", stderr: "" };
    const result = await runCommand({
      command: process.execPath,
      args: ["-e", "process.stdout.write('é'.repeat(3000)); process.stderr.write('warning'); process.exitCode = 3"],
      maxOutputBytes: 1001,
      onOutput: (stream, text) => (streamed[stream] += text),
    });
    expect(streamed).toEqual({ stdout: "é".repeat(3000), stderr: "warning" });
    // 1001 bytes end in the middle of a two-byte character: the kept text starts on a whole one.
    expect(result).toMatchObject({ exitCode: 3, stdout: "é".repeat(500), stdoutBytes: 6000, stderr: "warning", stderrBytes: 7, truncated: true, aborted: false });
  });

  it("runs an executable with arguments, without a shell, in cwd with env", async () => {
    const result = await runCommand({ command: "sh", args: ["-c", 'printf "%s %s" "$PWD" "$GREETING"', "ignored"], cwd: "/tmp", env: { PATH: process.env.PATH, GREETING: "hi $HOME" } });
    expect(result).toMatchObject({ exitCode: 0, stdout: "/tmp hi $HOME" });
  });

  it("does not start a command whose signal has already fired", async () => {
    const abort = new AbortController();
    abort.abort("cancel");
    const marker = uniqueSleep();
    const result = await runCommand({ shell: `sleep ${marker}`, signal: abort.signal });
    expect(result).toMatchObject({ aborted: true, exitCode: null, stdoutBytes: 0 });
    expect(sleeping(marker)).toEqual([]);
  });

  it("stops the command when onOutput throws, and rejects with that error once the group is gone", async () => {
    const duration = uniqueSleep();
    const running = runCommand({
      shell: `sleep ${duration} & echo hello; wait`,
      onOutput: () => {
        throw new Error("the journal is gone");
      },
    });
    await expect(running).rejects.toThrow("the journal is gone");
    expect(sleeping(duration)).toEqual([]);
  });

  it("refuses a spec it cannot run, with a message that says how to fix it", async () => {
    await expect(runCommand({ command: " " })).rejects.toMatchObject({ code: "invalid_input", message: expect.stringContaining("must name an executable") });
    await expect(runCommand({ command: "ls", shell: "ls" } as never)).rejects.toMatchObject({ code: "invalid_input", message: expect.stringContaining("not both") });
    await expect(runCommand({ shell: "true", graceMs: -1 })).rejects.toMatchObject({ code: "invalid_input", message: expect.stringContaining("graceMs") });
    await expect(runCommand({ command: "tether-no-such-program" })).rejects.toThrow(/could not start "tether-no-such-program".*ENOENT/);
  });
});
