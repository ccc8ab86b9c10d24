import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { ApiClient } from "./api/client.js";
import type { RunsFeed } from "./api/runs-feed.js";
import type { HaltsResponse } from "./api/types.js";
import type { Identity } from "./session/session.js";

export type ToastTone = "info" | "success" | "danger";

export interface AppContextValue {
  client: ApiClient;
  identity: Identity;
  feed: RunsFeed;
  halts: HaltsResponse | null;
  refreshHalts(): void;
  toast(message: string, tone?: ToastTone): void;
  signIn(): void;
}

export const AppContext = createContext<AppContextValue | null>(null);

export function useApp(): AppContextValue {
  const value = useContext(AppContext);
  if (!value) throw new Error("useApp outside <AppContext.Provider>");
  return value;
}
