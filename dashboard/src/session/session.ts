import { ApiClient } from "../api/client.js";
import { ApiError } from "../api/api-error.js";
import type { Role } from "../api/types.js";

const storageKey = "tether.token";

/** Who the dashboard acts as, and how it knows: the server said so, or it was worked out from answers. */
export interface Identity {
  name: string;
  role: Role;
  source: "whoami" | "inferred" | "open";
}

/** A token in the URL fragment (`#token=…`, what `tether demo` prints) wins, and leaves the address bar. */
export function initialToken(): string | null {
  const fragment = new URLSearchParams(location.hash.replace(/^#/, ""));
  const fromUrl = fragment.get("token");
  if (fromUrl) {
    saveToken(fromUrl);
    fragment.delete("token");
    const rest = fragment.toString();
    history.replaceState(history.state, "", location.pathname + location.search + (rest ? `#${rest}` : ""));
    return fromUrl;
  }
  try {
    return sessionStorage.getItem(storageKey);
  } catch {
    return null;
  }
}

export function saveToken(token: string | null): void {
  try {
    if (token) sessionStorage.setItem(storageKey, token);
    else sessionStorage.removeItem(storageKey);
  } catch {
    // Storage can be unavailable (private modes); the token then lasts as long as the page.
  }
}

export type IdentityResult = { ok: true; identity: Identity } | { ok: false; error: ApiError };

/**
 * `GET /whoami` when the server has it. Otherwise the role is worked out from requests that the
 * server authorizes before it validates them: an empty `POST /halt` is 403 below admin and 400
 * (refused as invalid, nothing happens) for an admin; an empty `POST /runs` likewise for operator.
 */
export async function resolveIdentity(client: ApiClient): Promise<IdentityResult> {
  try {
    const me = await client.whoami();
    return { ok: true, identity: { name: me.name, role: me.role, source: "whoami" } };
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    if (error.status === 401 || error.status === 0) return { ok: false, error };
    if (error.status !== 404) return { ok: false, error };
  }
  try {
    await client.agents();
  } catch (error) {
    if (error instanceof ApiError) return { ok: false, error };
    throw error;
  }
  const name = client.token ? "API token" : "anonymous";
  const source = client.token ? "inferred" : "open";
  if (await allowedBeyondAuth(client, "/halt")) return { ok: true, identity: { name, role: "admin", source } };
  if (await allowedBeyondAuth(client, "/runs")) return { ok: true, identity: { name, role: "operator", source } };
  return { ok: true, identity: { name, role: "viewer", source } };
}

async function allowedBeyondAuth(client: ApiClient, path: string): Promise<boolean> {
  try {
    await client.call("POST", path, {});
    return true;
  } catch (error) {
    return !(error instanceof ApiError && (error.status === 403 || error.status === 401));
  }
}

export function roleAllows(role: Role | undefined, required: Role): boolean {
  const rank: Record<Role, number> = { viewer: 1, operator: 2, admin: 3 };
  return role !== undefined && rank[role] >= rank[required];
}
