import { useEffect, useRef, useState } from "preact/hooks";
import { errorMessage } from "../api/api-error.js";
import type { JsonObject, Message, RunView, StateResponse } from "../api/types.js";
import { useApp } from "../app-context.js";
import { roleAllows } from "../session/session.js";
import { fullTime } from "../ui/format.js";
import { JsonView } from "../ui/json-view.js";
import { mergePatchBetween } from "./vars-patch.js";

type Tab = "messages" | "vars" | "json";

function MessageItem(props: { message: Message; index: number }) {
  const { message } = props;
  return (
    <li class={`msg msg-${message.role}`} data-index={props.index}>
      <div class="msg-head">
        <span class="msg-role">{message.role === "tool" ? `tool · ${message.toolName}` : message.role}</span>
        {message.role === "user" && message.author && <span class="muted small">from {message.author}</span>}
        {message.role === "tool" && message.isError && <span class="error-text small">error</span>}
        <span class="muted small mono msg-index">#{props.index}</span>
      </div>
      {message.role === "tool" ? (
        typeof message.content === "string" ? <p class="msg-text">{message.content}</p> : <JsonView value={message.content} maxHeight={180} />
      ) : (
        <p class="msg-text">{message.content || <span class="muted">(no text)</span>}</p>
      )}
      {message.role === "assistant" && message.toolCalls?.length ? (
        <div class="msg-tools">
          {message.toolCalls.map((c) => (
            <div key={c.toolCallId} class="small">
              → <code>{c.toolName}</code> <span class="mono muted">{JSON.stringify(c.input).slice(0, 160)}</span>
            </div>
          ))}
        </div>
      ) : null}
    </li>
  );
}

function VarsTable(props: { vars: JsonObject }) {
  const entries = Object.entries(props.vars);
  if (!entries.length) return <p class="muted small pad">No vars.</p>;
  return (
    <table class="vars-table">
      <tbody>
        {entries.map(([key, value]) => (
          <tr key={key}>
            <th class="mono">{key}</th>
            <td class="mono">{typeof value === "object" && value !== null ? JSON.stringify(value) : String(value)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function Editors(props: { run: RunView; state: StateResponse; onChanged: (run: RunView) => void }) {
  const { client } = useApp();
  const [message, setMessage] = useState("");
  const [saved, setSaved] = useState<"message" | "vars" | null>(null);
  const [varsText, setVarsText] = useState(() => JSON.stringify(props.state.state.vars, null, 2));
  const [varsDirty, setVarsDirtyState] = useState(false);
  // Read by the effect below when it runs, not as of the render that scheduled it: an edit typed
  // between a new state's render and its effect must not be overwritten by that state's vars.
  const varsDirtyRef = useRef(false);
  const setVarsDirty = (dirty: boolean) => {
    varsDirtyRef.current = dirty;
    setVarsDirtyState(dirty);
  };
  const [messageError, setMessageError] = useState<string | null>(null);
  const [varsError, setVarsError] = useState<string | null>(null);
  const [busy, setBusy] = useState<"message" | "vars" | null>(null);

  useEffect(() => {
    if (!varsDirtyRef.current) setVarsText(JSON.stringify(props.state.state.vars, null, 2));
  }, [props.state, varsDirty]);

  const addMessage = async () => {
    if (!message.trim()) return;
    setBusy("message");
    setMessageError(null);
    try {
      props.onChanged(await client.editState(props.run.id, { message: message.trim() }));
      setMessage("");
      setSaved("message");
    } catch (error) {
      setMessageError(errorMessage(error));
    } finally {
      setBusy(null);
    }
  };

  const saveVars = async () => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(varsText);
    } catch (error) {
      setVarsError(`Not valid JSON: ${(error as Error).message}`);
      return;
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      setVarsError("The vars must be a JSON object");
      return;
    }
    const patch = mergePatchBetween(props.state.state.vars, parsed as JsonObject);
    if (!Object.keys(patch).length) {
      setVarsError("Nothing changed");
      return;
    }
    setBusy("vars");
    setVarsError(null);
    try {
      props.onChanged(await client.editState(props.run.id, { patch: { vars: patch } }));
      setVarsDirty(false);
      setSaved("vars");
    } catch (error) {
      setVarsError(errorMessage(error));
    } finally {
      setBusy(null);
    }
  };

  return (
    <div class="editors">
      <div class="editor stack-sm">
        <label class="field">
          <span class="label">Add a message for the agent</span>
          <textarea
            class="input"
            rows={3}
            value={message}
            placeholder="e.g. Focus on primary sources; skip the blog posts."
            onInput={(e) => {
              setMessage((e.target as HTMLTextAreaElement).value);
              setSaved(null);
            }}
            onKeyDown={(e) => {
              if (e.key === "Enter" && (e.metaKey || e.ctrlKey)) void addMessage();
            }}
            data-testid="message-input"
          />
        </label>
        {messageError && (
          <p class="error-text" data-testid="message-error">
            {messageError}
          </p>
        )}
        <div class="row-end">
          {saved === "message" && <span class="saved">Added: the agent reads it when it resumes</span>}
          <button class="btn" onClick={() => void addMessage()} disabled={busy !== null || !message.trim()} data-testid="add-message">
            {busy === "message" ? "Adding…" : "Add message"}
          </button>
        </div>
      </div>
      <div class="editor stack-sm">
        <label class="field">
          <span class="label">Edit the vars (JSON)</span>
          <textarea
            class={`input mono${varsError ? " input-error" : ""}`}
            rows={Math.min(12, Math.max(4, varsText.split("\n").length))}
            value={varsText}
            spellcheck={false}
            onInput={(e) => {
              setVarsText((e.target as HTMLTextAreaElement).value);
              setVarsDirty(true);
              setVarsError(null);
              setSaved(null);
            }}
            data-testid="vars-input"
          />
        </label>
        {varsError && (
          <p class="error-text" data-testid="vars-error">
            {varsError}
          </p>
        )}
        <div class="row-end">
          {saved === "vars" && <span class="saved">Saved</span>}
          {varsDirty && (
            <button
              class="btn btn-ghost"
              onClick={() => {
                setVarsDirty(false);
                setVarsError(null);
                setVarsText(JSON.stringify(props.state.state.vars, null, 2));
              }}
            >
              Revert
            </button>
          )}
          <button class="btn" onClick={() => void saveVars()} disabled={busy !== null || !varsDirty} data-testid="save-vars">
            {busy === "vars" ? "Saving…" : "Save vars"}
          </button>
        </div>
      </div>
    </div>
  );
}

/** The agent's durable state at the latest snapshot: readable, as JSON, and editable while paused. */
export function StatePanel(props: { run: RunView; state: StateResponse | null; error: string | null; onChanged: (run: RunView) => void }) {
  const { identity } = useApp();
  const [tab, setTab] = useState<Tab>("messages");
  const { state, run } = props;
  const editable = run.status === "paused" && roleAllows(identity.role, "operator");
  const [open, setOpen] = useState(run.status === "paused");
  useEffect(() => {
    if (run.status === "paused") setOpen(true);
  }, [run.status]);
  // The newest messages matter most: start the conversation scrolled to its end.
  const body = useRef<HTMLDivElement>(null);
  const messageCount = state?.state.messages.length ?? 0;
  useEffect(() => {
    if (open && tab === "messages" && body.current) body.current.scrollTop = body.current.scrollHeight;
  }, [open, tab, messageCount]);
  return (
    <section class={`card state-card${run.status === "paused" ? " state-card-paused" : ""}`} data-testid="state-panel">
      <header class="card-head clickable" onClick={() => setOpen((o) => !o)}>
        <h2>State</h2>
        {state && (
          <span class="muted small">
            {state.state.messages.length} messages · {Object.keys(state.state.vars).length} vars · snapshot at step {state.step}, {fullTime(state.snapshotAt)}
          </span>
        )}
        <span class="grow" />
        <span class="btn-link small">{open ? "Hide" : "Inspect"}</span>
      </header>
      {open && (
        <>
          <div class="tabs" role="tablist">
            {(["messages", "vars", "json"] as const).map((t) => (
              <button key={t} role="tab" aria-selected={tab === t} class={`tab${tab === t ? " tab-on" : ""}`} onClick={() => setTab(t)}>
                {t === "messages" ? "Messages" : t === "vars" ? "Vars" : "JSON"}
              </button>
            ))}
          </div>
          {props.error && <p class="error-text pad">{props.error}</p>}
          {!state ? (
            <p class="muted pad">Loading the state…</p>
          ) : (
            <div class="state-body" ref={body}>
              {tab === "messages" && (
                <ol class="messages" data-testid="messages">
                  {state.state.messages.map((m, i) => (
                    <MessageItem key={i} message={m} index={i} />
                  ))}
                </ol>
              )}
              {tab === "vars" && <VarsTable vars={state.state.vars} />}
              {tab === "json" && <JsonView value={state.state} maxHeight={420} testId="state-json" />}
            </div>
          )}
          {editable && state && <Editors run={run} state={state} onChanged={props.onChanged} />}
          {run.status === "paused" && !editable && <p class="muted small pad">Editing the state needs the operator role.</p>}
        </>
      )}
    </section>
  );
}
