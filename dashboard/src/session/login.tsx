import { useState } from "preact/hooks";
import type { ApiError } from "../api/api-error.js";
import { Dialog } from "../ui/dialog.js";
import type { Identity } from "./session.js";

function TokenForm(props: { onToken: (token: string | null) => void; error?: ApiError; submitLabel: string }) {
  const [value, setValue] = useState("");
  return (
    <form
      class="stack"
      onSubmit={(event) => {
        event.preventDefault();
        if (value.trim()) props.onToken(value.trim());
      }}
    >
      <label class="field">
        <span class="label">API token</span>
        <input
          class="input mono"
          type="password"
          autoComplete="off"
          spellcheck={false}
          placeholder="tt_…"
          value={value}
          onInput={(e) => setValue((e.target as HTMLInputElement).value)}
          autofocus
          data-testid="token-input"
        />
      </label>
      {props.error && <p class="error-text">{props.error.message}</p>}
      <p class="hint">
        Create one with <code>tether token create --role operator --name you</code>. It is kept for this browser tab only (session storage).
      </p>
      <div class="row-end">
        <button class="btn btn-primary" type="submit" disabled={!value.trim()}>
          {props.submitLabel}
        </button>
      </div>
    </form>
  );
}

/** Shown when the server asks for a token (401). */
export function LoginScreen(props: { error?: ApiError; onToken: (token: string | null) => void }) {
  return (
    <div class="splash">
      <div class="card splash-card">
        <div class="brand brand-lg">
          <span class="brand-mark" aria-hidden="true" />
          Tether
        </div>
        <p class="muted">This server needs an API token to show its runs.</p>
        <TokenForm onToken={props.onToken} error={props.error} submitLabel="Sign in" />
      </div>
    </div>
  );
}

export function LoginDialog(props: { identity: Identity; onClose: () => void; onToken: (token: string | null) => void }) {
  const { identity } = props;
  const how = identity.source === "whoami" ? "as the server reports" : identity.source === "open" ? "the server runs open on loopback (no tokens configured)" : "worked out from what the server allows";
  return (
    <Dialog title="Token" onClose={props.onClose}>
      <div class="dialog-body stack">
        <p>
          Signed in as <strong>{identity.name}</strong> with the <span class={`role role-${identity.role}`}>{identity.role}</span> role <span class="muted">({how})</span>.
        </p>
        <TokenForm onToken={props.onToken} submitLabel="Use this token" />
        <div class="row-end">
          <button class="btn btn-ghost" onClick={() => props.onToken(null)}>
            Forget the token
          </button>
        </div>
      </div>
    </Dialog>
  );
}
