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
 * - `tokens`: bearer tokens from the store. With `openWhenEmpty` (a loopback server) and no
 *   active token stored, every request is let in as an anonymous admin.
 * - `off`: no checks; every request acts as `actor` with the admin role (in-process use, such
 *   as the CLI working straight against a store file it can already write).
 */
export type AuthOptions = { mode: "tokens"; openWhenEmpty?: boolean } | { mode: "off"; actor?: string };

export type TokenSource = Pick<Store, "findTokenByHash" | "listTokens">;

function presentedToken(c: Context, allowQueryToken: boolean): string | undefined {
  const header = c.req.header("authorization");
  if (header !== undefined) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) throw new UnauthorizedError('the Authorization header must be "Bearer <token>"');
    return match[1];
  }
  if (allowQueryToken) {
    const token = c.req.query("token");
    if (token) return token;
  }
  return undefined;
}

export async function authenticate(c: Context, auth: AuthOptions, tokens: TokenSource, allowQueryToken: boolean): Promise<Identity> {
  if (auth.mode === "off") return { actor: auth.actor ?? "anonymous", role: "admin" };
  const token = presentedToken(c, allowQueryToken);
  if (token === undefined) {
    if (auth.openWhenEmpty && !(await hasActiveToken(tokens))) return { actor: "anonymous", role: "admin" };
    throw new UnauthorizedError(
      allowQueryToken ? "a token is required: send Authorization: Bearer <token> or ?token=<token>" : "a token is required: send Authorization: Bearer <token>",
    );
  }
  const record = await tokens.findTokenByHash(hashToken(token));
  if (!record || record.revokedAt !== null) {
    // A loopback server with no tokens ignores a leftover token (a dashboard that remembers one).
    if (auth.openWhenEmpty && !(await hasActiveToken(tokens))) return { actor: "anonymous", role: "admin" };
    throw new UnauthorizedError("the token is not valid (unknown or revoked)");
  }
  return { actor: record.name, role: record.role };
}

async function hasActiveToken(tokens: TokenSource): Promise<boolean> {
  return (await tokens.listTokens()).some((t) => t.revokedAt === null);
}

export function requireRole(identity: Identity, required: Role): void {
  if (!roleAllows(identity.role, required)) {
    throw new ForbiddenError(`this needs the ${required} role; the token "${identity.actor}" is ${identity.role}`);
  }
}
