import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";

/** Client-side routes on real paths (`/`, `/runs/:id`, `/operator`); the server answers every path with the app. */
export type Route = { page: "runs" } | { page: "run"; id: string } | { page: "operator" } | { page: "missing"; path: string };

export function parseRoute(path: string): Route {
  if (path === "/" || path === "" || path === "/runs") return { page: "runs" };
  const run = /^\/runs\/([^/]+)\/?$/.exec(path);
  if (run) return { page: "run", id: decodeURIComponent(run[1]) };
  if (path === "/operator") return { page: "operator" };
  return { page: "missing", path };
}

const listeners = new Set<() => void>();

export function navigate(path: string): void {
  if (path === location.pathname) return;
  history.pushState(null, "", path);
  window.scrollTo(0, 0);
  for (const listener of listeners) listener();
}

export function useRoute(): Route {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const update = () => setPath(location.pathname);
    listeners.add(update);
    window.addEventListener("popstate", update);
    return () => {
      listeners.delete(update);
      window.removeEventListener("popstate", update);
    };
  }, []);
  return parseRoute(path);
}

export function Link(props: { href: string; class?: string; children: ComponentChildren; title?: string }) {
  return (
    <a
      href={props.href}
      class={props.class}
      title={props.title}
      onClick={(event) => {
        if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
        event.preventDefault();
        navigate(props.href);
      }}
    >
      {props.children}
    </a>
  );
}
