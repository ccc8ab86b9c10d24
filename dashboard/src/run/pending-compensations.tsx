import type { RunView } from "../api/types.js";
import { Icon } from "../ui/icons.js";

/** What a cancel would undo right now, newest first. */
export function PendingCompensations(props: { run: RunView }) {
  const pending = props.run.pendingCompensations;
  if (!pending.length) return null;
  return (
    <section class="card" data-testid="pending-compensations">
      <header class="card-head">
        <h2>
          <Icon name="undo" /> Undone on cancel
        </h2>
        <span class="muted small">{pending.length}</span>
      </header>
      <ul class="plain-list">
        {pending.map((c) => (
          <li key={c.callSeq}>
            <code>{c.tool}</code> <span class="muted mono">#{c.callSeq}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}
