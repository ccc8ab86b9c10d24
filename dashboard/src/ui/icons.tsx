/** A handful of 16 px stroke icons, inline so nothing is fetched. */
const paths = {
  pause: "M6 4v8M10 4v8",
  play: "M5 3.5v9l7-4.5z",
  stop: "M4.5 4.5l7 7M11.5 4.5l-7 7",
  fork: "M5 3v4a3 3 0 0 0 3 3h0a3 3 0 0 1 3 3v0M11 3v10M5 3a1 1 0 1 0 0 .01M11 3",
  model: "M8 2l1.5 3.5L13 7l-3.5 1.5L8 12l-1.5-3.5L3 7l3.5-1.5z",
  tool: "M10.5 2.5a3 3 0 0 0-3.9 3.9L2.5 10.5l3 3 4.1-4.1a3 3 0 0 0 3.9-3.9l-1.9 1.9-1.6-.4-.4-1.6z",
  check: "M3.5 8.5l3 3 6-7",
  alert: "M8 2.5l6 11H2zM8 7v3M8 12v.01",
  undo: "M5 6H10a3 3 0 0 1 0 6H7M5 6l2.5-2.5M5 6l2.5 2.5",
  chevron: "M6 4l4 4-4 4",
  shield: "M8 2l5 2v4c0 3-2.2 5.2-5 6-2.8-.8-5-3-5-6V4z",
  key: "M10 2.5a3.5 3.5 0 1 0 .01 0M7.5 8.5L2.5 13.5M4 12l1.5 1.5",
  plus: "M8 3v10M3 8h10",
  refresh: "M13 8a5 5 0 1 1-1.5-3.5M13 2.5v3h-3",
  copy: "M5.5 5.5h7v7h-7zM3.5 10.5v-7h7",
} as const;

export type IconName = keyof typeof paths;

export function Icon(props: { name: IconName; class?: string; title?: string }) {
  return (
    <svg class={`icon ${props.class ?? ""}`} viewBox="0 0 16 16" width="16" height="16" aria-hidden={props.title ? undefined : "true"} role={props.title ? "img" : undefined}>
      {props.title ? <title>{props.title}</title> : null}
      <path d={paths[props.name]} fill="none" stroke="currentColor" stroke-width="1.5" stroke-linecap="round" stroke-linejoin="round" />
    </svg>
  );
}

export function Spinner() {
  return <span class="spinner" aria-label="working" />;
}
