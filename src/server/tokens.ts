import { createHash, randomBytes } from "node:crypto";
import type { IdGenerator } from "../engine/ids.js";
import { randomIds } from "../engine/ids.js";
import type { ApiTokenRecord, Store } from "../engine/store.js";
import type { Role } from "./api-types.js";

/** Tokens are stored only as this hash: SHA-256, hex. */
export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

export function generateToken(): string {
  return `tether_${randomBytes(32).toString("base64url")}`;
}

export interface CreatedToken {
  /** The secret: shown once, never stored. */
  token: string;
  record: ApiTokenRecord;
}

export async function createApiToken(
  store: Pick<Store, "saveToken">,
  options: { name: string; role: Role; now?: number; ids?: IdGenerator },
): Promise<CreatedToken> {
  const token = generateToken();
  const record: ApiTokenRecord = {
    id: (options.ids ?? randomIds)("tok"),
    name: options.name,
    role: options.role,
    hash: hashToken(token),
    createdAt: options.now ?? Date.now(),
    revokedAt: null,
  };
  await store.saveToken(record);
  return { token, record };
}
