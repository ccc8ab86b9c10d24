import { useEffect, useRef } from "preact/hooks";
import type { RunView, StateResponse } from "../api/types.js";
import { formatDuration } from "../ui/format.js";
import { Icon } from "../ui/icons.js";
import { JsonView } from "../ui/json-view.js";
import { useNow } from "../ui/use-now.js";
import { modelText } from "./call-text.js";
import { callStatus, type CallView, type Timeline } from "./timeline-model.js";

/**
 * The hero of the run page: the model's text as it streams (the latest model call), and what
 * tool is running right now.
 */
export function LiveOutput(props: { run: RunView; timeline: Timeline; texts: ReadonlyMap<number, string>; state: StateResponse | null }) {
  const { timeline, texts, state } = props;
  let lastModel: CallView | undefined;
  for (const item of timeline.items) if (item.type === "call" && item.call.kind === "model") lastModel = item.call;
  const current = timeline.current;
  const toolRunning = current?.kind === "tool" ? current : undefined;
  const streaming = current?.kind === "model" && current === lastModel;
  const text = lastModel ? modelText(lastModel, texts, state) : undefined;
  const now = useNow(200, current !== undefined);
  const body = useRef<HTMLDivElement>(null);
  const stick = useRef(true);

  useEffect(() => {
    const el = body.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, [text]);

  return (
    <section class="card live-output" data-testid="live-output">
      <header class="card-head">
        <h2>
          <Icon name="model" /> Model output
        </h2>
        {lastModel && (
          <span class="muted small mono">
            {lastModel.name} · call #{lastModel.callSeq}
            {streaming ? ` · streaming ${formatDuration(now - lastModel.startedAt)}` : ` · ${callStatus(lastModel)}`}
          </span>
        )}
      </header>
      <div
        class="stream"
        ref={body}
        onScroll={(e) => {
          const el = e.currentTarget;
          stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
        }}
      >
        {lastModel === undefined ? (
          <p class="muted">{props.run.status === "queued" ? "Waiting for a worker to pick the run up…" : "No model call yet."}</p>
        ) : (
          <p class={`stream-text${streaming ? " streaming" : ""}`} data-testid="stream-text" data-call-seq={lastModel.callSeq} data-streaming={streaming ? "true" : "false"}>
            {text ?? (streaming ? "" : <span class="muted">{lastModel.outcome === "aborted" && lastModel.streamedChars ? `(${lastModel.streamedChars} characters streamed before it stopped)` : "(no text)"}</span>)}
            {streaming && <span class="caret" aria-hidden="true" />}
          </p>
        )}
        {lastModel?.outcome === "aborted" && !streaming && (
          <p class="muted small">{lastModel.reason === "pause" ? "Stopped by the pause: the model call is issued again on resume." : `Stopped (${lastModel.reason ?? "aborted"}).`}</p>
        )}
      </div>
      {toolRunning && (
        <div class="tool-now" data-testid="tool-running">
          <Icon name="tool" />
          <span>
            Running <code>{toolRunning.name}</code> · {formatDuration(now - toolRunning.startedAt)}
          </span>
          {toolRunning.input !== undefined && <JsonView value={toolRunning.input} maxHeight={120} />}
        </div>
      )}
    </section>
  );
}
