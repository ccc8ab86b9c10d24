import { useEffect, useRef, useState } from "preact/hooks";

export type StreamState = "connecting" | "live" | "retrying";

/**
 * An EventSource that stays connected. The browser reconnects by itself (sending
 * Last-Event-ID); when it gives up (the server refused or went away) a new one is opened after a
 * pause, continuing from the last event id through `url(lastId)`.
 */
export function useEventStream(
  url: ((lastId: string | null) => string) | null,
  handlers: Record<string, (data: unknown, id: string) => void>,
  options: { onOpen?: () => void; key?: unknown } = {},
): StreamState {
  const [state, setState] = useState<StreamState>("connecting");
  const handlersRef = useRef(handlers);
  handlersRef.current = handlers;
  const onOpenRef = useRef(options.onOpen);
  onOpenRef.current = options.onOpen;
  const names = Object.keys(handlers).join(",");
  const enabled = url !== null;
  const urlRef = useRef(url);
  urlRef.current = url;

  useEffect(() => {
    if (!enabled) return;
    let source: EventSource | null = null;
    let lastId: string | null = null;
    let retryTimer: number | undefined;
    let stopped = false;
    const open = () => {
      const build = urlRef.current;
      if (stopped || !build) return;
      setState("connecting");
      source = new EventSource(build(lastId));
      source.onopen = () => {
        setState("live");
        onOpenRef.current?.();
      };
      source.onerror = () => {
        if (stopped || !source) return;
        if (source.readyState === EventSource.CLOSED) {
          source = null;
          setState("retrying");
          retryTimer = window.setTimeout(open, 2000);
        } else setState("retrying");
      };
      for (const name of names.split(",")) {
        source.addEventListener(name, (event) => {
          const message = event as MessageEvent<string>;
          if (message.lastEventId) lastId = message.lastEventId;
          let data: unknown;
          try {
            data = JSON.parse(message.data);
          } catch {
            return;
          }
          handlersRef.current[name]?.(data, message.lastEventId);
        });
      }
    };
    open();
    return () => {
      stopped = true;
      window.clearTimeout(retryTimer);
      source?.close();
    };
  }, [enabled, names, options.key]);

  return state;
}
