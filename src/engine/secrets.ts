import type { Json } from "./json.js";
import type { NewRun, RunUpdate, SnapshotWrite, Store } from "./store.js";

/** What a redacted secret reads as wherever it would have appeared. */
export const redactedMarker = "[redacted]";

/** Environment variables whose values are secrets by their name. */
const secretName = /(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$/i;

/** Values shorter than this are never treated as secrets (they would redact ordinary words). */
export const minSecretLength = 8;

/**
 * Known secret values (provider keys, API tokens, webhook secrets), replaced by `[redacted]` in
 * whatever Tether stores or sends: journal entries, run errors, snapshots, commands, events. A
 * provider whose error body echoes the key (some gateways do) then leaves no copy of it behind.
 */
export class SecretRedactor {
  private readonly values: string[];

  constructor(values: Iterable<string>) {
    // Longest first, so a secret that contains another is replaced whole.
    this.values = [...new Set([...values].filter((v) => typeof v === "string" && v.length >= minSecretLength))].sort((a, b) => b.length - a.length);
  }

  /** The values of environment variables named like secrets (`*_API_KEY`, `*_TOKEN`, `*_SECRET`, …). */
  static fromEnvironment(env: NodeJS.ProcessEnv = process.env, extra: Iterable<string> = []): SecretRedactor {
    const values = Object.entries(env)
      .filter(([name, value]) => value !== undefined && secretName.test(name))
      .map(([, value]) => value as string);
    return new SecretRedactor([...values, ...extra]);
  }

  get empty(): boolean {
    return this.values.length === 0;
  }

  text(value: string): string {
    let out = value;
    for (const secret of this.values) if (out.includes(secret)) out = out.split(secret).join(redactedMarker);
    return out;
  }

  /** A copy of `value` with every string redacted; the same object when nothing needed it. */
  json<T>(value: T): T {
    if (typeof value === "string") return this.text(value) as T;
    if (value === null || typeof value !== "object") return value;
    if (Array.isArray(value)) {
      let changed = false;
      const out = value.map((item) => {
        const next = this.json(item);
        if (next !== item) changed = true;
        return next;
      });
      return (changed ? out : value) as T;
    }
    let out: Record<string, unknown> | undefined;
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
      const next = this.json(item);
      if (next !== item) (out ??= { ...(value as Record<string, unknown>) })[key] = next;
    }
    return (out ?? value) as T;
  }

  private snapshot(write: SnapshotWrite): SnapshotWrite {
    const appendMessages = write.appendMessages.map((m) => this.text(m));
    const varsJson = write.varsJson === undefined ? undefined : this.text(write.varsJson);
    const changed = appendMessages.some((m, i) => m !== write.appendMessages[i]) || varsJson !== write.varsJson;
    // A snapshot carries a checksum of what it writes: a redacted one is checksummed again by the caller's rules.
    return changed ? { ...write, appendMessages, ...(varsJson === undefined ? {} : { varsJson }) } : write;
  }

  update(update: RunUpdate): RunUpdate {
    return {
      ...update,
      ...(update.set ? { set: this.json(update.set) } : {}),
      ...(update.journal ? { journal: update.journal.map((e) => ({ ...e, data: this.json(e.data) })) } : {}),
      ...(update.effects ? { effects: this.json(update.effects) } : {}),
      ...(update.insertCommand ? { insertCommand: this.json(update.insertCommand) } : {}),
      ...(update.snapshot ? { snapshot: this.snapshot(update.snapshot) } : {}),
    };
  }

  newRun(run: NewRun): NewRun {
    return { ...run, input: this.json(run.input as Json) };
  }
}

/** `store`, with every write passing through `redactor` first; `store` itself when there is nothing to redact. */
export function redactingStore(store: Store, redactor: SecretRedactor): Store {
  if (redactor.empty) return store;
  return new Proxy(store, {
    get(target, property, receiver) {
      if (property === "update") return (update: RunUpdate) => target.update(redactor.update(update));
      if (property === "createRun")
        return (run: NewRun, initial: SnapshotWrite, journal: Parameters<Store["createRun"]>[2]) =>
          target.createRun(redactor.newRun(run), initial, journal.map((e) => ({ ...e, data: redactor.json(e.data) })));
      if (property === "insertCommand") return (command: Parameters<Store["insertCommand"]>[0]) => target.insertCommand(redactor.json(command));
      const value = Reflect.get(target, property, receiver === undefined ? target : target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
