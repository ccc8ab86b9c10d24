import type { Context } from "hono";
import type { Store } from "../engine/store.js";
import type { Role } from "./api-types.js";
import { ForbiddenError, UnauthorizedError } from "./http-errors.js";
import { hashToken } from "./tokens.js";

const rank: Record<Role, number> = { viewer: 1, operator: 2, admin: 3 };

export function roleAllows(role: Role, required: Role): boolean {
  return rank[role] >= rank[required];
}

/** Who is asking: the token's name (the actor journaled with each command) and its role. */
export interface Identity {
  actor: string;
  role: Role;
}

/**
 * - `tokens`: bearer tokens from the store; a request without a valid one is refused. A store
 *   with no token lets nobody in: no state of the database can open the server.
 * - `open`: no token needed; every request acts as an anonymous admin. Only ever chosen
 *   explicitly (`tether serve --open`), and only on a loopback address.
 * - `off`: no checks; every request acts as `actor` with the admin role (in-process use, such
 *   as the CLI working straight against a store file it can already write).
 */
export type AuthOptions = { mode: "tokens" } | { mode: "open" } | { mode: "off"; actor?: string };

export type TokenSource = Pick<Store, "findTokenByHash" | "listTokens">;

function presentedToken(c: Context): string | undefined {
  const header = c.req.header("authorization");
  if (header === undefined) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match) throw new UnauthorizedError('the Authorization header must be "Bearer <token>"');
  return match[1];
}

export async function authenticate(c: Context, auth: AuthOptions, tokens: TokenSource): Promise<Identity> {
  if (auth.mode === "off") return { actor: auth.actor ?? "anonymous", role: "admin" };
  if (auth.mode === "open") return { actor: "anonymous", role: "admin" };
  const token = presentedToken(c);
  if (token === undefined) throw new UnauthorizedError("a token is required: send Authorization: Bearer <token>");
  const record = await tokens.findTokenByHash(hashToken(token));
  if (!record || record.revokedAt !== null) throw new UnauthorizedError("the token is not valid (unknown or revoked)");
  return { actor: record.name, role: record.role };
}

export function requireRole(identity: Identity, required: Role): void {
  if (!roleAllows(identity.role, required)) {
    throw new ForbiddenError(`this needs the ${required} role; the token "${identity.actor}" is ${identity.role}`);
  }
}
