import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TetherError } from "../engine/errors.js";
import type { JsonObject } from "../engine/json.js";
import { restoreState, SnapshotWriter } from "../engine/snapshot.js";
import type { AgentState } from "../engine/state.js";
import type { CommandRecord, EffectWrite, JournalInput, NewRun, RunFilter, RunRecord, Store } from "../engine/store.js";

export interface StoreUnderTest {
  store: Store;
  cleanup(): Promise<void>;
}

/**
 * The store contract (`src/engine/store.ts`) as vitest cases. Every store runs it:
 *
 *     storeConformance("sqlite", async () => { const store = ...; return { store, cleanup } });
 *
 * `factory` is called once per case and must return an empty store.
 */
export function storeConformance(name: string, factory: () => Promise<StoreUnderTest>): void {
  describe(`store conformance: ${name}`, () => {
    let subject: StoreUnderTest;
    let store: Store;
    let counter = 0;

    beforeEach(async () => {
      counter = 0;
      subject = await factory();
      store = subject.store;
    });
    afterEach(async () => {
      await subject.cleanup();
    });

    const baseTime = 1_700_000_000_000;

    function newRun(overrides: Partial<NewRun> = {}): NewRun {
      counter += 1;
      return {
        id: `run_${String(counter).padStart(4, "0")}`,
        agent: "agent-a",
        agentVersion: "1",
        owner: "alice",
        status: "queued",
        input: { prompt: "go" },
        model: null,
        budgets: { maxSteps: 10 },
        forkedFrom: null,
        step: 0,
        createdAt: baseTime + counter,
        ...overrides,
      };
    }

    function state(messages: number, vars: JsonObject = { n: 0 }): AgentState {
      return { messages: Array.from({ length: messages }, (_, i) => ({ role: "user" as const, content: `message ${i}` })), vars };
    }

    async function create(overrides: Partial<NewRun> = {}, initial: AgentState = state(1)): Promise<{ run: RunRecord; writer: SnapshotWriter }> {
      const run = newRun(overrides);
      const { writer, write } = SnapshotWriter.forNewRun(initial, run.createdAt, run.step);
      const record = await store.createRun(run, write, [{ type: "run.created", at: run.createdAt, data: { agent: run.agent } }]);
      writer.commit();
      return { run: record, writer };
    }

    function entry(type: JournalInput["type"], at: number, data: JsonObject = {}, callSeq?: number): JournalInput {
      return { type, at, data, ...(callSeq === undefined ? {} : { callSeq }) };
    }

    /** The entry a step's snapshot is written with (a store may keep the snapshot on it). */
    function stepEntry(step: number, at: number): JournalInput {
      return entry("call.completed", at, { step }, step);
    }

    function command(runId: string | null, overrides: Partial<CommandRecord> = {}): CommandRecord {
      counter += 1;
      return {
        id: `cmd_${String(counter).padStart(4, "0")}`,
        runId,
        type: "pause",
        actor: "alice",
        reason: "lunch",
        payload: { mode: "immediate" },
        createdAt: baseTime + counter,
        appliedAt: null,
        outcome: null,
        ...overrides,
      };
    }

    function effect(callSeq: number, overrides: Partial<EffectWrite> = {}): EffectWrite {
      return { callSeq, tool: "publish", input: { id: `d${callSeq}` }, result: { url: `u${callSeq}` }, state: "done", attempts: 0, error: null, updatedAt: baseTime + callSeq, ...overrides };
    }

    async function expectCode(promise: Promise<unknown>, code: string): Promise<void> {
      const error = await promise.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(TetherError.isInstance(error), `expected a TetherError with code ${code}, got ${String(error)}`).toBe(true);
      expect((error as TetherError).code).toBe(code);
    }

    describe("runs", () => {
      it("creates a run that reads back as created, with its first journal entry and snapshot", async () => {
        const { run } = await create();
        expect(run).toMatchObject({ status: "queued", agent: "agent-a", owner: "alice", step: 0, epoch: 0, version: 1, journalSeq: 1, snapshotSeq: 1, lease: null, inflight: null });
        expect(await store.getRun(run.id)).toEqual(run);
        const journal = await store.readJournal(run.id);
        expect(journal).toEqual([{ runId: run.id, seq: 1, type: "run.created", at: run.createdAt, data: { agent: "agent-a" } }]);
      });

      it("creates a run claimed (`claim`): running from its creation, its lease at epoch 1, a worker's fenced step writes on, and no other worker claims it while the lease lives", async () => {
        const createdAt = baseTime + 50;
        const claim = { workerId: "w1", until: createdAt + 30_000, holder: { host: "h", pid: 7, nonce: "n1" } };
        const run = newRun({ status: "running", claim, createdAt });
        const { writer, write } = SnapshotWriter.forNewRun(state(1), createdAt);
        const record = await store.createRun(run, write, [entry("run.created", createdAt, { agent: run.agent }), entry("status", createdAt, { from: "queued", to: "running" })]);
        writer.commit();
        expect(record).toMatchObject({ status: "running", runningSince: createdAt, epoch: 1, lease: { ...claim, epoch: 1 }, version: 1, journalSeq: 2, snapshotSeq: 1 });
        expect(await store.getRun(run.id)).toEqual(record);
        expect((await store.readJournal(run.id)).map((e) => [e.seq, e.type])).toEqual([
          [1, "run.created"],
          [2, "status"],
        ]);
        // The snapshot rides on the last entry of the creation.
        const stored = await store.loadState(run.id);
        expect(stored.head).toMatchObject({ seq: 1, step: 0, messageCount: 1 });
        if (stored.head.entrySeq !== undefined) expect(stored.head.entrySeq).toBe(2);
        expect(restoreState(run.id, stored).state).toEqual(state(1));
        expect((await store.findClaimable(createdAt + 1, 10)).map((r) => r.id)).not.toContain(run.id);
        expect((await store.findClaimable(claim.until + 1, 10)).map((r) => r.id)).toContain(run.id);
        const step = await store.update({ runId: run.id, expect: { epoch: 1 }, set: { step: 1 }, journal: [stepEntry(1, createdAt + 1)], snapshot: writer.prepare(state(2), 1, createdAt + 1) });
        expect(step.ok).toBe(true);
        // Another worker's claim while the lease lives is refused.
        const taken = await store.update({ runId: run.id, expect: { leaseFree: { now: createdAt + 2, workerId: "w2" } }, claim: { workerId: "w2", until: createdAt + 60_000 } });
        expect(taken.ok).toBe(false);
      });

      it("returns undefined for an unknown run id", async () => {
        expect(await store.getRun("run_missing")).toBeUndefined();
      });

      it("hands out copies: changing a returned record changes nothing stored", async () => {
        const { run } = await create();
        const read = (await store.getRun(run.id))!;
        read.status = "failed";
        read.usage.inputTokens = 99;
        expect(await store.getRun(run.id)).toEqual(run);
      });

      it("keeps what it wrote whatever is done to a record an update returned", async () => {
        const { run } = await create();
        const result = await store.update({ runId: run.id, set: { step: 1 }, journal: [entry("status", baseTime + 1)] });
        expect(result.ok).toBe(true);
        try {
          (result.run as { step: number }).step = 99;
          (result.run.usage as { inputTokens: number }).inputTokens = 5;
        } catch {
          // A store may hand out frozen records.
        }
        const next = await store.update({ runId: run.id, set: { statusReason: "checked" }, journal: [entry("status", baseTime + 2)] });
        expect(next.run).toMatchObject({ step: 1, statusReason: "checked", usage: run.usage });
        expect(await store.getRun(run.id)).toMatchObject({ step: 1, statusReason: "checked", usage: run.usage });
      });

      it("lists runs newest first, filtered by status, agent, updatedAfter and limit; their ids and agents alike", async () => {
        // The ids of the runs a filter lists; the listing of ids and agents alone names the same.
        const listed = async (filter?: RunFilter) => {
          const runs = await store.listRuns(filter);
          expect(await store.listRunRefs(filter)).toEqual(runs.map((r) => ({ id: r.id, agent: r.agent })));
          return runs.map((r) => r.id);
        };
        const a = (await create({ agent: "agent-a" })).run;
        const b = (await create({ agent: "agent-b" })).run;
        const c = (await create({ agent: "agent-a" })).run;
        await store.update({ runId: b.id, set: { status: "running" }, journal: [entry("status", baseTime + 1000, { from: "queued", to: "running" })] });
        expect(await listed()).toEqual([c.id, b.id, a.id]);
        expect(await listed({ status: ["running"] })).toEqual([b.id]);
        expect(await listed({ status: ["queued", "running"] })).toEqual([c.id, b.id, a.id]);
        expect(await listed({ agent: "agent-a" })).toEqual([c.id, a.id]);
        expect(await listed({ agent: "agent-a", status: ["running"] })).toEqual([]);
        expect(await listed({ limit: 2 })).toEqual([c.id, b.id]);
        expect(await listed({ updatedAfter: baseTime + 999 })).toEqual([b.id]);
        await store.update({ runId: a.id, set: { status: "paused", statusReason: "approval_required" }, journal: [entry("status", baseTime + 1001, { to: "paused" })] });
        await store.update({ runId: c.id, set: { status: "paused", statusReason: "paused by bob" }, journal: [entry("status", baseTime + 1002, { to: "paused" })] });
        expect(await listed({ status: ["paused"], statusReason: "approval_required" })).toEqual([a.id]);
        expect(await listed({ statusReason: "nobody" })).toEqual([]);
      });
    });

    describe("update", () => {
      it("applies set, journal and version together and moves updatedAt to the newest entry", async () => {
        const { run } = await create();
        const result = await store.update({
          runId: run.id,
          set: { status: "running", statusReason: "claimed", runningSince: baseTime + 50 },
          journal: [entry("status", baseTime + 50, { from: "queued", to: "running" }), entry("call.started", baseTime + 60, { name: "m" }, 1)],
        });
        expect(result.ok).toBe(true);
        if (!result.ok) return;
        expect(result.run).toMatchObject({ status: "running", statusReason: "claimed", runningSince: baseTime + 50, version: 2, journalSeq: 3, updatedAt: baseTime + 60 });
        expect(result.journal.map((e) => [e.seq, e.type, e.callSeq])).toEqual([
          [2, "status", undefined],
          [3, "call.started", 1],
        ]);
        expect(await store.getRun(run.id)).toEqual(result.run);
      });

      it("refuses an update on an unknown run with run_not_found", async () => {
        await expectCode(store.update({ runId: "run_missing", set: { status: "running" } }), "run_not_found");
      });

      it("claims: the epoch goes up by one and the lease names the worker", async () => {
        const { run } = await create();
        const first = await store.update({ runId: run.id, claim: { workerId: "w1", until: baseTime + 5000 } });
        expect(first.ok && first.run.epoch).toBe(1);
        expect(first.run.lease).toEqual({ workerId: "w1", epoch: 1, until: baseTime + 5000 });
        const second = await store.update({ runId: run.id, claim: { workerId: "w2", until: baseTime + 9000 } });
        expect(second.run.epoch).toBe(2);
        expect(second.run.lease).toEqual({ workerId: "w2", epoch: 2, until: baseTime + 9000 });
      });

      it("renews a lease only while the worker holds it: a renewal never brings back a lease a pause let go", async () => {
        const { run } = await create();
        await store.update({ runId: run.id, claim: { workerId: "w1", until: baseTime + 5000 } });
        const renewed = await store.update({ runId: run.id, renewLease: { workerId: "w1", until: baseTime + 9000 } });
        expect(renewed.run.lease).toEqual({ workerId: "w1", epoch: 1, until: baseTime + 9000 });
        expect((await store.update({ runId: run.id, renewLease: { workerId: "w2", until: baseTime + 20_000 } })).run.lease?.until).toBe(baseTime + 9000);
        await store.update({ runId: run.id, set: { status: "paused", lease: null } });
        // A renewal that was decided before the pause landed.
        const late = await store.update({ runId: run.id, expect: { epoch: 1 }, renewLease: { workerId: "w1", until: baseTime + 12_000 } });
        expect(late.run.lease).toBeNull();
        expect((await store.findClaimable(baseTime, 10)).map((r) => r.id)).not.toContain(run.id);
        expect((await store.getRun(run.id))!.lease).toBeNull();
      });

      describe("writes nothing when an expectation fails", () => {
        async function expectUntouched(runId: string, before: RunRecord, journalBefore: number): Promise<void> {
          expect(await store.getRun(runId)).toEqual(before);
          expect(await store.readJournal(runId)).toHaveLength(journalBefore);
          expect((await store.loadState(runId)).head.seq).toBe(before.snapshotSeq);
          expect(await store.listEffects(runId)).toEqual([]);
          expect(await store.listCommands(runId)).toEqual([]);
        }

        async function failingUpdate(runId: string, expectation: NonNullable<Parameters<Store["update"]>[0]["expect"]>, writer: SnapshotWriter) {
          return store.update({
            runId,
            expect: expectation,
            set: { status: "paused", step: 1 },
            journal: [entry("status", baseTime + 100, { from: "running", to: "paused" })],
            snapshot: writer.prepare(state(3, { n: 1 }), 1, baseTime + 100),
            effects: [effect(1)],
            insertCommand: command(runId),
          });
        }

        it("on status", async () => {
          const { run, writer } = await create();
          const result = await failingUpdate(run.id, { status: ["running", "pausing"] }, writer);
          expect(result.ok).toBe(false);
          expect(result.run).toEqual(run);
          await expectUntouched(run.id, run, 1);
        });

        it("on epoch", async () => {
          const { run, writer } = await create();
          const claimed = (await store.update({ runId: run.id, claim: { workerId: "w1", until: baseTime + 10 } })).run;
          const result = await failingUpdate(run.id, { epoch: 0 }, writer);
          expect(result.ok).toBe(false);
          await expectUntouched(run.id, claimed, 1);
        });

        it("on version", async () => {
          const { run, writer } = await create();
          const moved = (await store.update({ runId: run.id, set: { statusReason: "x" } })).run;
          const result = await failingUpdate(run.id, { version: run.version }, writer);
          expect(result.ok).toBe(false);
          expect(result.run.version).toBe(moved.version);
          await expectUntouched(run.id, moved, 1);
        });

        it("on leaseFree while another worker holds a live lease", async () => {
          const { run, writer } = await create();
          const held = (await store.update({ runId: run.id, claim: { workerId: "w1", until: baseTime + 5000 } })).run;
          const result = await failingUpdate(run.id, { leaseFree: { now: baseTime + 4999, workerId: "w2" } }, writer);
          expect(result.ok).toBe(false);
          await expectUntouched(run.id, held, 1);
        });
      });

      it("passes leaseFree for the lease holder itself, after the lease expired, and with no lease", async () => {
        const { run } = await create();
        expect((await store.update({ runId: run.id, expect: { leaseFree: { now: baseTime, workerId: "w2" } }, set: {} })).ok).toBe(true);
        await store.update({ runId: run.id, claim: { workerId: "w1", until: baseTime + 5000 } });
        expect((await store.update({ runId: run.id, expect: { leaseFree: { now: baseTime + 100, workerId: "w1" } }, set: {} })).ok).toBe(true);
        expect((await store.update({ runId: run.id, expect: { leaseFree: { now: baseTime + 5001, workerId: "w2" } }, set: {} })).ok).toBe(true);
      });

      it("is atomic: when one part cannot be written, no part is", async () => {
        const { run, writer } = await create();
        const duplicate = command(run.id);
        await store.insertCommand(duplicate);
        const before = (await store.getRun(run.id))!;
        await expect(
          store.update({
            runId: run.id,
            set: { status: "running" },
            journal: [entry("status", baseTime + 100, { from: "queued", to: "running" })],
            snapshot: writer.prepare(state(2), 1, baseTime + 100),
            effects: [effect(1)],
            insertCommand: duplicate,
          }),
        ).rejects.toThrow();
        expect(await store.getRun(run.id)).toEqual(before);
        expect(await store.readJournal(run.id)).toHaveLength(1);
        expect((await store.loadState(run.id)).messages).toHaveLength(1);
        expect(await store.listEffects(run.id)).toEqual([]);
      });
    });

    describe("journal", () => {
      it("numbers entries 1, 2, 3 … per run in write order, across updates", async () => {
        const { run } = await create();
        const other = (await create()).run;
        await store.update({ runId: run.id, journal: [entry("status", baseTime + 1), entry("call.started", baseTime + 2, {}, 1)] });
        await store.update({ runId: other.id, journal: [entry("status", baseTime + 3)] });
        await store.update({ runId: run.id, journal: [entry("call.completed", baseTime + 4, { ok: true }, 1)] });
        const journal = await store.readJournal(run.id);
        expect(journal.map((e) => [e.seq, e.type])).toEqual([
          [1, "run.created"],
          [2, "status"],
          [3, "call.started"],
          [4, "call.completed"],
        ]);
        expect(journal[3]).toEqual({ runId: run.id, seq: 4, type: "call.completed", at: baseTime + 4, callSeq: 1, data: { ok: true } });
        expect((await store.readJournal(other.id)).map((e) => e.seq)).toEqual([1, 2]);
        expect((await store.getRun(run.id))!.journalSeq).toBe(4);
      });

      it("dates no entry before the journal's last (a writer that dated its entry before another's write landed), in the order written", async () => {
        const { run } = await create();
        await store.update({ runId: run.id, journal: [entry("control", baseTime + 50, { command: "pause" })] });
        // Dated 10 ms and 5 ms before the entry already written, then one after it.
        const result = await store.update({ runId: run.id, journal: [entry("call.completed", baseTime + 40, {}, 1), entry("status", baseTime + 45), entry("call.started", baseTime + 60, {}, 2)] });
        expect(result.ok && result.journal.map((e) => e.at)).toEqual([baseTime + 50, baseTime + 50, baseTime + 60]);
        // Entries out of order within one write: the last is lifted to the one before it, and the record's time with it.
        const lifted = await store.update({ runId: run.id, journal: [entry("control", baseTime + 80, { command: "resume" }), entry("status", baseTime + 70)] });
        expect(lifted.ok && [lifted.journal.map((e) => e.at), lifted.run.updatedAt]).toEqual([[baseTime + 80, baseTime + 80], baseTime + 80]);
        const after = await store.update({ runId: run.id, journal: [entry("call.started", baseTime + 75, {}, 3)] });
        expect(after.ok && after.journal[0].at).toBe(baseTime + 80);
        expect((await store.readJournal(run.id)).slice(1).map((e) => [e.type, e.at])).toEqual([
          ["control", baseTime + 50],
          ["call.completed", baseTime + 50],
          ["status", baseTime + 50],
          ["call.started", baseTime + 60],
          ["control", baseTime + 80],
          ["status", baseTime + 80],
          ["call.started", baseTime + 80],
        ]);
      });

      it("pages with afterSeq and limit", async () => {
        const { run } = await create();
        await store.update({ runId: run.id, journal: Array.from({ length: 9 }, (_, i) => entry("call.progress", baseTime + i, { i })) });
        expect((await store.readJournal(run.id, { limit: 3 })).map((e) => e.seq)).toEqual([1, 2, 3]);
        expect((await store.readJournal(run.id, { afterSeq: 3, limit: 3 })).map((e) => e.seq)).toEqual([4, 5, 6]);
        expect((await store.readJournal(run.id, { afterSeq: 8 })).map((e) => e.seq)).toEqual([9, 10]);
        expect(await store.readJournal(run.id, { afterSeq: 10 })).toEqual([]);
        expect(await store.readJournal("run_missing")).toEqual([]);
      });
    });

    describe("snapshots", () => {
      it("appends messages, and loadState returns the latest snapshot that verifies", async () => {
        const { run, writer } = await create({}, state(1, { n: 0 }));
        const s1 = state(3, { n: 1 });
        await store.update({ runId: run.id, set: { step: 1 }, journal: [stepEntry(1, baseTime + 10)], snapshot: writer.prepare(s1, 1, baseTime + 10) });
        writer.commit();
        const stored = await store.loadState(run.id);
        expect(stored.head).toMatchObject({ seq: 2, step: 1, messageCount: 3, varsSeq: 2, at: baseTime + 10 });
        expect(stored.messages).toEqual(s1.messages.map((m) => JSON.stringify(m)));
        expect(restoreState(run.id, stored).state).toEqual(s1);
        const record = (await store.getRun(run.id))!;
        expect(record.snapshotSeq).toBe(2);
        expect(record.snapshotAt).toBe(baseTime + 10);
      });

      it("loads the newest snapshot at or before a step", async () => {
        const { run, writer } = await create({}, state(1, { n: 0 }));
        const states = [state(1, { n: 0 })];
        for (let step = 1; step <= 4; step++) {
          const s = state(1 + step, { n: step });
          states.push(s);
          await store.update({ runId: run.id, set: { step }, journal: [stepEntry(step, baseTime + step)], snapshot: writer.prepare(s, step, baseTime + step) });
          writer.commit();
        }
        for (let step = 0; step <= 4; step++) {
          const stored = await store.loadState(run.id, { atStep: step });
          expect(stored.head.step).toBe(step);
          expect(restoreState(run.id, stored).state).toEqual(states[step]);
        }
        expect((await store.loadState(run.id, { atStep: 99 })).head.step).toBe(4);
      });

      it("says which journal entry carries a snapshot (entrySeq): the last of its transaction", async () => {
        const { run, writer } = await create({}, state(1, { n: 0 }));
        expect((await store.loadState(run.id)).head.entrySeq).toBe(1);
        await store.update({ runId: run.id, set: { step: 1 }, journal: [stepEntry(1, baseTime + 1), entry("call.progress", baseTime + 1, {})], snapshot: writer.prepare(state(2, { n: 1 }), 1, baseTime + 1) });
        writer.commit();
        await store.update({ runId: run.id, journal: [entry("call.progress", baseTime + 2, {})] });
        expect((await store.loadState(run.id, { atStep: 0 })).head.entrySeq).toBe(1);
        expect((await store.loadState(run.id)).head.entrySeq).toBe(3);
      });

      it("keeps a fork's first snapshot at the step it was taken from", async () => {
        const { run } = await create({ step: 7, forkedFrom: { runId: "run_source", step: 7 } }, state(2, { n: 7 }));
        expect(run.step).toBe(7);
        expect(run.forkedFrom).toEqual({ runId: "run_source", step: 7 });
        expect((await store.loadState(run.id)).head.step).toBe(7);
      });

      it("stores vars only when they changed; later snapshots point at the vars they use (varsSeq)", async () => {
        const { run, writer } = await create({}, state(1, { n: 0 }));
        const unchangedVars = writer.prepare(state(2, { n: 0 }), 1, baseTime + 1);
        expect(unchangedVars.varsJson).toBeUndefined();
        await store.update({ runId: run.id, set: { step: 1 }, journal: [stepEntry(1, baseTime + 1)], snapshot: unchangedVars });
        writer.commit();
        let stored = await store.loadState(run.id);
        expect(stored.head).toMatchObject({ seq: 2, varsSeq: 1 });
        expect(restoreState(run.id, stored).state.vars).toEqual({ n: 0 });

        const changed = writer.prepare(state(3, { n: 5 }), 2, baseTime + 2);
        await store.update({ runId: run.id, set: { step: 2 }, journal: [stepEntry(2, baseTime + 2)], snapshot: changed });
        writer.commit();
        await store.update({ runId: run.id, set: { step: 3 }, journal: [stepEntry(3, baseTime + 3)], snapshot: writer.prepare(state(4, { n: 5 }), 3, baseTime + 3) });
        writer.commit();
        stored = await store.loadState(run.id);
        expect(stored.head).toMatchObject({ seq: 4, varsSeq: 3 });
        expect(restoreState(run.id, stored).state).toEqual(state(4, { n: 5 }));
        expect(restoreState(run.id, await store.loadState(run.id, { atStep: 1 })).state.vars).toEqual({ n: 0 });
      });

      it("reads single messages by index", async () => {
        const { run } = await create({}, state(3));
        const found = await store.readMessages(run.id, [0, 2, 5]);
        expect([...found.keys()].sort()).toEqual([0, 2]);
        expect(JSON.parse(found.get(2)!)).toEqual({ role: "user", content: "message 2" });
      });

      it("refuses loadState of an unknown run with run_not_found", async () => {
        await expectCode(store.loadState("run_missing"), "run_not_found");
      });

      it("refuses a snapshot written without a journal entry, and writes nothing", async () => {
        const { run, writer } = await create({}, state(1, { n: 0 }));
        await expectCode(store.update({ runId: run.id, set: { step: 1 }, snapshot: writer.prepare(state(2, { n: 1 }), 1, baseTime + 1) }), "invalid_input");
        expect(await store.getRun(run.id)).toEqual(run);
        expect((await store.loadState(run.id)).messages).toHaveLength(1);
      });
    });

    describe("effects", () => {
      it("inserts effects and upserts their state, attempts and error by call sequence", async () => {
        const { run } = await create();
        await store.update({ runId: run.id, effects: [effect(3), effect(1)] });
        await store.update({ runId: run.id, effects: [effect(3, { state: "compensating", attempts: 1, updatedAt: baseTime + 50 })] });
        await store.update({ runId: run.id, effects: [effect(3, { state: "failed", attempts: 2, error: "gone", updatedAt: baseTime + 60 })] });
        const effects = await store.listEffects(run.id);
        expect(effects).toEqual([
          { runId: run.id, ...effect(1) },
          { runId: run.id, ...effect(3, { state: "failed", attempts: 2, error: "gone", updatedAt: baseTime + 60 }) },
        ]);
        expect(await store.listEffects((await create()).run.id)).toEqual([]);
      });
    });

    describe("commands", () => {
      it("inserts commands directly and with an update, marks them applied, lists them in order", async () => {
        const { run } = await create();
        const first = command(run.id, { type: "pause" });
        const second = command(run.id, { type: "cancel", reason: null, payload: {} });
        await store.insertCommand(first);
        await store.update({ runId: run.id, insertCommand: second, journal: [entry("control", baseTime + 5, { commandId: second.id })] });
        await store.update({ runId: run.id, settleCommands: { at: baseTime + 70, outcomes: { pause: "applied" } } });
        expect(await store.listCommands(run.id)).toEqual([{ ...first, appliedAt: baseTime + 70, outcome: "applied" }, second]);
      });

      it("settles with an update only the pending commands of its run and of the types it names", async () => {
        const { run } = await create();
        const other = (await create()).run;
        const pause = command(run.id, { type: "pause" });
        const done = command(run.id, { type: "pause", appliedAt: baseTime + 10, outcome: "applied" });
        const cancel = command(run.id, { type: "cancel", reason: null, payload: {} });
        const resume = command(run.id, { type: "resume", reason: null, payload: {} });
        const elsewhere = command(other.id, { type: "pause" });
        for (const c of [pause, done, cancel, resume, elsewhere]) await store.insertCommand(c);
        // An update refused by its expectation settles nothing.
        const refused = await store.update({ runId: run.id, expect: { status: ["completed"] }, settleCommands: { at: baseTime + 60, outcomes: { pause: "applied" } } });
        expect(refused.ok).toBe(false);
        expect(await store.listCommands(run.id)).toEqual([pause, done, cancel, resume]);
        const written = await store.update({ runId: run.id, set: { status: "cancelled" }, settleCommands: { at: baseTime + 70, outcomes: { cancel: "applied", pause: "superseded: cancel" } } });
        expect(written.ok).toBe(true);
        expect(await store.listCommands(run.id)).toEqual([
          { ...pause, appliedAt: baseTime + 70, outcome: "superseded: cancel" },
          done,
          { ...cancel, appliedAt: baseTime + 70, outcome: "applied" },
          resume,
        ]);
        expect(await store.listCommands(other.id)).toEqual([elsewhere]);
      });

      it("keeps commands without a run (halt) out of every run's list", async () => {
        const { run } = await create();
        await store.insertCommand(command(null, { type: "halt", payload: { scope: "*" } }));
        expect(await store.listCommands(run.id)).toEqual([]);
      });
    });

    describe("halts", () => {
      it("sets, replaces, lists and clears halts by scope", async () => {
        expect(await store.listHalts()).toEqual([]);
        await store.setHalt({ scope: "*", actor: "root", reason: "incident", at: baseTime + 1 });
        await store.setHalt({ scope: "agent:agent-a", actor: "root", reason: null, at: baseTime + 2 });
        await store.setHalt({ scope: "*", actor: "ops", reason: "still", at: baseTime + 3 });
        const halts = await store.listHalts();
        expect(halts).toHaveLength(2);
        expect(halts).toContainEqual({ scope: "*", actor: "ops", reason: "still", at: baseTime + 3 });
        expect(halts).toContainEqual({ scope: "agent:agent-a", actor: "root", reason: null, at: baseTime + 2 });
        expect(await store.clearHalt("*")).toBe(true);
        expect(await store.clearHalt("*")).toBe(false);
        expect(await store.listHalts()).toEqual([{ scope: "agent:agent-a", actor: "root", reason: null, at: baseTime + 2 }]);
      });

      it("refuses a creation that asks (`refuseIfHalted`) while a halt covers its agent, naming the oldest such halt and writing nothing; other agents, and creations that do not ask, go ahead", async () => {
        await store.setHalt({ scope: "agent:agent-a", actor: "root", reason: null, at: baseTime + 2 });
        await expectCode(create({ refuseIfHalted: true }), "halted");
        const refused = `run_${String(counter).padStart(4, "0")}`;
        expect(await store.getRun(refused)).toBeUndefined();
        expect(await store.readJournal(refused)).toEqual([]);
        const other = (await create({ agent: "agent-b", refuseIfHalted: true })).run;
        expect(await store.getRun(other.id)).toMatchObject({ agent: "agent-b", status: "queued" });
        expect((await create()).run.status).toBe("queued");
        // Both scopes in force: the older one is named.
        await store.setHalt({ scope: "*", actor: "ops", reason: "incident", at: baseTime + 1 });
        const error = await create({ agent: "agent-b", refuseIfHalted: true }).catch((e: unknown) => e);
        expect(error).toMatchObject({ code: "halted", details: { scope: "*" } });
        const both = await create({ refuseIfHalted: true }).catch((e: unknown) => e);
        expect(both).toMatchObject({ code: "halted", details: { scope: "*" } });
        await store.clearHalt("*");
        await store.clearHalt("agent:agent-a");
        expect((await create({ refuseIfHalted: true })).run.status).toBe("queued");
      });
    });

    describe("findClaimable", () => {
      it("finds queued runs and active runs without a live lease, never live-leased, paused or finished ones", async () => {
        const now = baseTime + 10_000;
        const queued = (await create()).run;
        const running = async (status: RunRecord["status"], leaseUntil: number | null) => {
          const { run } = await create();
          if (leaseUntil !== null) await store.update({ runId: run.id, claim: { workerId: "w1", until: leaseUntil } });
          await store.update({ runId: run.id, set: { status } });
          return run.id;
        };
        const expired = await running("running", now - 1);
        const live = await running("running", now + 1000);
        const leaseAtNow = await running("running", now);
        const pausingExpired = await running("pausing", now - 1);
        const cancellingNoLease = await running("cancelling", null);
        const cancellingLive = await running("cancelling", now + 1000);
        const paused = await running("paused", null);
        const halted = await running("halted", null);
        const completed = await running("completed", null);
        const ids = (await store.findClaimable(now, 100)).map((r) => r.id);
        expect(ids.sort()).toEqual([queued.id, expired, pausingExpired, cancellingNoLease].sort());
        for (const id of [live, leaseAtNow, cancellingLive, paused, halted, completed]) expect(ids).not.toContain(id);
        expect(await store.findClaimable(now, 2)).toHaveLength(2);
      });
    });

    describe("storage and retention", () => {
      it("reports a run's rows and bytes, and undefined for an unknown run", async () => {
        const { run, writer } = await create({}, state(2));
        await store.update({ runId: run.id, set: { step: 1 }, journal: [stepEntry(1, baseTime + 1)], snapshot: writer.prepare(state(4, { n: 1 }), 1, baseTime + 1), effects: [effect(1)] });
        writer.commit();
        await store.insertCommand(command(run.id));
        const storage = await store.runStorage(run.id);
        expect(storage).toMatchObject({ journalEntries: 2, messages: 4, effects: 1, commands: 1 });
        // At least the bodies of the four messages.
        const bodies = state(4).messages.reduce((n, m) => n + JSON.stringify(m).length, 0);
        expect(storage!.bytes).toBeGreaterThanOrEqual(bodies);
        expect(await store.runStorage("run_missing")).toBeUndefined();
      });

      it("prunes only terminal runs last updated before the bound, in batches, with everything they own; a dry run removes nothing", async () => {
        const old = baseTime + 100;
        const bound = baseTime + 1_000;
        const make = async (status: RunRecord["status"], at: number) => {
          const { run } = await create();
          await store.update({ runId: run.id, set: { status }, journal: [entry("status", at, { to: status })], effects: [effect(1, { updatedAt: at })] });
          await store.insertCommand(command(run.id, { createdAt: at }));
          return run.id;
        };
        const completedOld = await make("completed", old);
        const failedOld = await make("failed", old + 1);
        const cancelledOld = await make("cancelled", old + 2);
        const runningOld = await make("running", old);
        const pausedOld = await make("paused", old);
        const completedNew = await make("completed", bound + 1);
        const newest = (await create()).run.id;
        const kept = [runningOld, pausedOld, completedNew, newest];
        const removed = [completedOld, failedOld, cancelledOld];

        const dry = await store.prune({ before: bound, dryRun: true });
        expect(dry).toMatchObject({ runs: 3, journalEntries: 6 });
        for (const id of [...kept, ...removed]) expect(await store.getRun(id)).toBeDefined();

        const report = await store.prune({ before: bound, batchSize: 2 });
        expect(report).toMatchObject({ runs: 3, journalEntries: 6, messages: 3, batches: 2 });
        expect(report.bytes).toBeGreaterThan(0);
        for (const id of removed) {
          expect(await store.getRun(id)).toBeUndefined();
          expect(await store.readJournal(id)).toEqual([]);
          expect(await store.listEffects(id)).toEqual([]);
          expect(await store.listCommands(id)).toEqual([]);
          expect(await store.runStorage(id)).toBeUndefined();
        }
        for (const id of kept) {
          expect(await store.getRun(id)).toBeDefined();
          expect((await store.readJournal(id)).length).toBeGreaterThan(0);
          expect((await store.loadState(id)).messages).toHaveLength(1);
        }
        expect((await store.listRuns({ limit: 100 })).map((r) => r.id).sort()).toEqual([...kept].sort());
        expect((await store.listRunRefs({ limit: 100 })).map((r) => r.id).sort()).toEqual([...kept].sort());
        expect(await store.prune({ before: bound })).toMatchObject({ runs: 0 });
        // A run created after a prune gets a key of its own: nothing of a pruned run shows through it.
        const after = (await create()).run;
        expect((await store.readJournal(after.id)).map((e) => e.type)).toEqual(["run.created"]);
      });
    });

    describe("tokens", () => {
      it("saves tokens, finds them by hash and lists them", async () => {
        const viewer = { id: "tok_1", name: "ci", role: "viewer" as const, hash: "h1", createdAt: baseTime + 1, revokedAt: null };
        const admin = { id: "tok_2", name: "ops", role: "admin" as const, hash: "h2", createdAt: baseTime + 2, revokedAt: baseTime + 9 };
        await store.saveToken(viewer);
        await store.saveToken(admin);
        expect(await store.findTokenByHash("h2")).toEqual(admin);
        expect(await store.findTokenByHash("nope")).toBeUndefined();
        expect(await store.listTokens()).toEqual([viewer, admin]);
      });

      it("revokes a token once: its row stays, a second revocation keeps the first time, an unknown id is undefined", async () => {
        const ci = { id: "tok_1", name: "ci", role: "operator" as const, hash: "h1", createdAt: baseTime + 1, revokedAt: null };
        const other = { id: "tok_2", name: "ops", role: "admin" as const, hash: "h2", createdAt: baseTime + 2, revokedAt: null };
        await store.saveToken(ci);
        await store.saveToken(other);
        expect(await store.revokeToken("tok_1", baseTime + 5)).toEqual({ ...ci, revokedAt: baseTime + 5 });
        expect(await store.revokeToken("tok_1", baseTime + 7)).toEqual({ ...ci, revokedAt: baseTime + 5 });
        expect(await store.findTokenByHash("h1")).toEqual({ ...ci, revokedAt: baseTime + 5 });
        expect(await store.revokeToken("tok_nope", baseTime + 5)).toBeUndefined();
        expect(await store.listTokens()).toEqual([{ ...ci, revokedAt: baseTime + 5 }, other]);
      });
    });

    describe("close", () => {
      it("answers every call after close with store_error saying the store is closed, and closes twice without error", async () => {
        const { run } = await create();
        await store.close();
        await store.close();
        const calls: [string, () => Promise<unknown>][] = [
          ["getRun", () => store.getRun(run.id)],
          ["listRuns", () => store.listRuns()],
          ["listRunRefs", () => store.listRunRefs()],
          ["readJournal", () => store.readJournal(run.id)],
          ["loadState", () => store.loadState(run.id)],
          ["update", () => store.update({ runId: run.id, set: { status: "running" } })],
          ["createRun", () => create()],
          ["insertCommand", () => store.insertCommand(command(run.id))],
          ["listHalts", () => store.listHalts()],
          ["runStorage", () => store.runStorage(run.id)],
          ["listTokens", () => store.listTokens()],
        ];
        for (const [name, call] of calls) {
          const error = await call().then(
            () => new Error(`${name} answered on a closed store`),
            (e: unknown) => e,
          );
          expect(TetherError.isInstance(error, "store_error"), `${name}: ${String(error)}`).toBe(true);
          expect((error as Error).message, name).toMatch(/ is closed$/);
        }
      });
    });
  });
}
