import { useEffect, useRef, useState } from "preact/hooks";

export type StreamState = "connecting" | "live" | "retrying";

/** Where an event stream is read from: the URL (with the cursor) and the headers (the token). */
export interface StreamRequest {
  url: string;
  headers: Record<string, string>;
}

interface SseMessage {
  event: string;
  id: string;
  data: string;
}

/** Splits a text/event-stream into messages (fields `event`, `id`, `data`; comments skipped). */
class SseSplitter {
  private buffer = "";
  private event = "message";
  private id = "";
  private data: string[] = [];

  push(chunk: string): SseMessage[] {
    this.buffer += chunk;
    const out: SseMessage[] = [];
    let newline: number;
    while ((newline = this.buffer.search(/\r\n|\n|\r/)) >= 0) {
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + (this.buffer.startsWith("\r\n", newline) ? 2 : 1));
      if (line === "") {
        if (this.data.length) out.push({ event: this.event, id: this.id, data: this.data.join("\n") });
        this.event = "message";
        this.data = [];
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") this.event = value;
      else if (field === "data") this.data.push(value);
      else if (field === "id") this.id = value;
    }
    return out;
  }
}

/**
 * An event stream that stays connected, read with fetch so the token travels in the
 * Authorization header (never in the URL, where logs and history would keep it). When the
 * connection drops or the server refuses, it reconnects after a pause, continuing from the last
 * event id through `request(lastId)`.
 */
export function useEventStream(
  request: ((lastId: string | null) => StreamRequest) | null,
  handlers: Record<string, (data: unknown, id: string) => void>,
  options: { onOpen?: () => void; key?: unknown } = {},
): StreamState {
  const [state, setState] = useState<StreamState>("connecting");
  const handlersRef = useRef(handlers);
  handlersRef.current = handlers;
  const onOpenRef = useRef(options.onOpen);
  onOpenRef.current = options.onOpen;
  const names = Object.keys(handlers).join(",");
  const enabled = request !== null;
  const requestRef = useRef(request);
  requestRef.current = request;

  useEffect(() => {
    if (!enabled) return;
    const controller = new AbortController();
    let lastId: string | null = null;
    let retryTimer: number | undefined;
    const wanted = new Set(names.split(","));
    const open = async () => {
      const build = requestRef.current;
      if (controller.signal.aborted || !build) return;
      setState("connecting");
      try {
        const { url, headers } = build(lastId);
        const response = await fetch(url, { headers: { accept: "text/event-stream", ...headers }, signal: controller.signal, cache: "no-store" });
        if (!response.ok || !response.body) throw new Error(`the event stream answered ${response.status}`);
        setState("live");
        onOpenRef.current?.();
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        const splitter = new SseSplitter();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          for (const message of splitter.push(value)) {
            if (message.id) lastId = message.id;
            if (!wanted.has(message.event)) continue;
            let data: unknown;
            try {
              data = JSON.parse(message.data);
            } catch {
              continue;
            }
            handlersRef.current[message.event]?.(data, message.id);
          }
        }
      } catch {
        // Dropped, refused or unreachable: try again below.
      }
      if (controller.signal.aborted) return;
      setState("retrying");
      retryTimer = window.setTimeout(() => void open(), 2000);
    };
    void open();
    return () => {
      controller.abort();
      window.clearTimeout(retryTimer);
    };
  }, [enabled, names, options.key]);

  return state;
}
