import type { JSX } from "preact";
import type { Json } from "../api/types.js";

const token = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false|null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;

/** Pretty-printed JSON with quiet syntax colours; long values scroll inside the block. */
export function JsonView(props: { value: Json | unknown; maxHeight?: number; testId?: string }) {
  const text = JSON.stringify(props.value, null, 2) ?? "undefined";
  const parts: (string | JSX.Element)[] = [];
  let last = 0;
  let key = 0;
  for (const match of text.matchAll(token)) {
    const index = match.index ?? 0;
    if (index > last) parts.push(text.slice(last, index));
    const [whole, string, colon, literal, number] = match;
    if (string !== undefined) {
      parts.push(
        <span key={key++} class={colon ? "j-key" : "j-str"}>
          {string}
        </span>,
      );
      if (colon) parts.push(colon);
    } else if (literal !== undefined) parts.push(<span key={key++} class="j-lit">{literal}</span>);
    else if (number !== undefined) parts.push(<span key={key++} class="j-num">{number}</span>);
    else parts.push(whole);
    last = index + whole.length;
  }
  if (last < text.length) parts.push(text.slice(last));
  return (
    <pre class="json" style={props.maxHeight ? { maxHeight: `${props.maxHeight}px` } : undefined} data-testid={props.testId}>
      {parts}
    </pre>
  );
}
