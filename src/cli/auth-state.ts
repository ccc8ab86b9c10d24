import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { TetherError } from "../engine/errors.js";
import type { Store } from "../engine/store.js";
import type { StoreLocation } from "../stores/open-store.js";

/**
 * A record, beside the database, of the API tokens it holds (their ids, never their secrets).
 * Tokens live in the database with the runs; if the database loses them (a lost `-wal` file, a
 * backup that copied only the `.db`), the next `tether serve` finds this record, sees its tokens
 * gone, and refuses to start instead of serving with different credentials than before.
 */
export function authStatePath(dbPath: string): string {
  return `${dbPath}.auth.json`;
}

interface AuthState {
  tokenIds: string[];
  /** Tokens revoked: one the database holds active again lost its revocation (a lost write). */
  revokedIds: string[];
  updatedAt: string;
}

export class TokensMissingError extends TetherError<"tokens_missing"> {
  constructor(dbPath: string, missing: string[]) {
    super(
      "tokens_missing",
      `the database ${dbPath} no longer holds ${missing.length} API token(s) it had (${missing.join(", ")}): it may have lost recent writes (a missing -wal file, a partial backup). Refusing to serve. Restore the database, or, to start over with new tokens, delete ${authStatePath(dbPath)} and create them again`,
      { missing },
    );
    this.name = "TokensMissingError";
  }
}

export class TokensUnrevokedError extends TetherError<"tokens_missing"> {
  constructor(dbPath: string, unrevoked: string[]) {
    super(
      "tokens_missing",
      `the database ${dbPath} holds ${unrevoked.length} API token(s) as active that were revoked (${unrevoked.join(", ")}): it lost recent writes (a missing -wal file, a partial backup). Refusing to serve. Restore the database, or revoke them again with \`tether token revoke <id>\``,
      { missing: unrevoked },
    );
    this.name = "TokensUnrevokedError";
  }
}

function readState(dbPath: string): AuthState | undefined {
  const path = authStatePath(dbPath);
  if (!existsSync(path)) return undefined;
  try {
    const parsed = JSON.parse(readFileSync(path, "utf8")) as Partial<AuthState>;
    return Array.isArray(parsed.tokenIds)
      ? { tokenIds: parsed.tokenIds.map(String), revokedIds: Array.isArray(parsed.revokedIds) ? parsed.revokedIds.map(String) : [], updatedAt: String(parsed.updatedAt ?? "") }
      : undefined;
  } catch {
    throw new TetherError("invalid_input", `${path} is not readable JSON; restore it or delete it to start over`);
  }
}

/** Writes the ids of every token the store holds (active or revoked), and of those revoked, atomically. */
export async function recordAuthState(dbPath: string, store: Pick<Store, "listTokens">): Promise<void> {
  const tokens = await store.listTokens();
  const tokenIds = tokens.map((t) => t.id).sort();
  const revokedIds = tokens.filter((t) => t.revokedAt !== null).map((t) => t.id).sort();
  const path = authStatePath(dbPath);
  // A temporary file of this writer's own: two commands at once (two `tether token create`)
  // would otherwise rename one file twice, and the second fail.
  const temporary = `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  try {
    writeFileSync(temporary, JSON.stringify({ tokenIds, revokedIds, updatedAt: new Date().toISOString() }, null, 2) + "\n");
    renameSync(temporary, path);
  } catch (error) {
    // A full disk, a directory gone: no temporary file is left beside the database.
    rmSync(temporary, { force: true });
    throw error;
  }
}

/** Refuses (`tokens_missing`) when tokens the record lists are gone from the store; else brings the record up to date. */
export async function checkAuthState(dbPath: string, store: Pick<Store, "listTokens">): Promise<void> {
  const state = readState(dbPath);
  const tokens = await store.listTokens();
  const held = new Set(tokens.map((t) => t.id));
  const missing = (state?.tokenIds ?? []).filter((id) => !held.has(id));
  if (missing.length) throw new TokensMissingError(dbPath, missing);
  const active = new Set(tokens.filter((t) => t.revokedAt === null).map((t) => t.id));
  const unrevoked = (state?.revokedIds ?? []).filter((id) => active.has(id));
  if (unrevoked.length) throw new TokensUnrevokedError(dbPath, unrevoked);
  if (held.size || state) await recordAuthState(dbPath, store);
}

/**
 * `checkAuthState` for a store wherever it is: the record beside a SQLite file guards against a
 * file that lost writes; a PostgreSQL database is its operators' to back up, and has no record.
 */
export async function checkStoreAuthState(location: StoreLocation, store: Pick<Store, "listTokens">): Promise<void> {
  if (location.kind === "sqlite") await checkAuthState(location.path, store);
}

export async function recordStoreAuthState(location: StoreLocation, store: Pick<Store, "listTokens">): Promise<void> {
  if (location.kind === "sqlite") await recordAuthState(location.path, store);
}
