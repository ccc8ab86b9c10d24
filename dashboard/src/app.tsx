import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiClient } from "./api/client.js";
import { ApiError, errorMessage } from "./api/api-error.js";
import { RunsFeed } from "./api/runs-feed.js";
import type { DamagedRun, HaltsResponse, RunView } from "./api/types.js";
import { useEventStream, type StreamState } from "./api/use-event-stream.js";
import { AppContext, type AppContextValue, type ToastTone } from "./app-context.js";
import { OperatorPage } from "./operator/operator-page.js";
import { RunPage } from "./run/run-page.js";
import { RunsPage } from "./runs/runs-page.js";
import { LoginDialog, LoginScreen } from "./session/login.js";
import { initialToken, resolveIdentity, saveToken, type Identity } from "./session/session.js";
import { Icon } from "./ui/icons.js";
import { Link, useRoute } from "./ui/router.js";

type SessionState = { phase: "checking" } | { phase: "ready"; identity: Identity } | { phase: "needs-token"; error?: ApiError } | { phase: "unreachable"; error: ApiError };

interface Toast {
  id: number;
  message: string;
  tone: ToastTone;
}

export function App() {
  const [token, setToken] = useState<string | null>(() => initialToken());
  const client = useMemo(() => new ApiClient(token), [token]);
  const [session, setSession] = useState<SessionState>({ phase: "checking" });
  const [attempt, setAttempt] = useState(0);

  useEffect(() => {
    let live = true;
    setSession({ phase: "checking" });
    resolveIdentity(client).then(
      (result) => {
        if (!live) return;
        if (result.ok) setSession({ phase: "ready", identity: result.identity });
        else if (result.error.status === 401) setSession({ phase: "needs-token", error: client.token ? result.error : undefined });
        else setSession({ phase: "unreachable", error: result.error });
      },
      (error: unknown) => live && setSession({ phase: "unreachable", error: new ApiError(0, "error", errorMessage(error)) }),
    );
    return () => {
      live = false;
    };
  }, [client, attempt]);

  const changeToken = useCallback((next: string | null) => {
    saveToken(next);
    setToken(next);
  }, []);

  if (session.phase === "checking") return <div class="splash">Connecting to Tether…</div>;
  if (session.phase === "needs-token") return <LoginScreen error={session.error} onToken={changeToken} />;
  if (session.phase === "unreachable")
    return (
      <div class="splash">
        <div class="card splash-card">
          <h1>Tether is not answering</h1>
          <p class="muted">{session.error.message}</p>
          <button class="btn btn-primary" onClick={() => setAttempt((n) => n + 1)}>
            Try again
          </button>
        </div>
      </div>
    );
  return <Shell key={token ?? ""} client={client} identity={session.identity} onToken={changeToken} />;
}

function Shell(props: { client: ApiClient; identity: Identity; onToken: (token: string | null) => void }) {
  const { client, identity } = props;
  const route = useRoute();
  const feed = useMemo(() => new RunsFeed(), []);
  const [halts, setHalts] = useState<HaltsResponse | null>(null);
  const [damaged, setDamaged] = useState<DamagedRun[]>([]);
  const [toasts, setToasts] = useState<Toast[]>([]);
  const [loginOpen, setLoginOpen] = useState(false);
  const toastId = useRef(0);

  const toast = useCallback((message: string, tone: ToastTone = "info") => {
    const id = ++toastId.current;
    setToasts((list) => [...list.slice(-3), { id, message, tone }]);
    window.setTimeout(() => setToasts((list) => list.filter((t) => t.id !== id)), tone === "danger" ? 8000 : 4000);
  }, []);

  const haltTimer = useRef<number | undefined>(undefined);
  const refreshHalts = useCallback(() => {
    window.clearTimeout(haltTimer.current);
    haltTimer.current = window.setTimeout(() => {
      client.halts().then(setHalts, () => undefined);
    }, 150);
  }, [client]);

  const loadRuns = useCallback(() => {
    client.runs().then(
      (body) => {
        feed.replace(body.runs);
        setDamaged(body.damaged ?? []);
      },
      (error: unknown) => toast(`Could not load runs: ${errorMessage(error)}`, "danger"),
    );
    refreshHalts();
  }, [client, feed, refreshHalts, toast]);

  useEffect(loadRuns, [loadRuns]);

  const lastStatus = useRef(new Map<string, string>());
  const stream = useEventStream((lastId) => client.eventsRequest(lastId ? `/events?after=${lastId}` : "/events"), {
    run: (data) => {
      const run = data as RunView;
      const before = lastStatus.current.get(run.id);
      lastStatus.current.set(run.id, run.status);
      if (before !== run.status && (before === "halted" || run.status === "halted")) refreshHalts();
      feed.upsert(run);
    },
  }, { onOpen: loadRuns });

  const value: AppContextValue = useMemo(
    () => ({ client, identity, feed, halts, refreshHalts, toast, signIn: () => setLoginOpen(true) }),
    [client, identity, feed, halts, refreshHalts, toast],
  );

  const activeHalts = halts?.halts ?? [];
  return (
    <AppContext.Provider value={value}>
      <header class="topbar">
        <div class="topbar-inner">
          <Link href="/" class="brand">
            <span class="brand-mark" aria-hidden="true" />
            Tether
          </Link>
          <nav class="nav">
            <Link href="/" class={route.page === "runs" || route.page === "run" ? "nav-link active" : "nav-link"}>
              Runs
            </Link>
            <Link href="/operator" class={route.page === "operator" ? "nav-link active" : "nav-link"}>
              Operator
            </Link>
          </nav>
          <div class="topbar-right">
            <LiveIndicator state={stream} />
            <button class="identity" onClick={() => setLoginOpen(true)} title={identity.source === "inferred" ? "Role worked out from the server's answers" : undefined} data-testid="identity">
              <Icon name="key" />
              <span class="identity-name">{identity.name}</span>
              <span class={`role role-${identity.role}`} data-testid="role">
                {identity.role}
              </span>
            </button>
          </div>
        </div>
      </header>
      {activeHalts.length > 0 && (
        <div class="halt-banner" role="alert" data-testid="halt-banner">
          <div class="halt-banner-inner">
            <Icon name="shield" />
            <strong>Halt in force</strong>
            <span>
              {activeHalts.map((h) => (h.scope === "*" ? "all runs" : h.scope.replace(/^agent:/, "agent "))).join(", ")}
              {activeHalts[0].reason ? ` — “${activeHalts[0].reason}” (${activeHalts[0].actor})` : ` (${activeHalts[0].actor})`}
            </span>
            <Link href="/operator" class="halt-banner-link">
              Operator view
            </Link>
          </div>
        </div>
      )}
      {damaged.length > 0 && (
        <div class="damaged-banner" role="alert" data-testid="damaged-banner">
          <div class="halt-banner-inner">
            <Icon name="shield" />
            <strong>
              {damaged.length} run{damaged.length === 1 ? "" : "s"} could not be read
            </strong>
            <span>
              {damaged.map((run) => `${run.id} (${run.agent}, ${run.status})`).join(", ")}: a damaged record in the store, left as it is. The other runs are listed; <code>tether verify</code> names the damage.
            </span>
          </div>
        </div>
      )}
      <main class="page">
        {route.page === "runs" && <RunsPage />}
        {route.page === "run" && <RunPage key={route.id} id={route.id} />}
        {route.page === "operator" && <OperatorPage />}
        {route.page === "missing" && (
          <div class="empty">
            <h2>Nothing at {route.path}</h2>
            <Link href="/">Back to the runs</Link>
          </div>
        )}
      </main>
      <div class="toasts" aria-live="polite">
        {toasts.map((t) => (
          <div key={t.id} class={`toast toast-${t.tone}`}>
            {t.message}
          </div>
        ))}
      </div>
      {loginOpen && (
        <LoginDialog
          identity={identity}
          onClose={() => setLoginOpen(false)}
          onToken={(next) => {
            setLoginOpen(false);
            props.onToken(next);
          }}
        />
      )}
    </AppContext.Provider>
  );
}

function LiveIndicator(props: { state: StreamState }) {
  const label = props.state === "live" ? "Live" : props.state === "connecting" ? "Connecting" : "Reconnecting";
  return (
    <span class={`live live-${props.state}`} title={props.state === "live" ? "Receiving changes as they happen" : "The event stream is reconnecting"}>
      <span class="dot" aria-hidden="true" />
      {label}
    </span>
  );
}
