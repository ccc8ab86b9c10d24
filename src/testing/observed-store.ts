/** The store, telling `onCall` of every method called on it just before the call goes through. */
export function observedStore<S extends object>(store: S, onCall: (method: string, args: unknown[]) => void): S {
  return new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        onCall(String(property), args);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}
