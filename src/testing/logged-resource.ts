import { resource, type ResourceDefinition } from "../engine/resource.js";

/**
 * A resource for tests that logs what happens to it in `calls`: each acquire makes a new handle
 * (`handle-1`, `handle-2`, …) recorded as `{ session: <handle> }`, and the log reads
 * `acquire handle-1`, `reattach handle-2 (was {"session":"handle-1"})`,
 * `release handle-2 {"session":"handle-2"}`, `abandon handle-1`.
 */
export function loggedResource(name: string, calls: string[], options: Pick<ResourceDefinition, "releaseOnPause"> = {}): ResourceDefinition<string> {
  let handles = 0;
  return resource({
    name,
    ...options,
    acquire: ({ previous }) => {
      const handle = `handle-${++handles}`;
      calls.push(previous ? `reattach ${handle} (was ${JSON.stringify(previous)})` : `acquire ${handle}`);
      return handle;
    },
    record: (handle) => ({ session: handle }),
    release: (handle, record) => {
      calls.push(`release ${handle} ${JSON.stringify(record)}`);
    },
    abandon: (handle) => {
      calls.push(`abandon ${handle}`);
    },
  });
}
