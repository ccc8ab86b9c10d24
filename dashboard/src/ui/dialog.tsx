import type { ComponentChildren } from "preact";
import { useEffect, useRef } from "preact/hooks";

/** A modal over the page: Escape or the backdrop closes it (unless `busy`), focus moves inside. */
export function Dialog(props: { title: string; onClose: () => void; children: ComponentChildren; tone?: "danger" | "default"; busy?: boolean; testId?: string; wide?: boolean }) {
  const ref = useRef<HTMLDivElement>(null);
  // Read through refs so re-rendering the dialog (live data) neither refocuses nor re-binds.
  const latest = useRef({ onClose: props.onClose, busy: props.busy });
  latest.current = { onClose: props.onClose, busy: props.busy };
  useEffect(() => {
    const previous = document.activeElement as HTMLElement | null;
    const first = ref.current?.querySelector<HTMLElement>("[autofocus], input, textarea, select, button:not([disabled])");
    first?.focus();
    const onKey = (event: KeyboardEvent) => {
      if (event.key === "Escape" && !latest.current.busy) {
        event.stopPropagation();
        latest.current.onClose();
      }
    };
    window.addEventListener("keydown", onKey, true);
    return () => {
      window.removeEventListener("keydown", onKey, true);
      previous?.focus?.();
    };
  }, []);
  return (
    <div class="backdrop" onMouseDown={(event) => event.target === event.currentTarget && !props.busy && props.onClose()}>
      <div class={`dialog${props.tone === "danger" ? " dialog-danger" : ""}${props.wide ? " dialog-wide" : ""}`} role="dialog" aria-modal="true" aria-label={props.title} ref={ref} data-testid={props.testId}>
        <header class="dialog-head">
          <h2>{props.title}</h2>
          <button class="btn-icon" onClick={props.onClose} disabled={props.busy} aria-label="Close">
            ×
          </button>
        </header>
        {props.children}
      </div>
    </div>
  );
}
