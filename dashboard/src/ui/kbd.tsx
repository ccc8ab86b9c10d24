export function Kbd(props: { children: string }) {
  return <kbd class="kbd">{props.children}</kbd>;
}
