// The worker half of "exit with the parent": a worker started by ChildProcessWorkerLauncher calls
// installParentWatch() first thing, and exits as soon as the launcher's process is gone, even when that
// process was SIGKILLed and could not stop its children.
//
// How: the launcher opens an IPC channel to each child ('ipc' in stdio). The kernel closes that socket
// when the parent dies however it dies, and Node then emits 'disconnect' in the child. Linux offers no
// portable parent-death signal to Node programs, so this is the dependable signal.

export interface ParentWatchOptions {
  /** Runs before exiting (flush logs, close files); bounded by `graceMs`. */
  readonly onParentGone?: () => void | Promise<void>;
  /** @default 1 */
  readonly exitCode?: number;
  /** @default 2000 */
  readonly graceMs?: number;
}

/**
 * Makes this process exit when its launcher's IPC channel closes. Returns false (and does nothing) when
 * the process has no IPC channel, i.e. it was not started with exitWithParent.
 */
export function installParentWatch(options: ParentWatchOptions = {}): boolean {
  const channel = process.channel;
  if (channel === undefined || typeof process.send !== 'function') return false;
  const exitCode = options.exitCode ?? 1;
  let leaving = false;
  const leave = (): void => {
    if (leaving) return;
    leaving = true;
    process.stderr.write(
      `${JSON.stringify({ t: new Date().toISOString(), level: 'warn', component: 'parent-watch', msg: 'launcher process is gone; exiting', pid: process.pid })}\n`,
    );
    const forced = setTimeout(() => process.exit(exitCode), options.graceMs ?? 2_000);
    forced.unref();
    Promise.resolve()
      .then(() => options.onParentGone?.())
      .catch(() => undefined)
      .finally(() => process.exit(exitCode));
  };
  process.on('disconnect', leave);
  // Listening for 'disconnect' refs the channel; unref it so the channel alone does not keep a worker
  // that has finished its work alive.
  channel.unref();
  // The parent may already be gone before the listener was added.
  if (!process.connected) leave();
  return true;
}
