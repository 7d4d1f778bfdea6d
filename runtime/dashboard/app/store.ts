// A value several components watch: the sign-in and connection state every view shares.
import { useEffect, useState } from 'preact/hooks';

export class Store<T> {
  private readonly listeners = new Set<(value: T) => void>();

  constructor(private current: T) {}

  get(): T {
    return this.current;
  }

  set(value: T): void {
    if (Object.is(value, this.current)) return;
    this.current = value;
    for (const listener of this.listeners) listener(value);
  }

  subscribe(listener: (value: T) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

export function useStore<T>(store: Store<T>): T {
  const [value, setValue] = useState(store.get());
  useEffect(() => {
    setValue(store.get());
    return store.subscribe(setValue);
  }, [store]);
  return value;
}
